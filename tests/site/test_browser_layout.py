"""The static pages fit a laptop screen and a narrow window: measured in a real headless Chromium (DevTools pipe)."""

from __future__ import annotations

import base64
import shutil
from pathlib import Path
from typing import Any

import pytest

from grebench.settings import Settings
from grebench.site import build_site
from grebench.store import Store
from tests.site._cdp import Browser
from tests.site.conftest import requires_chromium
from tests.site.test_browser import keep_artifact
from tests.site.test_labels import HF_ID, realistic_ids

MEASURE = """(() => {
  const visible = (el) => getComputedStyle(el).display !== 'none' && el.getClientRects().length > 0;
  const board = document.querySelector('table.board');
  return {
    scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth,
    scrolledBoxes: [...document.querySelectorAll('table, .table-wrap')]
      .filter((t) => t.scrollWidth > t.clientWidth + 1).map((t) => t.className || t.tagName),
    columns: board ? [...board.tHead.rows[0].cells].filter(visible).map((th) => th.innerText.trim()) : [],
    moreShown: [...document.querySelectorAll('details.more')].filter(visible).length,
    rows: document.querySelectorAll('table.board tbody tr').length,
  };
})()"""
ALL_COLUMNS = ["Rank", "Candidate", "Score", "Style-controlled", "90% CI", "95% CI", "Rank interval", "Papers",
               "Clean papers", "Sealed share", "Δ vs human (p)", "Cost / review (USD)", "Latency / review (s)",
               "Lines + · 0 · −"]
NARROW_COLUMNS = ["Rank", "Candidate", "Score", "Style-controlled", "95% CI", "Rank interval", "Δ vs human (p)"]


def _open(browser: Browser, session: str, page: Path, width: int) -> dict[str, Any]:
    browser.open_page(session, page, width)
    return dict(browser.evaluate(session, MEASURE))


@pytest.mark.browser
@requires_chromium
def test_index_and_board_fit_1400_1366_and_800_pixels(small_store: Store, settings: Settings,
                                                     tmp_path: Path) -> None:
    realistic_ids(small_store)  # the long ids real estimators write, which used to widen the pages
    site = Path(build_site(small_store, settings, tmp_path / "site")["out"])
    board = next(p for p in (site / "boards").glob("iclr.cc-2020-*.html") if HF_ID in p.read_text())
    exe = shutil.which("chromium")
    assert exe is not None
    browser = Browser(exe, tmp_path / "profile")
    try:
        session = browser.open_tab("about:blank")
        for width in (1400, 1366, 800):
            for name, page in (("index", site / "index.html"), ("board", board)):
                m = _open(browser, session, page, width)
                where = f"{name} at {width}x900: {m}"
                assert m["innerWidth"] == width and m["rows"] == {"index": 8, "board": 4}[name], where
                assert m["scrollWidth"] <= m["innerWidth"], where  # no horizontal page scroll
                assert m["scrolledBoxes"] == [], where  # and no table that scrolls inside its box
                if width >= 1366:  # a laptop: every column, no folded details
                    assert m["columns"] == ALL_COLUMNS and m["moreShown"] == 0, where
                else:  # narrow: the less important columns fold into each row's "more"
                    assert m["columns"] == NARROW_COLUMNS and m["moreShown"] == m["rows"], where
                if width != 1366:
                    shot = browser.send("Page.captureScreenshot", {"format": "png"}, session)
                    png = tmp_path / f"site-{name}-{width}.png"
                    png.write_bytes(base64.b64decode(shot["data"]))
                    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
                    keep_artifact(png)
    finally:
        browser.close()

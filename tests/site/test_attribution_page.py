"""Per-line attribution on the pages (issue 35): the paper page shades each candidate's judgment lines by what they
add to the score, with the values on hover and a legend; the board says what share of the lines carry information;
a real headless Chromium renders the shading."""

from __future__ import annotations

import base64
import shutil
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from grebench.settings import Settings
from grebench.site import build_site
from grebench.site._data import slug
from grebench.store import Store
from tests.site._cdp import Browser
from tests.site.conftest import LINES, add_attribution, requires_chromium

SHOTS = Path("/work/notes/shots")
def _paper_file(site: Path, paper_id: str = "p2020_0") -> Path:
    return site / "papers" / f"{slug(paper_id)}.html"


def _page(site: Path, paper_id: str = "p2020_0") -> BeautifulSoup:
    return BeautifulSoup(_paper_file(site, paper_id).read_text(encoding="utf-8"), "html.parser")


def test_paper_page_shades_lines_with_values_and_a_legend(small_store: Store, settings: Settings,
                                                          tmp_path: Path) -> None:
    add_attribution(small_store)
    site = Path(build_site(small_store, settings, tmp_path / "site")["out"])
    dom = _page(site)
    legend = dom.select_one(".attr-legend")
    assert legend is not None and "0.1" in legend.get_text() and "less than none" in legend.get_text()
    blocks = dom.select(".review .attribution")
    assert len(blocks) == len(LINES)  # every candidate
    human = next(b for b in blocks if "line 0 of human" in b.get_text())
    items = human.select("li.attr")
    assert len(items) == 3
    # shading by the mean over the two references, and the value is printed and on hover with each reference
    assert "attr-carries" in items[0]["class"] and "shade-4" in items[0]["class"]
    assert float(items[0]["data-contribution"]) == pytest.approx(0.8)
    assert items[0].select_one(".attr-value").get_text() == "0.80"
    # each reference named as its review is titled on the page (the reviewer, not the note id)
    assert "Reviewer0: 0.900" in items[0]["title"] and "Reviewer1: 0.700" in items[0]["title"]
    assert [h.get_text(" ", strip=True).split(" · ")[0] for h in dom.select(".review h4")][:2] == ["Reviewer0",
                                                                                                "Reviewer1"]
    assert "attr-none" in items[1]["class"] and "attr-carries" in items[2]["class"]
    generic = next(b for b in blocks if "of generic" in b.get_text())
    assert "attr-less" in generic.select("li.attr")[0]["class"]
    assert human.select_one("li b") is None and "<b>bold</b>" in items[0].get_text()  # text, never markup
    # a paper without attribution shows neither the legend nor the blocks
    other = _page(site, "p2020_1")
    assert other.select_one(".attr-legend") is None and not other.select(".attribution")


def test_board_row_says_the_share_of_informative_lines(small_store: Store, settings: Settings,
                                                        tmp_path: Path) -> None:
    add_attribution(small_store)
    site = Path(build_site(small_store, settings, tmp_path / "site")["out"])
    board = next((site / "boards").glob("iclr.cc-2020-*.html"))
    dom = BeautifulSoup(board.read_text(encoding="utf-8"), "html.parser")
    row = dom.select_one('table.board tr[data-candidate="human"] td.lines-share')
    assert row.get_text() == "67% · 33% · 0%" and "3 judgment lines" in row["title"]
    generic = dom.select_one('table.board tr[data-candidate="generic"] td.lines-share')
    assert generic.get_text() == "0% · 50% · 50%"
    # a board of the other venue has no attribution: a dash, never another venue's lines
    other = next((site / "boards").glob("iclr.cc-2024-*.html"))
    dom = BeautifulSoup(other.read_text(encoding="utf-8"), "html.parser")
    assert {td.get_text() for td in dom.select("td.lines-share")} == {"—"}


@pytest.mark.browser
@requires_chromium
def test_paper_page_renders_the_shading_in_chromium(small_store: Store, settings: Settings, tmp_path: Path) -> None:
    add_attribution(small_store)
    site = Path(build_site(small_store, settings, tmp_path / "site")["out"])
    exe = shutil.which("chromium")
    assert exe is not None
    browser = Browser(exe, tmp_path / "profile")
    try:
        session = browser.open_tab("about:blank")
        browser.open_page(session, _paper_file(site), 1366, 1400)
        colours = browser.evaluate(session, """(() => {
          const bg = (sel) => [...document.querySelectorAll(sel)].map((el) => getComputedStyle(el).backgroundColor);
          return {carries: bg('.attribution li.attr-carries'), none: bg('.attribution li.attr-none'),
                  less: bg('.attribution li.attr-less'), visible: [...document.querySelectorAll('.attribution')]
                  .filter((el) => el.getClientRects().length > 0).length};
        })()""")
        assert colours["visible"] == len(LINES)
        green, grey, red = colours["carries"], colours["none"], colours["less"]
        assert green and grey and red
        transparent = "rgba(0, 0, 0, 0)"
        assert transparent not in green + grey + red  # the stylesheet shaded every line
        assert not set(green) & set(red) and not set(green) & set(grey)
        browser.evaluate(session, "document.querySelector('.attr-legend').scrollIntoView()")
        shot = browser.send("Page.captureScreenshot", {"format": "png"}, session)
        png = base64.b64decode(shot["data"])
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        if SHOTS.parent.is_dir():
            SHOTS.mkdir(exist_ok=True)
            (SHOTS / "i35-paper.png").write_bytes(png)
    finally:
        browser.close()

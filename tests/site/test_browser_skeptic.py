"""Issue 63's "done when", read in a real headless Chromium at 1366 and 390 px on one built site: the public
submissions log shows a refused and an accepted try (and a withdrawn one); the board shows the style-controlled
column and its coefficients, and what it can tell in words; a compare page opens from the board's picker and states
the paired test with links that resolve; axe-core finds no serious or critical violation on these pages; no header
breaks inside a word.  (The archive's download and import: ``test_browser_downloads.py``; the app: ``test_a11y.py``.)
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

from tests.site._cdp import Browser
from tests.site._cdp import wait_for as _wait
from tests.site.conftest import requires_chromium
from tests.site.test_a11y import SPLIT, _axe, _axe_source
from tests.site.test_submissions_log import _fill

pytestmark = [pytest.mark.browser, requires_chromium]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The submissions log's site (two scored variants of one submitter, one withdrawn, two refused tries), built
    with outbound connections refused (the refused endpoint is never called)."""
    real = socket.socket.connect

    def loopback_only(sock: socket.socket, address: Any) -> Any:
        if not (isinstance(address, tuple) and address[0] in ("127.0.0.1", "::1")):
            raise AssertionError(f"outbound connection to {address}")
        return real(sock, address)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket.socket, "connect", loopback_only)
        patch.setattr(socket, "getaddrinfo", lambda *a, **k: pytest.fail("no DNS lookup"))
        settings, ids = _fill(tmp_path_factory.mktemp("skeptic"))
    return settings.site_path, ids


def _page(browser: Browser, session: str, page: Path, width: int) -> None:
    browser.open_page(session, page, width)
    _wait(browser, session, "document.readyState === 'complete'", "the page")


@pytest.mark.parametrize("width", (1366, 390))
def test_a_skeptic_reads_the_log_the_style_view_and_a_comparison(site: tuple[Path, dict[str, str]],
                                                                  browser: Browser, width: int) -> None:
    root, ids = site
    source = _axe_source()
    session = browser.open_tab("about:blank")

    # the public log, reached from the index's navigation
    _page(browser, session, root / "index.html", width)
    href = browser.evaluate(session, "document.querySelector(\"nav a[href='submissions.html']\")?.href")
    assert href, "the index links the submissions log"
    log = Path(unquote(urlsplit(href).path))
    _page(browser, session, log, width)
    rows = browser.evaluate(session, """[...document.querySelectorAll('tr[data-id]')].map(tr => ({
        id: tr.dataset.id, status: tr.dataset.status, shown: tr.checkVisibility(),
        text: tr.innerText}))""")
    statuses = {r["id"]: r["status"] for r in rows}
    assert statuses[ids["good-llm"]] == "scored" and statuses[ids["late-llm"]] == "withdrawn"
    assert sorted(r["status"] for r in rows) == ["refused", "refused", "scored", "withdrawn"]
    assert all(r["shown"] for r in rows)
    assert any("unreachable-endpoint" in r["text"] for r in rows if r["status"] == "refused")
    assert _axe(browser, session, source) == [], ("submissions", width)
    assert browser.evaluate(session, SPLIT)["split"] == [], ("submissions", width)

    # the headline board: style-controlled column, its coefficients, the words, "best of N", a compare picker
    board = next(p for p in (root / "boards").glob("*.html")
                 if "compare-picker" in p.read_text(encoding="utf-8"))
    _page(browser, session, board, width)
    seen = browser.evaluate(session, """(() => {
        const heads = [...document.querySelectorAll('table.board.contestants th')].map(h => h.innerText.trim());
        const cells = [...document.querySelectorAll('table.board.contestants td.style-controlled')]
            .map(td => td.innerText.trim());
        const coef = [...document.querySelectorAll('section#style-control table.style-coefficients tbody tr')]
            .map(tr => tr.dataset.feature);
        const best = [...document.querySelectorAll('table.board.contestants tr')].some(
            tr => tr.innerText.includes('best of 2'));
        const picker = document.querySelector('details.compare-picker');
        if (picker) picker.open = true;
        const link = picker && [...picker.querySelectorAll('a')].find(a => a.href.includes('--'));
        return {heads, cells, coef, best, compare: link ? link.href : null,
                findings: !!document.querySelector('.findings')}; })()""")
    assert any(h.startswith("Style") for h in seen["heads"]), seen["heads"]
    assert seen["cells"] and any(c not in ("", "—") for c in seen["cells"]), seen["cells"]
    assert seen["coef"] == ["length_words", "list_items", "headings", "markdown_density"], seen["coef"]
    assert seen["best"] and seen["compare"], seen
    assert _axe(browser, session, source) == [], ("board", width)
    assert browser.evaluate(session, SPLIT)["split"] == [], ("board", width)

    # the comparison, opened from the picker's link: the paired test and the papers, whose links resolve
    compare = Path(unquote(urlsplit(seen["compare"]).path))
    assert compare.is_file(), compare
    _page(browser, session, compare, width)
    shown = browser.evaluate(session, """(() => {
        const test = document.querySelector('section#paired-test');
        const links = [...document.querySelectorAll('table.compare-papers a')].map(a => a.href);
        return {test: test ? test.innerText : '', links}; })()""")
    assert "sign-flip" in shown["test"] and shown["links"], shown
    for link in shown["links"]:
        assert Path(unquote(urlsplit(link).path)).is_file(), link
    assert _axe(browser, session, source) == [], ("compare", width)
    assert browser.evaluate(session, SPLIT)["split"] == [], ("compare", width)

"""Issue 63 §7 and §8, in a real headless Chromium at 1366 and 390 px: axe-core finds no serious or critical
violation on the site's index, a board, a paper and a model page, nor on the app's board, Paper and Submit tabs; no
header breaks inside a word; the static board says that it scrolls and scrolls in a focusable region; the app's board
shows its key columns on a phone and the rest behind a toggle; the address names the tab and the choices; a form
error is tied to its field; reviews are rendered markdown without the product's prompt delimiters; models are listed
before controls.

axe-core comes from the PyPI package ``axe-core-python`` (a dev dependency: its ``axe.min.js``, read from the
installed package without importing it)."""

from __future__ import annotations

import base64
import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bs4 import BeautifulSoup

from grebench.llm import fill
from grebench.settings import load_settings
from grebench.site import build_site
from grebench.site._app import create_app
from grebench.site._app_board import COLUMNS, KEY_HEADERS, key_rows
from grebench.site._data import candidates
from grebench.site._reviewtext import review_html, strip_prompt_markers
from grebench.store import Store, open_store
from tests.conftest import FAST_ENV
from tests.site._cdp import Browser
from tests.site._cdp import wait_for as _wait
from tests.site.conftest import fill_store, free_port, launch_app, requires_chromium
from tests.site.test_browser import keep_artifact
from tests.site.test_browser_submit import CLICK, FIND, RESULT, TYPE

#: A candidate review that echoes its prompt's fence and writes markdown (and hostile HTML).
LEAKED = fill("Review of the paper:\n{{PAPER}}\n", {"PAPER": "The **method** is `sound`. <script>alert(1)</script>"},
              ["PAPER"])[0]


def _axe_source() -> str:
    spec = importlib.util.find_spec("axe_core_python")  # (found, not imported: its modules import playwright)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("axe-core-python is not installed (pip install -e '.[dev]'): no axe.min.js")
    return (Path(next(iter(spec.submodule_search_locations))) / "axe.min.js").read_text(encoding="utf-8")


#: axe-core's serious and critical violations of the page (id, impact, the first nodes).
AXE_RUN = """axe.run(document, {resultTypes: ['violations']}).then(r => r.violations
  .filter(v => v.impact === 'serious' || v.impact === 'critical')
  .map(v => ({id: v.id, impact: v.impact,
               nodes: v.nodes.slice(0, 3).map(n => n.target.join(' ') + ': ' + (n.failureSummary || '').slice(0, 240))
  })))"""

#: Header words split over two lines, and header labels cut off, among the visible headers: a word's pieces are
#: measured with a Range (its client rects' tops); a hyphen may end a line ("Style-" / "controlled").
SPLIT = """(() => { const split = [], clipped = [];
  for (const th of document.querySelectorAll('th, [role=columnheader]')) {
    if (!th.checkVisibility()) continue;
    const walk = document.createTreeWalker(th, NodeFilter.SHOW_TEXT); let node;
    while ((node = walk.nextNode())) { const words = /[^\\s\\-\u2010]+/g; let m;
      while ((m = words.exec(node.textContent))) {
        const r = document.createRange(); r.setStart(node, m.index); r.setEnd(node, m.index + m[0].length);
        const tops = new Set([...r.getClientRects()].filter(x => x.width > 0).map(x => Math.round(x.top)));
        if (tops.size > 1) split.push(th.innerText.trim() + ': ' + m[0]); } }
    const label = th.querySelector('.header-content') || th;
    if (label.scrollWidth > label.clientWidth + 1) clipped.push(th.innerText.trim()); }
  return {split, clipped}; })()"""


#: The page has loaded, no Gradio output is updating (a status tracker over a faded output: "processing | 0.9s")
#: and no transition runs (an error box fades in: axe would read its text half-faded).
SETTLED = ("document.readyState === 'complete' && !document.querySelector('.pending, .generating') && "
           "document.getAnimations().every(a => a.playState !== 'running') && "
           "![...document.querySelectorAll('[data-testid=status-tracker]')].some(t => t.checkVisibility() && "
           "(t.innerText.trim() || t.classList.contains('translucent')))")


def _axe(browser: Browser, session: str, source: str) -> list[dict[str, Any]]:
    _wait(browser, session, SETTLED, "the page to settle")
    if not browser.evaluate(session, "typeof axe !== 'undefined'"):
        browser.evaluate(session, source + "\n;true")
    return list(browser.evaluate(session, AXE_RUN))


def _tab(browser: Browser, url: str, width: int) -> str:
    for old in browser.send("Target.getTargets")["targetInfos"]:  # one page at a time: the machine is small
        if old["type"] == "page" and old["url"] != "about:blank":
            browser.send("Target.closeTarget", {"targetId": old["targetId"]})
    session = browser.open_tab("about:blank")
    browser.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": 900, "deviceScaleFactor": 1,
                                                        "mobile": False}, session)
    browser.send("Page.navigate", {"url": url}, session)
    return session


def _store() -> Store:
    s = open_store(None)
    fill_store(s)
    s.con.execute("UPDATE generations SET text = ? WHERE generation_id = 'g_late-llm_p2020_0'", [LEAKED])
    return s


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    store = _store()
    try:
        yield Path(build_site(store, load_settings(env=dict(FAST_ENV)),
                              tmp_path_factory.mktemp("a11y-site") / "site")["out"])
    finally:
        store.con.close()


@pytest.fixture(scope="module")
def live_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("a11y-app")
    settings = load_settings(None, env={**FAST_ENV, "GREBENCH_DATA_DIR": str(root / "data"),
                                        "GREBENCH_APP_PORT": str(free_port())})
    store = open_store(settings.db_path)
    fill_store(store)
    store.con.execute("UPDATE generations SET text = ? WHERE generation_id = 'g_late-llm_p2024_0'", [LEAKED])
    store.export_parquet(settings.export_path)
    store.close()
    demo = create_app(settings, resolver={"api.model.example": ["93.184.216.34"]})
    url = launch_app(demo, settings)
    yield url.rstrip("/")
    demo.close()


# --- without a browser ---------------------------------------------------------------------------------------------

def test_prompt_delimiters_are_stripped_and_markdown_rendered_safely() -> None:
    assert "<<<" in LEAKED  # (the fence as grebench.llm writes it)
    assert strip_prompt_markers(LEAKED).startswith("Review of the paper:\nThe **method**")
    assert "<<<" not in strip_prompt_markers("a <<<REVIEW_ONE 0123456789abcdef>>> b <<<END PAPER …>>> <<<PAPER>>>")
    html = str(review_html(LEAKED))
    assert "<strong>method</strong>" in html and "<code>sound</code>" in html and "<<<" not in html
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert 'href="javascript' not in str(review_html("[x](javascript:alert(1))"))
    assert strip_prompt_markers("a <<< b >>> c, x<<<y") == "a <<< b >>> c, x<<<y"  # only the product's own form


def test_models_are_listed_before_the_baseline_and_the_controls(small_store: Store) -> None:
    roles = [c["role"] for c in candidates(small_store)]
    assert roles == sorted(roles, key=["contestant", "baseline", "reference"].index) and roles[0] == "contestant"


def test_key_columns_join_the_score_and_its_interval() -> None:
    row = {f: None for _, f in COLUMNS} | {"rank": "1", "candidate": "m", "score": 2.95, "ci95": "[2.10, 3.80]",
                                           "diff_vs_human": 0.4}
    assert key_rows([[row[f] for _, f in COLUMNS]]) == [["1", "m", "2.95 [2.10, 3.80]", 0.4]]
    assert KEY_HEADERS == ["Rank", "Candidate", "Score [95% CI]", "Δ vs human"]


def test_the_site_renders_reviews_and_lists_models_first(site: Path) -> None:
    paper = BeautifulSoup(next((site / "papers").glob("p2020_0-*.html")).read_text(), "html.parser")
    boxes = paper.select(".review .review-text")
    assert boxes and all(b.get("tabindex") == "0" and b.get("role") == "region" and b.get("aria-label")
                         for b in boxes)
    assert not paper.select(".review pre") and "<<<" not in paper.get_text()
    leaked = next(b for b in boxes if b["aria-label"] == "Review by late-llm")
    assert leaked.select_one("strong").get_text() == "method" and leaked.select_one("code").get_text() == "sound"
    index = BeautifulSoup((site / "index.html").read_text(), "html.parser")
    kinds = [tr.select("td")[1].get_text() for tr in index.select("h2 + table tbody tr")]
    assert kinds[0] == "llm" and kinds[-1] == "control", kinds


# --- in the browser ------------------------------------------------------------------------------------------------

@pytest.mark.browser
@requires_chromium
@pytest.mark.parametrize("width", (1366, 390))
def test_site_pages_pass_axe_and_the_board_says_it_scrolls(site: Path, browser: Browser, width: int,
                                                           tmp_path: Path) -> None:
    source = _axe_source()
    board = next((site / "boards").glob("iclr.cc-2020-*.html"))
    pages = {"index": site / "index.html", "board": board, "paper": next((site / "papers").glob("p2020_0-*.html")),
             "model": next((site / "models").glob("late-llm*.html"))}
    session = browser.open_tab("about:blank")
    for name, page in pages.items():
        browser.open_page(session, page, width)
        assert _axe(browser, session, source) == [], (name, width)
        assert browser.evaluate(session, SPLIT)["split"] == [], (name, width)
    browser.open_page(session, board, width)
    cue = browser.evaluate(session, """(() => { const box = document.querySelector('.table-scroll');
        const wrap = box.querySelector('.table-wrap'), hint = box.querySelector('.scroll-hint');
        return {scrolls: wrap.scrollWidth > wrap.clientWidth + 1, overflowing: box.classList.contains('overflowing'),
                hint: hint.checkVisibility(), fade: getComputedStyle(box, '::after').content !== 'none',
                tabindex: wrap.getAttribute('tabindex'), role: wrap.getAttribute('role'),
                name: document.getElementById(wrap.getAttribute('aria-labelledby'))?.innerText}; })()""")
    assert cue["tabindex"] == "0" and cue["role"] == "region" and cue["name"].startswith("Contestants"), cue
    if width == 390:  # the rank interval and Δ columns are off-screen: the box says it scrolls
        assert cue["scrolls"] and cue["overflowing"] and cue["hint"] and cue["fade"], cue
        # scrolled to its end, the fade goes (the hint stays: the box still scrolls back)
        browser.evaluate(session, "(() => { const w = document.querySelector('.table-wrap'); "
                                  "w.scrollLeft = w.scrollWidth; w.dispatchEvent(new Event('scroll')); })()")
        assert browser.evaluate(session, "document.querySelector('.table-scroll').classList.contains('at-end')")
    else:
        assert not cue["scrolls"] and not cue["hint"] and not cue["fade"], cue
    png = tmp_path / f"a11y-site-board-{width}.png"
    png.write_bytes(base64.b64decode(browser.send("Page.captureScreenshot", {"format": "png"}, session)["data"]))
    keep_artifact(png)


BOARD = ("[...document.querySelectorAll('#board-table [role=gridcell], #board-key [role=gridcell]')]"
         ".some(c => c.checkVisibility() && c.innerText.includes('good-llm')) "
         "&& !document.querySelector('.pending, .generating')")
VISIBLE = """(() => { const heads = (sel) => [...document.querySelectorAll(sel + ' [role=columnheader]')]
    .map(h => h.innerText.trim()).filter(x => x);
  const shown = (sel) => !!document.querySelector(sel)?.checkVisibility();
  return {key: shown('#board-key'), full: shown('#board-table'), toggle: shown('#board-all-columns'),
          keyHeads: heads('#board-key'), fullHeads: heads('#board-table')}; })()"""


@pytest.mark.browser
@requires_chromium
@pytest.mark.parametrize("width", (1366, 390))
def test_app_board_passes_axe_and_a_phone_sees_the_key_columns(live_app: str, browser: Browser,
                                                                width: int, tmp_path: Path) -> None:
    source = _axe_source()
    session = _tab(browser, live_app + "/", width)
    _wait(browser, session, BOARD, "the board")
    assert _axe(browser, session, source) == [], width
    headers = browser.evaluate(session, SPLIT)
    assert headers == {"split": [], "clipped": []}, headers
    view = browser.evaluate(session, VISIBLE)
    png = tmp_path / f"a11y-app-board-{width}.png"  # docs/site.md's screenshots (GREBENCH_TEST_ARTIFACTS keeps it)
    png.write_bytes(base64.b64decode(browser.send("Page.captureScreenshot", {"format": "png"}, session)["data"]))
    keep_artifact(png)
    if width == 1366:  # a laptop: the full board, no toggle
        assert view["full"] and not view["key"] and not view["toggle"], view
        assert "Rank interval (95%)" in view["fullHeads"] and "Δ vs human" in view["fullHeads"], view
        return
    assert view["key"] and not view["full"] and view["toggle"], view
    assert view["keyHeads"] == KEY_HEADERS, view
    cells = browser.evaluate(session, "[...document.querySelectorAll('#board-key [role=gridcell]')]"
                                      ".map(c => c.innerText.trim())")
    assert any(c.count("[") == 1 and c.split(" [")[0].replace(".", "").isdigit() for c in cells), cells
    # the toggle shows every column (and hides the key table); the full table then fills its rows
    browser.evaluate(session, "document.querySelector('#board-all-columns input').click()", user_gesture=True)
    _wait(browser, session, "(() => { const v = " + VISIBLE + "; return v.full && !v.key; })()", "all columns")
    _wait(browser, session, "[...document.querySelectorAll('#board-table [role=gridcell]')]"
                            ".some(c => c.checkVisibility() && c.innerText.includes('good-llm'))", "the full rows")
    assert "Rank interval (95%)" in browser.evaluate(session, VISIBLE)["fullHeads"]
    assert browser.evaluate(session, SPLIT) == {"split": [], "clipped": []}
    assert _axe(browser, session, source) == []


@pytest.mark.browser
@requires_chromium
def test_the_address_names_the_tab_and_the_choices(live_app: str, browser: Browser) -> None:
    source = _axe_source()
    session = _tab(browser, live_app + "/?tab=model&model=good-llm", 1366)
    _wait(browser, session, "document.querySelector('#model-choice input')?.value === 'good-llm'", "the Model tab")
    _wait(browser, session, "new URL(location.href).searchParams.get('model') === 'good-llm' && "
                            "new URL(location.href).searchParams.get('tab') === 'model'", "the address")
    # a click on another tab writes it into the address (history.replaceState: no new entry)
    length = browser.evaluate(session, "history.length")
    browser.evaluate(session, "[...document.querySelectorAll('[role=tab]')].find(t => t.innerText.trim() === "
                              "'Paper').click()", user_gesture=True)
    _wait(browser, session, "new URL(location.href).searchParams.get('tab') === 'paper'", "?tab=paper")
    assert browser.evaluate(session, "history.length") == length
    # the Paper tab: reviews as rendered markdown, no prompt delimiter, and no serious axe finding
    _wait(browser, session, "[...document.querySelectorAll('[role=gridcell]')].some(c => c.checkVisibility() && "
                            "c.innerText.includes('review of'))", "the Paper tab's reviews")
    paper = browser.evaluate(session, "document.querySelector('#paper-choice input').value")
    assert browser.evaluate(session, "new URL(location.href).searchParams.get('paper')") is not None, paper
    # the page's own choice of board is in the address, and a link to it opens that board
    params = browser.evaluate(session, "Object.fromEntries(new URL(location.href).searchParams)")
    assert params.get("venue") == "ICLR.cc/2024/Conference" and params.get("metric") == "gem-s", params
    session = _tab(browser, live_app + "/?venue=ICLR.cc%2F2020%2FConference", 1366)
    _wait(browser, session, "document.querySelector('#board-info')?.innerText.includes('ICLR 2020')", "ICLR 2020")
    session = _tab(browser, live_app + "/?tab=paper&paper=p2024_0", 390)
    _wait(browser, session, "[...document.querySelectorAll('[role=gridcell]')].some(c => c.checkVisibility() && "
                            "c.querySelector('strong')?.innerText === 'method')", "the leaked review, rendered")
    assert "<<<" not in browser.evaluate(session, "document.body.innerText")
    assert _axe(browser, session, source) == []


@pytest.mark.browser
@requires_chromium
@pytest.mark.parametrize("width", (1366, 390))
def test_submit_errors_are_tied_to_their_fields(live_app: str, browser: Browser, width: int) -> None:
    source = _axe_source()
    session = _tab(browser, live_app + "/?tab=submit", width)
    _wait(browser, session, f"!!({FIND})('Model name') && document.querySelector('#submit-allowance')?.innerText",
          "the Submit tab")
    assert _axe(browser, session, source) == [], width  # the Submit button's contrast among them
    fields = {"Model name": "<bad>", "Training-data cutoff (YYYY-MM-DD)": "2024-13-01"}
    assert browser.evaluate(session, f"({TYPE})({json.dumps(fields)})") == "ok"
    assert "primary" in browser.evaluate(session, CLICK)
    _wait(browser, session, f"(() => {{ const t = {RESULT}; return t.startsWith('Rejected') && t; }})()",
          "the refusal")
    tied = _wait(browser, session, """(() => { const out = {};
        for (const name of ['model_name', 'cutoff', 'contact']) {
          const input = document.querySelector('#submit-' + name + ' input, #submit-' + name + ' textarea');
          out[name] = [input.getAttribute('aria-describedby'), input.getAttribute('aria-invalid')]; }
        // (Gradio fades an output while it updates: read once it is done)
        return out.model_name[0] && out.cutoff[0] && !document.querySelector('.pending, .generating') && out;
        })()""", "the errors tied to their fields")
    assert tied["model_name"] == ["error-model_name", "true"] and tied["cutoff"] == ["error-cutoff", "true"], tied
    described = browser.evaluate(session, "document.getElementById('error-cutoff').innerText")
    assert "2024-13-01" in described or "date" in described.lower(), described
    assert _axe(browser, session, source) == []

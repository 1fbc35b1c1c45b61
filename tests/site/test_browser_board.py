"""Issue 50's done-when checks on the static pages, measured in headless Chromium at 1366×900 and 390 px.

- the headline figure: no two text boxes overlap and none leaves the figure (with a dozen controls close together);
- contestants come before the controls, the controls are folded, and sorting never mixes them;
- no page is wider than the window (index, board, model, paper);
- each attribution value sits vertically inside its own line's box, and values and lines meet WCAG AA contrast.
"""

from __future__ import annotations

import base64
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grebench.scoring import compute_boards
from grebench.settings import Settings
from grebench.site import build_site
from grebench.store import Store, open_store
from tests.site._cdp import Browser
from tests.site.conftest import LINES, NOW, add_attribution, fill_store, requires_chromium
from tests.site.test_browser import keep_artifact

WIDTHS = (1366, 390)
#: Controls scored close together (the cluster whose labels used to overlap) and one far off scale.
CONTROLS = {"empty": 0.0, "abstract-only": 0.1, "abstract-copy": 0.15, "restatement": 0.2, "other-paper": -0.3,
            "injection": -0.5, "rephrase": 2.9, "shuffled": 3.0, "padded": 3.05, "truncated": 2.5,
            "reference-copy": 60.0}
#: A judgment line long enough to fill whole rows of text at some widths (the value used to fall to the next line).
LONG = ("The reviewer criticizes that the evaluation omits the strongest recent baselines and that the ablation of the "
        "attention kernel is run on one seed only")

TEXT_BOXES = """(() => {
  const svg = document.querySelector('svg');
  const frame = svg.getBoundingClientRect();
  const boxes = [...document.querySelectorAll('text')].filter(t => t.textContent.trim())
    .map(t => { const r = t.getBoundingClientRect();
                return {text: t.textContent.trim(), x0: r.left, x1: r.right, y0: r.top, y1: r.bottom}; });
  const overlaps = [];
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
    const a = boxes[i], b = boxes[j];
    const w = Math.min(a.x1, b.x1) - Math.max(a.x0, b.x0), h = Math.min(a.y1, b.y1) - Math.max(a.y0, b.y0);
    if (w > 0.5 && h > 0.5) overlaps.push([a.text, b.text, w, h]);
  }
  const outside = boxes.filter(b => b.x0 < frame.left - 0.5 || b.x1 > frame.right + 0.5 || b.y0 < frame.top - 0.5
                                    || b.y1 > frame.bottom + 0.5).map(b => b.text);
  return {count: boxes.length, texts: boxes.map(b => b.text), overlaps, outside, width: frame.width};
})()"""

BOARD_STATE = """(() => {
  // a closed <details> hides its content with content-visibility: checkVisibility() tells, client rects do not
  const visible = (el) => !!el && el.checkVisibility({contentVisibilityAuto: true, visibilityProperty: true});
  const main = document.querySelector('table.board.contestants');
  const fold = document.querySelector('details.controls');
  const first = main.tBodies[0].rows[0];
  return {
    contestants: [...main.tBodies[0].rows].map(r => [r.dataset.candidate, r.className]),
    controls: [...fold.querySelectorAll('tbody tr')].map(r => [r.dataset.candidate, r.className]),
    folded: !fold.open, controlsVisible: [...fold.querySelectorAll('tbody tr')].some(visible),
    summary: fold.querySelector('summary').innerText, firstRowTop: first.getBoundingClientRect().top,
    innerHeight: window.innerHeight,
    order: [...document.querySelectorAll('table.board.contestants, details.controls')].slice(0, 2).map(e => e.tagName),
  };
})()"""

SORT_BY_SCORE = """(() => {
  const button = [...document.querySelector('table.board.contestants').tHead.rows[0].cells]
    .find(th => th.innerText.trim().startsWith('Score')).querySelector('button.sort');
  button.focus();
  return !!button;
})()"""

OVERFLOW = "({scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth})"

ATTRIBUTION = """(() => {
  const lum = (rgb) => { const [r, g, b] = rgb.match(/[0-9.]+/g).slice(0, 3).map(Number).map(v => v / 255)
    .map(c => c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4); return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
  const ratio = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p); return (x + 0.05) / (y + 0.05); };
  return [...document.querySelectorAll('li.attr')].map(li => {
    const box = li.getBoundingClientRect();
    const value = li.querySelector('.attr-value'), text = li.querySelector('.attr-text');
    const v = value.getBoundingClientRect(), back = getComputedStyle(li).backgroundColor;
    return {line: text.innerText.slice(0, 40), top: box.top, bottom: box.bottom, vTop: v.top, vBottom: v.bottom,
            valueContrast: ratio(getComputedStyle(value).color, back),
            textContrast: ratio(getComputedStyle(text).color, back), back};
  });
})()"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The site of the small store with a dozen controls on every board and a long attributed line."""
    from tests.conftest import FAST_ENV
    from tests.site.conftest import data_settings

    root = tmp_path_factory.mktemp("board-site")
    settings: Settings = data_settings(root / "data")
    assert FAST_ENV  # (the settings above are the fast ones)
    store = open_store(None)
    fill_store(store)
    _add_controls(store)
    compute_boards(store, settings)
    add_attribution(store)
    store.con.execute("UPDATE line_attribution SET line = ? WHERE line_no = 0 AND candidate = 'late-llm'", [LONG])
    out = Path(build_site(store, settings, root / "site")["out"])
    store.con.close()
    yield out


def _add_controls(store: Store) -> None:
    """More controls, scored on every paper of the store (their scores close together, one far off scale)."""
    papers = store.rows("SELECT paper_id FROM papers ORDER BY paper_id")
    refs = store.rows("SELECT review_id, paper_id FROM reviews ORDER BY review_id")
    for name, base in CONTROLS.items():
        store.con.execute("INSERT INTO candidates (name, kind, params_json, description, updated_at) "
                          "VALUES (?, 'control', '{}', 'a control', ?)", [name, NOW])
        for p in papers:
            gid = f"g_{name}_{p['paper_id']}"
            store.con.execute("INSERT INTO generations (generation_id, candidate, paper_id, prompt_version, "
                              "params_json, status, text, generated_at, sealed) VALUES (?, ?, ?, 'v1', '{}', 'ok', ?, "
                              "?, false)", [gid, name, p["paper_id"], f"{name} of {p['paper_id']}", NOW])
            for r in (r for r in refs if r["paper_id"] == p["paper_id"]):
                store.con.execute("INSERT INTO scores VALUES ('gem-s', 'offline', 'rules', 'p1', ?, ?, ?, ?, ?, ?, "
                                  "?, 10, ?)", [name, p["paper_id"], r["review_id"], gid, -10.0 + base, -10.0, base,
                                                NOW])


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Browser, str]]:
    exe = shutil.which("chromium")
    if exe is None:
        pytest.skip("Debian chromium is not installed (apt-get install chromium)")
    b = Browser(exe, tmp_path_factory.mktemp("profile"))
    try:
        yield b, b.open_tab("about:blank")
    finally:
        b.close()


def _pages(site: Path) -> dict[str, Path]:
    board = next(p for p in (site / "boards").glob("iclr.cc-2020-*.html"))
    model = next(p for p in (site / "models").glob("late-llm-*.html"))
    paper = next(p for p in (site / "papers").glob("p2020_0-*.html"))
    return {"index": site / "index.html", "board": board, "model": model, "paper": paper}


def _shot(browser: Browser, session: str, name: str, tmp_path: Path) -> None:
    png = tmp_path / f"{name}.png"
    png.write_bytes(base64.b64decode(browser.send("Page.captureScreenshot", {"format": "png"}, session)["data"]))
    keep_artifact(png)


@pytest.mark.browser
@requires_chromium
@pytest.mark.parametrize("width", WIDTHS)
def test_the_headline_figure_has_no_overlapping_text(site: Path, browser: tuple[Browser, str], width: int,
                                                     tmp_path: Path) -> None:
    b, session = browser
    for name in ("index", "board"):
        b.open_page(session, _pages(site)[name], width)
        src = b.evaluate(session, "document.querySelector('figure.board-figure img').currentSrc")
        assert src.endswith("-narrow.svg") == (width < 600), src  # the figure drawn for this width
        alt = b.evaluate(session, "document.querySelector('figure.board-figure img').alt")
        assert alt.startswith("Ranking by GEM-S") and "1. late-llm" in alt and "Controls, not ranked:" in alt, alt
        b.open_page(session, Path(src.removeprefix("file://")), width)
        m: dict[str, Any] = b.evaluate(session, TEXT_BOXES)
        assert m["overlaps"] == [] and m["outside"] == [], (name, width, m)
        assert {"1. late-llm", "human (reference)", "2. good-llm"} <= set(m["texts"]), m["texts"]  # a reference line
        assert "reference-copy (60) →" in m["texts"] and "padded" in m["texts"], m["texts"]
        _shot(b, session, f"figure-{name}-{width}", tmp_path)


@pytest.mark.browser
@requires_chromium
@pytest.mark.parametrize("width", WIDTHS)
def test_contestants_come_first_and_controls_are_folded_and_never_sorted_among_them(
        site: Path, browser: tuple[Browser, str], width: int) -> None:
    b, session = browser
    for name in ("index", "board"):
        b.open_page(session, _pages(site)[name], width)
        state: dict[str, Any] = b.evaluate(session, BOARD_STATE)
        assert state["order"] == ["TABLE", "DETAILS"], state  # contestants first
        assert [c for c, _ in state["contestants"]] == ["late-llm", "human", "good-llm"], state
        assert all("role-reference" not in cls for _, cls in state["contestants"]), state
        assert {c for c, _ in state["controls"]} == {"generic", *CONTROLS}, state
        assert state["folded"] and not state["controlsVisible"], state
        assert state["summary"].startswith("Show controls (12)"), state
        if width == 1366:  # a row of the table is on the first screen, above the figure
            assert state["firstRowTop"] < state["innerHeight"], state
        assert b.evaluate(session, SORT_BY_SCORE)
        for _ in range(2):  # ascending, then descending: Space on the focused header button sorts
            for kind in ("keyDown", "keyUp"):
                b.send("Input.dispatchKeyEvent", {"type": kind, "key": " ", "code": "Space", "text": " " if kind ==
                                                  "keyDown" else "", "windowsVirtualKeyCode": 32}, session)
            after: dict[str, Any] = b.evaluate(session, BOARD_STATE)
            assert all("role-reference" not in cls for _, cls in after["contestants"]), after
            assert len(after["contestants"]) == 3
        sorted_by = b.evaluate(session, "document.querySelector('table.board.contestants th[aria-sort]')"
                                        "?.getAttribute('aria-sort')")
        assert sorted_by == "descending"  # the two key presses sorted it twice
        assert [c for c, _ in b.evaluate(session, BOARD_STATE)["contestants"]] == ["late-llm", "human", "good-llm"]


@pytest.mark.browser
@requires_chromium
@pytest.mark.parametrize("width", WIDTHS)
def test_no_page_is_wider_than_the_window(site: Path, browser: tuple[Browser, str], width: int,
                                          tmp_path: Path) -> None:
    b, session = browser
    for name, page in _pages(site).items():
        b.open_page(session, page, width)
        m = b.evaluate(session, OVERFLOW)
        assert m["innerWidth"] == width and m["scrollWidth"] <= width, (name, m)
        _shot(b, session, f"site-{name}-{width}", tmp_path)


@pytest.mark.browser
@requires_chromium
@pytest.mark.parametrize("width", (*WIDTHS, 1024, 700, 520))
def test_each_attribution_value_sits_in_its_own_line_with_aa_contrast(site: Path, browser: tuple[Browser, str],
                                                                      width: int) -> None:
    b, session = browser
    b.open_page(session, _pages(site)["paper"], width)
    lines: list[dict[str, Any]] = b.evaluate(session, ATTRIBUTION)
    assert len(lines) == sum(len(v) for v in LINES.values())  # every attributed line of every candidate
    for line in lines:
        assert line["top"] - 0.5 <= line["vTop"] and line["vBottom"] <= line["bottom"] + 0.5, (width, line)
        assert line["valueContrast"] >= 4.5 and line["textContrast"] >= 4.5, (width, line)
    assert any(line["line"].startswith(LONG[:40]) for line in lines)

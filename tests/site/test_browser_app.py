"""Issue 50's done-when checks on the Gradio app, in headless Chromium at 1366×900 and 390 px: the board has
readable headers and a Δ-vs-human column, contestants only with the controls folded apart; the Model and Paper tabs
open on the headline's first contestant and a paper of its sample; a bad submission shows every field's problem
beside its field in one reply, with the limits and the allowance stated."""

from __future__ import annotations

import base64
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from grebench.settings import load_settings
from grebench.site._app import create_app
from grebench.store import open_store
from tests.conftest import FAST_ENV
from tests.site._cdp import Browser
from tests.site._cdp import wait_for as _wait
from tests.site.conftest import fill_store, free_port, launch_app, requires_chromium
from tests.site.test_browser import keep_artifact
from tests.site.test_browser_submit import CLICK, FIND, RESULT, TYPE

pytestmark = [pytest.mark.browser, requires_chromium]



@pytest.fixture(scope="module")
def live_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("app-board")
    settings = load_settings(None, env={**FAST_ENV, "GREBENCH_DATA_DIR": str(root / "data"),
                                        "GREBENCH_APP_PORT": str(free_port())})
    store = open_store(settings.db_path)
    fill_store(store)
    store.export_parquet(settings.export_path)
    store.close()
    demo = create_app(settings, resolver={"api.model.example": ["93.184.216.34"]})
    url = launch_app(demo, settings)
    yield url.rstrip("/")
    demo.close()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    exe = shutil.which("chromium")
    assert exe is not None
    b = Browser(exe, tmp_path_factory.mktemp("profile"))
    yield b
    b.close()




def _open(browser: Browser, url: str, width: int) -> str:
    for old in browser.send("Target.getTargets")["targetInfos"]:  # one page at a time: the machine is small
        if old["type"] == "page" and old["url"] != "about:blank":
            browser.send("Target.closeTarget", {"targetId": old["targetId"]})
    target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = str(browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"])
    browser.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": 900, "deviceScaleFactor": 1,
                                                        "mobile": False}, session)
    browser.send("Page.navigate", {"url": url}, session)
    return session


def _shot(browser: Browser, session: str, name: str, tmp_path: Path) -> None:
    png = tmp_path / f"{name}.png"
    png.write_bytes(base64.b64decode(browser.send("Page.captureScreenshot", {"format": "png"}, session)["data"]))
    assert png.stat().st_size > 10_000
    keep_artifact(png)


TABLE = """(sel) => { const t = document.querySelector(sel); if (!t) return null;
  const heads = [...t.querySelectorAll('thead th, [role=columnheader]')].map(h => h.innerText.trim()).filter(x => x);
  // Gradio draws the rows as a virtual grid: div[role=row] of div[role=gridcell]
  const rows = [...t.querySelectorAll('.virtual-body [role=row]')]
    .map(r => [...r.querySelectorAll('[role=gridcell]')].map(c => c.innerText.trim()));
  return {heads, rows}; }"""


@pytest.mark.parametrize("width", (1366, 390))
def test_the_board_has_readable_headers_a_delta_column_and_folded_controls(live_app: str, browser: Browser,
                                                                            width: int, tmp_path: Path) -> None:
    session = _open(browser, live_app + "/", width)
    # a laptop sees the full board; a phone its key columns (the rest behind "Show all columns": tests/site/test_a11y)
    table = "#board-table" if width > 900 else "#board-key"
    _wait(browser, session, f"document.querySelector('{table}')?.innerText.includes('good-llm') && "
                            "!document.querySelector('.pending, .generating')", "the board")
    board = browser.evaluate(session, f"({TABLE})('{table}')")
    heads = board["heads"]
    assert "Δ vs human" in heads and ("Score (nats)" in heads and "Rank interval (95%)" in heads
                                      if width > 900 else "Score [95% CI]" in heads), heads
    assert not [h for h in heads if re.search(r"[a-z]_[a-z]", h)], heads  # no snake_case
    names = [r[1] for r in board["rows"] if len(r) > 1]
    assert names and "generic" not in names and {"late-llm", "human", "good-llm"} <= set(names), board
    delta = heads.index("Δ vs human")
    assert any(re.fullmatch(r"-?\d+(\.\d+)?", r[delta]) for r in board["rows"] if len(r) > delta), board
    fold = browser.evaluate(session, "(() => { const a = document.querySelector('#board-controls'); return "
                                     "{label: a.innerText.split('\\n')[0], open: !!a.querySelector('#controls-table')"
                                     "?.checkVisibility()}; })()")
    assert fold["label"].startswith("Show controls (1)") and not fold["open"], fold
    _shot(browser, session, f"app-board-{width}", tmp_path)
    # the Model and Paper tabs open on the headline's first contestant and a paper of its sample
    opened = []
    for tab, choice, shown in (("Model", "#model-choice", "Sample review"), ("Paper", "#paper-choice", "Reviews")):
        browser.send("Page.navigate", {"url": f"{live_app}/?tab={tab.lower()}"}, session)  # (390 px folds the tabs)
        opened.append(_wait(browser, session, f"document.querySelector('{choice} input')?.value", f"the {tab} tab"))
        # and the tab is filled for it, not empty
        _wait(browser, session, f"document.body.innerText.includes('{shown}') && [...document.querySelectorAll("
                                "'.virtual-body [role=gridcell]')]"
                                ".some(c => c.checkVisibility() && c.innerText.trim())",
              f"the {tab} tab's tables")
        _shot(browser, session, f"app-{tab.lower()}-{width}", tmp_path)
    assert opened[0] == "late-llm" and opened[1].startswith("Paper 0 of 2024") and "ICLR 2024" in opened[1], opened


def test_a_bad_submission_shows_every_field_error_beside_its_field(live_app: str, browser: Browser,
                                                                  tmp_path: Path) -> None:
    session = _open(browser, live_app + "/?tab=submit", 1366)
    _wait(browser, session, f"!!({FIND})('Model name')", "the Submit tab")
    limits = _wait(browser, session, "document.querySelector('#submit-limits')?.innerText", "the limits")
    assert "Refused tries do not count" in limits and "per network address in any 7 days" in limits, limits
    fields = {"Model name": "<bad>", "OpenAI-compatible base URL (or leave empty for a hosted provider)":
              "http://127.0.0.1:1", "Training-data cutoff (YYYY-MM-DD)": "2024-13-01", "Contact (e-mail or handle)":
              "a b", "Parameters (JSON, optional)": '{"api_base": 1}'}
    assert browser.evaluate(session, f"({TYPE})({json.dumps(fields)})") == "ok"
    assert "primary" in browser.evaluate(session, CLICK)
    message = _wait(browser, session, f"(() => {{ const t = {RESULT}; return t.startsWith('Rejected') && t; }})()",
                    "the refusal")
    shown = _wait(browser, session, """(() => { const out = {};
        for (const el of document.querySelectorAll('.field-error[id^=error-]'))
          if (el.checkVisibility() && el.innerText.trim())
          out[el.id] = [el.innerText.trim(), el.getBoundingClientRect().top];
        // Gradio shows "processing | 0.0s" over an output while it updates: read the errors once it is gone
        const busy = Object.values(out).some(v => v[0].startsWith('processing'));
        return Object.keys(out).length >= 5 && !busy && out; })()""", "the field errors")
    assert set(shown) == {"error-model_name", "error-base_url", "error-cutoff", "error-contact", "error-params"}, shown
    url = shown["error-base_url"][0]
    assert "plain http" in url and "port 1 " in url and "loopback" in url, url
    for field_id, (text, _top) in shown.items():  # each problem is in the one reply too
        assert text.lstrip("- ").split("\n")[0][:30] in message, (field_id, text, message)
    # beside their fields: each error sits right under its own input, in the form's order
    tops = {k: v[1] for k, v in shown.items()}
    assert tops["error-model_name"] < tops["error-base_url"] < tops["error-cutoff"] < tops["error-contact"] \
        < tops["error-params"], tops
    allowance = _wait(browser, session, "document.querySelector('#submit-allowance')?.innerText", "the allowance")
    assert "0 of 6 accepted submissions" in allowance and "refused tries do not count" in allowance, allowance
    _shot(browser, session, "app-submit-errors", tmp_path)

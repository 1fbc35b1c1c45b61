"""A submission made the way a user makes it: typed into the Submit tab of the live app in headless Chromium."""

from __future__ import annotations

import base64
import json
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grebench.site._app import create_app, queue_path
from grebench.submissions import SubmissionQueue
from tests.site._cdp import Browser
from tests.site._cdp import wait_for as _wait
from tests.site.conftest import exported_app_settings, launch_app, requires_chromium
from tests.site.test_browser import keep_artifact

RESOLVER = {"api.model.example": ["93.184.216.34"]}
URL_LABEL = "OpenAI-compatible base URL (or leave empty for a hosted provider)"
KEY_LABEL = "API key (required for a hosted provider's model string; optional for your own base URL)"
FIELDS = {"Model name": "Browser-1", URL_LABEL: "https://api.model.example/v1",
          "Release date (YYYY-MM-DD, optional)": "2025-03-01", "Training-data cutoff (YYYY-MM-DD)": "2024-12-01",
          "Contact (e-mail or handle)": "browser@example.org",
          KEY_LABEL: "sk-browser-test"}

# the visible text box under a label, found by the label's text the way a user finds it
FIND = """(name) => [...document.querySelectorAll('label')].filter(l => l.offsetParent !== null)
  .find(l => l.querySelector('[data-testid=block-info]')?.innerText.trim() === name)?.querySelector('textarea,input')"""
TYPE = f"""(fields) => {{ for (const [name, value] of Object.entries(fields)) {{
  const el = ({FIND})(name); if (!el) return 'missing ' + name; el.focus();
  const proto = el instanceof HTMLTextAreaElement ? HTMLTextAreaElement.prototype : HTMLInputElement.prototype;
  Object.getOwnPropertyDescriptor(proto, 'value').set.call(el, value);
  el.dispatchEvent(new Event('input', {{bubbles: true}})); el.dispatchEvent(new Event('change', {{bubbles: true}}));
  el.blur(); }} return 'ok'; }}"""
# the Submit button of the form (the tab bar has buttons called "Submit" too): the one after the fields
CLICK = f"""(() => {{ const first = ({FIND})('Model name');
  const button = [...document.querySelectorAll('button')].find(b => b.innerText.trim() === 'Submit'
    && b.offsetParent !== null && (first.compareDocumentPosition(b) & Node.DOCUMENT_POSITION_FOLLOWING));
  button.click(); return button.className; }})()"""
# the message itself (the block also holds the progress timer, "0.2s")
RESULT = "document.querySelector('#submit-result [data-testid=markdown]')?.innerText.trim() ?? ''"


@pytest.fixture(scope="module")
def live_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The app on a free loopback port over an export of the small store, with its own empty queue."""
    root = tmp_path_factory.mktemp("browser-app")
    settings = exported_app_settings(root / "data")
    demo = create_app(settings, resolver=RESOLVER)
    url = launch_app(demo, settings)
    yield {"url": url.rstrip("/"), "settings": settings}
    demo.close()




def _submit(browser: Browser, session: str, fields: dict[str, str], before: str) -> str:
    assert browser.evaluate(session, f"({TYPE})({json.dumps(fields)})") == "ok"
    assert "primary" in browser.evaluate(session, CLICK)
    changed = f"(() => {{ const t = {RESULT}; return t && t !== {json.dumps(before)} && t; }})()"
    return str(_wait(browser, session, changed, "the submission's result message"))


def _page_errors(events: list[dict[str, Any]]) -> list[str]:
    errors = [json.dumps(e["params"]["exceptionDetails"])[:500] for e in events
              if e["method"] == "Runtime.exceptionThrown"]
    errors += [json.dumps(e["params"]["args"])[:500] for e in events
               if e["method"] == "Runtime.consoleAPICalled" and e["params"]["type"] in ("error", "assert")]
    return errors


@pytest.mark.browser
@requires_chromium
def test_a_submission_typed_into_chromium_is_queued(live_app: dict[str, Any], tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    outbound: list[Any] = []
    real_connect = socket.socket.connect

    def connect(sock: socket.socket, address: Any) -> Any:  # the app may talk to loopback only
        if not (isinstance(address, tuple) and address[0] in ("127.0.0.1", "::1", "localhost")):
            outbound.append(address)
            raise AssertionError(f"outbound connection to {address}")
        return real_connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    queue = SubmissionQueue(queue_path(live_app["settings"]))
    exe = shutil.which("chromium")
    assert exe is not None
    browser = Browser(exe, tmp_path / "profile")
    try:
        target = browser.send("Target.createTarget", {"url": live_app["url"] + "/?tab=submit"})["targetId"]
        session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        browser.send("Runtime.enable", session=session)
        _wait(browser, session, f"!!({FIND})('Model name') && !!({FIND})({json.dumps(KEY_LABEL)})",
              "the Submit tab's fields", timeout=30)

        accepted = _submit(browser, session, FIELDS, before="")
        assert accepted.startswith("Queued as ") and "Browser-1" in accepted, accepted
        assert "sk-browser-test" not in accepted
        rows = queue.public_rows()
        assert [(r["model_name"], r["status"]) for r in rows] == [("Browser-1", "queued")]
        assert accepted.startswith(f"Queued as {rows[0]['id']}:")

        hostile = dict(FIELDS, **{"Model name": "Evil-1", URL_LABEL: "http://169.254.169.254/",
                                  "Contact (e-mail or handle)": "evil@example.org"})
        refused = _submit(browser, session, hostile, before=accepted)
        assert refused.startswith("Rejected: base URL rejected") and "169.254.169.254" in refused, refused
        assert len(queue.public_rows()) == 1

        shot = browser.send("Page.captureScreenshot", {"format": "png"}, session)
        png = tmp_path / "app-submit-typed.png"
        png.write_bytes(base64.b64decode(shot["data"]))
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
        keep_artifact(png)
        assert _page_errors(browser.events) == []
    finally:
        browser.close()
    assert outbound == []

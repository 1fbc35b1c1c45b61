"""A tiny Chrome DevTools Protocol client over ``--remote-debugging-pipe`` (test-only; no websocket package needed).

Chromium reads NUL-terminated JSON commands from fd 3 and writes responses and events to fd 4.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
         "--window-size=1280,1600", "--remote-debugging-pipe"]


class Browser:
    """One headless Chromium driven over the pipe; every read is bounded by a deadline."""

    def __init__(self, exe: str, profile: Path) -> None:
        to_child, self._out = os.pipe()   # we write commands, Chromium reads fd 3
        self._in, from_child = os.pipe()  # Chromium writes fd 4, we read
        # park the child's ends above 10 (close-on-exec) so that dup2 onto 3 and 4 cannot clobber them
        child_r = fcntl.fcntl(to_child, fcntl.F_DUPFD_CLOEXEC, 10)
        child_w = fcntl.fcntl(from_child, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(to_child)
        os.close(from_child)

        def wire() -> None:  # runs in the child before exec; dup2 makes 3 and 4 inheritable
            os.dup2(child_r, 3)
            os.dup2(child_w, 4)

        # Chromium's own temp files (a folder per download, the org.chromium.Chromium.* socket folders) go into a
        # folder of this browser's, removed by close(); a short path, as a Unix socket's path has at most 107 bytes
        self._scratch = tempfile.mkdtemp(prefix="cdp-")
        try:  # close_fds=False: Python's own descriptors are close-on-exec anyway (PEP 446), and 3 and 4 must stay
            self.proc = subprocess.Popen([exe, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL, preexec_fn=wire, close_fds=False,
                                         env={**os.environ, "TMPDIR": self._scratch})
        finally:
            os.close(child_r)
            os.close(child_w)
        self._buf = b""
        self._next = 0
        self.events: list[dict[str, Any]] = []

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None,
             timeout: float = 15.0) -> dict[str, Any]:
        """Send one command and wait (at most ``timeout`` s) for its response; events seen meanwhile are kept."""
        self._next += 1
        msg: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._out, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            while b"\0" in self._buf:
                raw, self._buf = self._buf.split(b"\0", 1)
                reply = json.loads(raw)
                if reply.get("id") == self._next:
                    if "error" in reply:
                        raise RuntimeError(f"{method}: {reply['error']}")
                    return dict(reply.get("result", {}))
                if "method" in reply:
                    self.events.append(reply)
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._in], [], [], left)[0]:
                raise TimeoutError(f"no reply to {method} within {timeout} s")
            chunk = os.read(self._in, 1 << 20)
            if not chunk:
                raise RuntimeError(f"Chromium closed the pipe (exit code {self.proc.poll()})")
            self._buf += chunk

    def evaluate(self, session: str, expression: str, user_gesture: bool = False) -> Any:
        """Run JavaScript in the page and return its (JSON) value; a page exception is raised here.
        ``user_gesture``: as if the user did it (a click that downloads a file needs one)."""
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True, "userGesture": user_gesture}, session)
        if "exceptionDetails" in result:
            raise RuntimeError(f"page exception: {result['exceptionDetails']}")
        return result["result"].get("value")

    def open_tab(self, url: str) -> str:
        """Open ``url`` in a new tab; the session id that drives it."""
        target = self.send("Target.createTarget", {"url": url})["targetId"]
        return str(self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"])

    def open_page(self, session: str, page: Path, width: int, height: int = 900) -> None:
        """Load ``page`` (a file) in a ``width`` x ``height`` window and wait (at most 15 s) until it is complete."""
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session)
        self.send("Page.navigate", {"url": page.as_uri()}, session)
        deadline = time.monotonic() + 15
        while self.evaluate(session, "document.readyState") != "complete":
            assert time.monotonic() < deadline, f"{page.name} did not load"
            time.sleep(0.05)

    def wait_event(self, method: str, match: Any = None, timeout: float = 30.0) -> dict[str, Any]:
        """The first event ``method`` (seen already or arriving within ``timeout`` s) whose params ``match``
        accepts; it is removed from :attr:`events`."""
        deadline = time.monotonic() + timeout
        while True:
            while b"\0" in self._buf:
                raw, self._buf = self._buf.split(b"\0", 1)
                reply = json.loads(raw)
                if "method" in reply:
                    self.events.append(reply)
            for i, event in enumerate(self.events):
                if event["method"] == method and (match is None or match(event.get("params", {}))):
                    return self.events.pop(i)
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._in], [], [], left)[0]:
                raise TimeoutError(f"no {method} event within {timeout} s")
            chunk = os.read(self._in, 1 << 20)
            if not chunk:
                raise RuntimeError(f"Chromium closed the pipe (exit code {self.proc.poll()})")
            self._buf += chunk

    def close(self) -> None:
        """Kill Chromium and close the pipe ends."""
        self.proc.kill()
        self.proc.wait(timeout=10)
        os.close(self._out)
        os.close(self._in)
        shutil.rmtree(self._scratch, ignore_errors=True)


def wait_for(browser: Browser, session: str, expression: str, what: str, timeout: float = 90.0) -> Any:
    """Poll a page expression until it is truthy; the bound is a guard against a hang, not a speed test (the
    machine may be busy), and a timeout shows what the page said."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = browser.evaluate(session, expression)
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}: {browser.evaluate(session, 'document.body.innerText')[:500]}")

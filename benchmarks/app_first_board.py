"""How soon the app's board shows after a page load, measured in headless Chromium (issue 50: over 3.4 s before;
issue 63: 11.9 s on a cold browser cache, busy machine, 1.3 s warm).

Usage: .venv/bin/python benchmarks/app_first_board.py [--data-dir DIR] [--loads 5] [--width 1366] [--cold 3]

Without ``--data-dir`` the test battery's small store (two venues, four candidates) is exported into a temp dir.
The app (``create_app``, the queue settings of ``grebench app``) runs in this process on a free loopback port.
Before each load a script is installed in the page that records, with a MutationObserver, the time since navigation
start (``performance.now()``) at which the board table first holds a candidate's row; the time is read once that
happened.  The first load after start is cold (a fresh Chromium profile: nothing in the browser's cache; the app
computed the first load's work before it listened, as ``launch`` does); the others reload in the same profile (a
returning visitor).  ``--cold N`` repeats the cold first visit in N fresh profiles (a fresh browser each).  For each
load the page's resources are summed (count, bytes transferred, bytes decoded) and the slowest are named, so that a
slow first visit says where its time went.  Prints one line per load and one JSON line: cold (median of the fresh
profiles), warm median and warm maximum, in milliseconds.  Loopback only, bounded: each load gives up after 60 s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: Installed in every new document: the time the board's first row with text appears.
WATCH = """(() => {
  // the full board (wide windows) or its key columns (below 900 px)
  const seen = () => [...document.querySelectorAll('#board-table .virtual-body [role=gridcell], '
                                                   + '#board-key .virtual-body [role=gridcell]')]
    .some(c => c.innerText.trim() && c.checkVisibility());
  const mark = () => {
    if (window.__shellAt === undefined && document.querySelector('#board-table')) window.__shellAt = performance.now();
    if (window.__boardAt === undefined && seen()) window.__boardAt = performance.now();
  };
  new MutationObserver(mark).observe(document, {subtree: true, childList: true, characterData: true});
})()"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


#: What the page fetched: resources' count and bytes, and the slowest five (name, start, duration in ms).
RESOURCES = """(() => {
  const all = performance.getEntriesByType('resource');
  const nav = performance.getEntriesByType('navigation')[0];
  const slow = [...all].sort((a, b) => b.duration - a.duration).slice(0, 5)
    .map(r => [r.name.replace(location.origin, '').slice(0, 80), Math.round(r.startTime), Math.round(r.duration),
               r.transferSize, r.decodedBodySize]);
  return {count: all.length, transfer: all.reduce((s, r) => s + r.transferSize, 0) + (nav ? nav.transferSize : 0),
          decoded: all.reduce((s, r) => s + r.decodedBodySize, 0),
          dom_ms: nav ? Math.round(nav.domContentLoadedEventEnd) : null,
          slowest: slow};
})()"""


def _load(browser: Any, session: str, url: str, label: str) -> tuple[float, float, dict[str, Any]]:
    """Navigate and wait for the board's first row: (board ms, empty page ms, resources)."""
    browser.send("Page.navigate", {"url": url}, session)
    deadline = time.monotonic() + 60
    at = None
    while at is None:
        if time.monotonic() > deadline:
            raise SystemExit(f"{label}: no board row within 60 s")
        time.sleep(0.05)
        at = browser.evaluate(session, "window.__boardAt")
    shell = float(browser.evaluate(session, "window.__shellAt"))
    res = dict(browser.evaluate(session, RESOURCES))
    print(f"{label}: board after {at:.0f} ms (the app's empty page after {shell:.0f} ms; {res['count']} resources, "
          f"{res['transfer'] / 1e6:.2f} MB transferred, {res['decoded'] / 1e6:.2f} MB decoded; DOMContentLoaded "
          f"{res['dom_ms']} ms; slowest: {res['slowest'][:3]})", flush=True)
    return float(at), shell, res


def _session(browser: Any, width: int) -> str:
    session = str(browser.open_tab("about:blank"))
    browser.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": 900, "deviceScaleFactor": 1,
                                                        "mobile": False}, session)
    browser.send("Page.enable", {}, session)  # (new-document scripts run only with the Page domain on)
    browser.send("Page.addScriptToEvaluateOnNewDocument", {"source": WATCH}, session)
    return session


def _small_store(root: Path) -> Path:
    from grebench.store import open_store
    from tests.site.conftest import data_settings, fill_store

    settings = data_settings(root)
    store = open_store(settings.db_path)
    fill_store(store)
    store.export_parquet(settings.export_path)
    store.close()
    return root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", type=Path, help="a data dir with an export (default: the small test store)")
    parser.add_argument("--loads", type=int, default=5)
    parser.add_argument("--width", type=int, default=1366)
    parser.add_argument("--cold", type=int, default=1, help="cold first visits, each in a fresh browser profile")
    args = parser.parse_args()
    from grebench.settings import load_settings
    from grebench.site._app import create_app, launch
    from tests.site._cdp import Browser

    tmp = Path(tempfile.mkdtemp(prefix="grebench-first-board-"))
    try:
        data = args.data_dir or _small_store(tmp / "data")
        settings = load_settings(None, env={"GREBENCH_DATA_DIR": str(data), "GREBENCH_APP_PORT": str(_free_port()),
                                            "GREBENCH_LOCAL_CANDIDATES": "", "GREBENCH_LOCAL_JUDGES": ""})
        demo = create_app(settings, resolver={})
        # the product's launch (the connection guard, and the first load's work done before it listens)
        _, url, _ = launch(demo, settings, prevent_thread_lock=True, quiet=True)
        exe = shutil.which("chromium")
        if exe is None:
            raise SystemExit("chromium is not installed (apt-get install chromium)")
        colds: list[float] = []
        times: list[float] = []
        shells: list[float] = []
        cold_res: dict[str, Any] = {}
        warm_res: dict[str, Any] = {}
        try:
            for k in range(max(1, args.cold)):
                browser = Browser(exe, tmp / f"profile-{k}")  # a fresh profile: an empty browser cache
                try:
                    session = _session(browser, args.width)
                    at, _, cold_res = _load(browser, session, url, f"cold visit {k + 1} (fresh profile)")
                    colds.append(at)
                    if k == 0:  # the returning visitor: reloads in the same profile
                        for i in range(args.loads - 1):
                            at, shell, warm_res = _load(browser, session, url, f"warm load {i + 1}")
                            times.append(at)
                            shells.append(shell)
                finally:
                    browser.close()
        finally:
            demo.close()
        warm = times or colds
        print(json.dumps({"cold_ms": round(statistics.median(colds)), "cold_each_ms": [round(c) for c in colds],
                          "warm_median_ms": round(statistics.median(warm)), "warm_max_ms": round(max(warm)),
                          "warm_page_median_ms": round(statistics.median(shells)) if shells else None,
                          "cold_transfer_bytes": cold_res.get("transfer"), "cold_resources": cold_res.get("count"),
                          "warm_transfer_bytes": warm_res.get("transfer"), "loads": len(times) + len(colds),
                          "width": args.width}))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

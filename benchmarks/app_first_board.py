"""How soon the app's board shows after a page load, measured in headless Chromium (issue 50: over 3.4 s before).

Usage: .venv/bin/python benchmarks/app_first_board.py [--data-dir DIR] [--loads 5] [--width 1366]

Without ``--data-dir`` the test battery's small store (two venues, four candidates) is exported into a temp dir.
The app (``create_app``, the queue settings of ``grebench app``) runs in this process on a free loopback port.
Before each load a script is installed in the page that records, with a MutationObserver, the time since navigation
start (``performance.now()``) at which the board table first holds a candidate's row; the time is read once that
happened.  The first load after start is cold (it builds the reader's cache); the others are what a visitor gets.
Prints one line per load and one JSON line: cold, warm median and warm maximum, in milliseconds.  Loopback only,
bounded: each load gives up after 60 s.
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

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: Installed in every new document: the time the board's first row with text appears.
WATCH = """(() => {
  const seen = () => [...document.querySelectorAll('#board-table .virtual-body [role=gridcell]')]
    .some(c => c.innerText.trim());
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
        browser = Browser(exe, tmp / "profile")
        times: list[float] = []
        shells: list[float] = []
        try:
            session = browser.open_tab("about:blank")
            browser.send("Emulation.setDeviceMetricsOverride", {"width": args.width, "height": 900,
                                                                "deviceScaleFactor": 1, "mobile": False}, session)
            browser.send("Page.enable", {}, session)  # (new-document scripts run only with the Page domain on)
            browser.send("Page.addScriptToEvaluateOnNewDocument", {"source": WATCH}, session)
            for i in range(args.loads):
                browser.send("Page.navigate", {"url": url}, session)
                deadline = time.monotonic() + 60
                at = None
                while at is None:
                    if time.monotonic() > deadline:
                        raise SystemExit(f"load {i + 1}: no board row within 60 s")
                    time.sleep(0.05)
                    at = browser.evaluate(session, "window.__boardAt")
                times.append(float(at))
                shell = browser.evaluate(session, "window.__shellAt")
                shells.append(float(shell))
                print(f"load {i + 1} ({'cold' if i == 0 else 'warm'}): board after {at:.0f} ms (the app's empty page "
                      f"after {shell:.0f} ms)", flush=True)
        finally:
            browser.close()
            demo.close()
        warm = times[1:] or times
        print(json.dumps({"cold_ms": round(times[0]), "warm_median_ms": round(statistics.median(warm)),
                          "warm_max_ms": round(max(warm)), "warm_page_median_ms": round(statistics.median(shells[1:]
                                                                                                      or shells)),
                          "loads": len(times), "width": args.width}))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

"""Slow and idle connections against the app: is a fresh client still served, and does memory come back?

Usage (the full run of issue 48, on a quiet machine; raise the shell's open-file limit first, ``ulimit -n 65536``)::

    .venv/bin/python benchmarks/connection_limits.py --idle 20000 --slow-header 2000 --slow-body 4000 --hold 60

Loopback only (127.0.0.0/8), bounded in time.  Starts ``grebench app`` on an empty data dir in a child process
(its open-file limit as the issue's: ``--app-nofile``, 20,000) and, one phase after another, opens from
``--addresses`` source addresses (127.0.1.1, 127.0.1.2, ...):

* **idle** — connections that send nothing;
* **slow header** — connections that send a request line and then one header byte every ``--drip`` seconds;
* **slow body** — POSTs declaring 1 MiB that send 255 KiB and then one byte every ``--drip`` seconds;

each phase held ``--hold`` seconds, the attackers reconnecting whatever the app closes (as an attacker would).  The
attackers run in child processes of at most ``--per-process`` connections each, so that no process of the harness
(the probing one least of all) runs out of its own file descriptors: the first full run opened 20,000 idle sockets
from the probing process and its probe failed with EMFILE, which said nothing about the app.
Throughout, a fresh client on 127.0.0.250 asks ``GET /gradio_api/info`` every second: its slowest answer is
reported (the target: under 2 s).  The app's RSS is sampled (psutil) at the start, at its peak in each phase, and
``--settle`` seconds after the last phase (the target: within 200 MB of the start at the peak and afterwards).
``--no-guard`` runs the app as before this change (``demo.launch`` without the connection guard) for comparison.
Prints a table and one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
FRESH = "127.0.0.250"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_app(data: Path, port: int, nofile: int, guard: bool) -> subprocess.Popen[bytes]:
    """``grebench app`` (or, without the guard, the same app launched by ``demo.launch``) in a child process."""
    env = {**os.environ, "GREBENCH_APP_PORT": str(port), "GREBENCH_DATA_DIR": str(data),
           "GREBENCH_LOCAL_CANDIDATES": "", "GREBENCH_LOCAL_JUDGES": "",
           "GREBENCH_APP_REQUESTS_PER_ADDRESS_PER_MIN": "100000"}
    code = ("from grebench.settings import load_settings; from grebench.site import create_app, launch_kwargs; "
            "s = load_settings(); create_app(s).launch(**launch_kwargs(s))") if not guard else \
        "from grebench.settings import load_settings; from grebench.site import launch_app; launch_app(load_settings())"

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, max(nofile, resource.getrlimit(resource.RLIMIT_NOFILE)[1])))

    return subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, preexec_fn=limit)


def fresh_get(port: int, timeout: float = 10.0) -> float:
    """Seconds a fresh client on :data:`FRESH` takes for ``GET /gradio_api/info`` (``timeout`` when it gets none)."""
    started = time.monotonic()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout, source_address=(FRESH, 0)) as sock:
            sock.sendall(b"GET /gradio_api/info HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            sock.settimeout(max(0.1, timeout - (time.monotonic() - started)))
            head = sock.recv(4096)
            if not head.startswith(b"HTTP/1.1 200"):
                return timeout
    except OSError:
        return timeout
    return time.monotonic() - started


class Attack:
    """One phase's connections, kept open (reopened when the app closes them) until :meth:`stop`."""

    def __init__(self, kind: str, count: int, port: int, addresses: int, drip: float) -> None:
        self.kind, self.count, self.port, self.addresses, self.drip = kind, count, port, addresses, drip
        self.opened = self.closed_by_app = self.failed = 0
        self.stopping = False

    async def one(self, k: int) -> None:
        source = f"127.0.1.{k % self.addresses + 1}"
        while not self.stopping:
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(
                    "127.0.0.1", self.port, local_addr=(source, 0)), 10)
            except (OSError, TimeoutError):
                self.failed += 1
                await asyncio.sleep(1)
                continue
            self.opened += 1
            try:
                if self.kind == "slow-header":
                    writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n")
                elif self.kind == "slow-body":
                    writer.write(b"POST /gradio_api/call/who HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                                 b"\r\nContent-Length: 1048576\r\n\r\n" + b"x" * (255 * 1024))
                await writer.drain()
                while not self.stopping:
                    try:
                        data = await asyncio.wait_for(reader.read(4096), self.drip)
                        if not data:
                            break  # closed by the app
                    except TimeoutError:
                        pass
                    if self.kind != "idle":
                        writer.write(b"a")
                        await writer.drain()
            except OSError:
                pass
            finally:
                writer.close()
            self.closed_by_app += not self.stopping

    async def run(self, seconds: float, first: int = 0) -> None:
        tasks = [asyncio.create_task(self.one(k)) for k in range(first, first + self.count)]
        await asyncio.sleep(seconds)
        self.stopping = True
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def phase(kind: str, count: int, args: argparse.Namespace, port: int, pid: int) -> dict[str, Any]:
    """Hold ``count`` connections of ``kind`` for ``args.hold`` seconds while a fresh client asks every second."""
    import psutil

    proc = psutil.Process(pid)
    times: list[float] = []
    slow: list[tuple[float, float]] = []  # (seconds into the phase, answer time) of each probe over 1 s
    peak, stop = 0, threading.Event()
    began = time.monotonic()

    def probe() -> None:
        nonlocal peak
        while not stop.is_set():
            asked = time.monotonic() - began
            times.append(fresh_get(port))
            if times[-1] > 1.0:
                slow.append((round(asked, 1), round(times[-1], 2)))
            peak = max(peak, proc.memory_info().rss)
            stop.wait(1.0)

    watcher = threading.Thread(target=probe, daemon=True)
    watcher.start()
    ctx = multiprocessing.get_context("fork")
    results: Any = ctx.Queue()
    shares = [min(args.per_process, count - first) for first in range(0, count, args.per_process)]
    workers = [ctx.Process(target=_attack, args=(kind, n, port, args.addresses, args.drip, args.hold,
                                                 i * args.per_process, results)) for i, n in enumerate(shares)]
    for worker in workers:
        worker.start()
    totals = {"opened": 0, "closed_by_app": 0, "connect_failed": 0}
    for _ in workers:
        for key, value in results.get(timeout=args.hold + 300).items():
            totals[key] += value
    for worker in workers:
        worker.join(timeout=60)
    stop.set()
    watcher.join()
    ordered = sorted(times) or [0.0]
    return {"phase": kind, "connections": count, "processes": len(workers), **totals,
            "fresh_probes": len(times), "fresh_within_2s": sum(t < 2.0 for t in times),
            "fresh_median_s": round(ordered[len(ordered) // 2], 2), "fresh_slowest_s": round(ordered[-1], 2),
            "rss_peak_mb": peak >> 20, "probes_over_1s": slow}


def _attack(kind: str, count: int, port: int, addresses: int, drip: float, hold: float, first: int,
            results: Any) -> None:
    """One attacking process: ``count`` connections of ``kind`` held ``hold`` seconds; its tallies on ``results``."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    attack = Attack(kind, count, port, addresses, drip)
    asyncio.run(attack.run(hold, first))
    results.put({"opened": attack.opened, "closed_by_app": attack.closed_by_app, "connect_failed": attack.failed})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--idle", type=int, default=200)
    parser.add_argument("--slow-header", type=int, default=100)
    parser.add_argument("--slow-body", type=int, default=100)
    parser.add_argument("--addresses", type=int, default=8, help="source addresses 127.0.1.1 ... 127.0.1.N")
    parser.add_argument("--hold", type=float, default=20.0, help="seconds each phase is held")
    parser.add_argument("--drip", type=float, default=5.0, help="seconds between the slow clients' bytes")
    parser.add_argument("--settle", type=float, default=15.0, help="seconds after the last phase before RSS is read")
    parser.add_argument("--app-nofile", type=int, default=20000, help="the app's open-file limit")
    parser.add_argument("--per-process", type=int, default=5000,
                        help="most connections one attacking process holds (below its open-file limit)")
    parser.add_argument("--no-guard", action="store_true", help="the app as before issue 48 (no connection guard)")
    args = parser.parse_args()
    import psutil

    port = _free_port()
    child = start_app(Path(tempfile.mkdtemp()) / "data", port, args.app_nofile, not args.no_guard)
    try:
        deadline = time.monotonic() + 120
        while fresh_get(port, 2.0) >= 2.0:
            if time.monotonic() > deadline or child.poll() is not None:
                raise SystemExit("the app did not start")
            time.sleep(1)
        proc = psutil.Process(child.pid)
        start = proc.memory_info().rss
        results = [phase(kind, count, args, port, child.pid) for kind, count in
                   (("idle", args.idle), ("slow-header", args.slow_header), ("slow-body", args.slow_body)) if count]
        time.sleep(args.settle)
        after = proc.memory_info().rss
        settled_fresh = fresh_get(port)
    finally:
        child.terminate()
        child.wait(timeout=30)
    print(f"{'phase':<12} {'conns':>6} {'opened':>7} {'closed by app':>14} {'fresh < 2 s':>12} {'median':>7} "
          f"{'slowest':>8} {'RSS peak':>9}")
    for r in results:
        print(f"{r['phase']:<12} {r['connections']:>6} {r['opened']:>7} {r['closed_by_app']:>14} "
              f"{r['fresh_within_2s']:>5} of {r['fresh_probes']:<4} {r['fresh_median_s']:>6.2f}s "
              f"{r['fresh_slowest_s']:>7.2f}s {r['rss_peak_mb']:>7} MB")
    summary = {"guard": not args.no_guard, "rss_start_mb": start >> 20, "rss_after_mb": after >> 20,
               "fresh_after_s": round(settled_fresh, 2), "phases": results,
               "fresh_within_2s": all(r["fresh_slowest_s"] < 2.0 for r in results),
               "rss_within_200mb": all((r["rss_peak_mb"] - (start >> 20)) <= 200 for r in results)
               and (after - start) >> 20 <= 200}
    print(f"RSS start {start >> 20} MB, {args.settle:g} s after {after >> 20} MB; fresh client after "
          f"{settled_fresh:.2f} s")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()

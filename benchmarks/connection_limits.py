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

``--proxy nginx`` puts the repository's own reverse proxy in front (``deploy/nginx``: the main ``nginx.conf``, the
server block ``grebench.conf`` and its ``grebench-proxy.inc``, as ``compose.yaml`` mounts them, with only the paths,
the listening address and the upstream changed to this machine's), started from the ``nginx`` binary on PATH
(Debian: ``apt-get install nginx-light``); the attackers and the fresh client then go through nginx, the app trusts
X-Forwarded-For from 127.0.0.1 only, and the RSS columns add nginx's processes to the app's.
Prints a table and one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import re
import resource
import shutil
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


def start_app(data: Path, port: int, nofile: int, guard: bool, proxied: bool = False) -> subprocess.Popen[bytes]:
    """``grebench app`` (or, without the guard, the same app launched by ``demo.launch``) in a child process;
    ``proxied``: it takes the client address from X-Forwarded-For when the connection comes from 127.0.0.1."""
    env = {**os.environ, "GREBENCH_APP_PORT": str(port), "GREBENCH_DATA_DIR": str(data),
           "GREBENCH_LOCAL_CANDIDATES": "", "GREBENCH_LOCAL_JUDGES": "",
           "GREBENCH_APP_REQUESTS_PER_ADDRESS_PER_MIN": "100000",
           **({"GREBENCH_APP_TRUSTED_PROXIES": "127.0.0.1/32"} if proxied else {})}
    code = ("from grebench.settings import load_settings; from grebench.site import create_app, launch_kwargs; "
            "s = load_settings(); create_app(s).launch(**launch_kwargs(s))") if not guard else \
        "from grebench.settings import load_settings; from grebench.site import launch_app; launch_app(load_settings())"

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, max(nofile, resource.getrlimit(resource.RLIMIT_NOFILE)[1])))

    return subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, preexec_fn=limit)


DEPLOY = Path(__file__).resolve().parents[1] / "deploy" / "nginx"


def start_nginx(work: Path, port: int, app_port: int, worker_connections: int = 0) -> subprocess.Popen[bytes]:
    """nginx in the foreground with the deployment's configuration (``deploy/nginx``: the main ``nginx.conf``
    compose mounts, its workers and connections per worker, and the server block): only the paths (pid, logs, temp
    files, includes), ``listen`` and the upstream's address are this machine's, and the rate limit is lifted as the
    app's is (``app_requests_per_address_per_min``), so that what is measured is how connections are held.
    ``worker_connections``: another value for nginx's, to compare (0: the deployment's)."""
    binary = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    if binary is None:
        raise SystemExit("--proxy nginx: no nginx binary (Debian: apt-get install nginx-light)")
    work.mkdir(parents=True, exist_ok=True)
    server = (DEPLOY / "grebench.conf").read_text(encoding="utf-8")
    server = server.replace("listen 80;", f"listen 127.0.0.1:{port} backlog=4096;")
    server = server.replace("server grebench:7860;", f"server 127.0.0.1:{app_port};")
    server = server.replace("/etc/nginx/conf.d/grebench-proxy.inc", str(DEPLOY / "grebench-proxy.inc"))
    server = re.sub(r"rate=\d+r/m", "rate=100000r/m", server).replace("burst=600", "burst=100000")
    (work / "grebench.conf").write_text(server, encoding="utf-8")
    for name in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (work / name).mkdir(exist_ok=True)
    temp = "".join(f"    {name}_temp_path {work / name};\n" for name in ("client_body", "proxy", "fastcgi", "uwsgi",
                                                                         "scgi"))
    main = (DEPLOY / "nginx.conf").read_text(encoding="utf-8")
    # as root, the workers would switch to the image's `nginx` user (absent here), and `nobody` cannot write the
    # body buffers under a private temp dir: they stay the user that runs the harness
    main = re.sub(r"^user .*$", "user root;" if os.geteuid() == 0 else "", main, flags=re.M)
    main = re.sub(r"^pid .*$", f"pid {work}/nginx.pid;", main, flags=re.M)
    main = re.sub(r"^error_log .*$", f"error_log {work}/error.log warn;", main, flags=re.M)
    main = re.sub(r"^\s*access_log .*$", "    access_log off;", main, flags=re.M)
    if worker_connections:
        main = re.sub(r"worker_connections\s+\d+;", f"worker_connections {worker_connections};", main)
    main = main.replace("include /etc/nginx/conf.d/*.conf;", f"{temp}    include {work / 'grebench.conf'};")
    (work / "nginx.conf").write_text("daemon off;\n" + main, encoding="utf-8")
    subprocess.run([binary, "-t", "-c", str(work / "nginx.conf"), "-p", str(work)], check=True,
                   capture_output=True)
    declared = re.search(r"worker_rlimit_nofile (\d+);", main)
    nofile = int(declared.group(1)) if declared else 65536

    def limit() -> None:  # as far as this machine's hard limit lets (nginx's own setrlimit is refused above it)
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(nofile, hard), hard))

    return subprocess.Popen([binary, "-c", str(work / "nginx.conf"), "-p", str(work)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, preexec_fn=limit)


def _rss(pids: list[int]) -> int:
    """Summed RSS of these processes and their children (nginx's master and worker), bytes."""
    import psutil

    total = 0
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            total += sum(p.memory_info().rss for p in [proc, *proc.children(recursive=True)])
        except psutil.NoSuchProcess:
            pass
    return total


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


def phase(kind: str, count: int, args: argparse.Namespace, port: int, pids: list[int]) -> dict[str, Any]:
    """Hold ``count`` connections of ``kind`` for ``args.hold`` seconds while a fresh client asks every second."""
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
            peak = max(peak, _rss(pids))
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
    parser.add_argument("--proxy", choices=("none", "nginx"), default="none",
                        help="nginx: the deployment's reverse proxy (deploy/nginx) in front of the app")
    parser.add_argument("--nginx-worker-connections", type=int, default=0,
                        help="with --proxy nginx: another worker_connections than deploy/nginx/nginx.conf's, to "
                             "compare (the nginx image's own is 1024)")
    args = parser.parse_args()

    app_port = _free_port()
    work = Path(tempfile.mkdtemp())
    proxied = args.proxy == "nginx"
    child = start_app(work / "data", app_port, args.app_nofile, not args.no_guard, proxied)
    children: list[subprocess.Popen[bytes]] = [child]
    port = app_port
    try:
        deadline = time.monotonic() + 120
        while fresh_get(app_port, 2.0) >= 2.0:
            if time.monotonic() > deadline or child.poll() is not None:
                raise SystemExit("the app did not start")
            time.sleep(1)
        if proxied:
            port = _free_port()
            children.append(start_nginx(work / "nginx", port, app_port, args.nginx_worker_connections))
            while fresh_get(port, 2.0) >= 2.0:
                if time.monotonic() > deadline + 60 or children[-1].poll() is not None:
                    raise SystemExit(f"nginx did not start (see {work / 'nginx' / 'error.log'})")
                time.sleep(0.5)
        pids = [c.pid for c in children]
        start = _rss(pids)
        results = [phase(kind, count, args, port, pids) for kind, count in
                   (("idle", args.idle), ("slow-header", args.slow_header), ("slow-body", args.slow_body)) if count]
        time.sleep(args.settle)
        after = _rss(pids)
        settled_fresh = fresh_get(port)
    finally:
        for c in reversed(children):
            c.terminate()
            c.wait(timeout=30)
    print(f"{'phase':<12} {'conns':>6} {'opened':>7} {'closed by app':>14} {'fresh < 2 s':>12} {'median':>7} "
          f"{'slowest':>8} {'RSS peak':>9}")
    for r in results:
        print(f"{r['phase']:<12} {r['connections']:>6} {r['opened']:>7} {r['closed_by_app']:>14} "
              f"{r['fresh_within_2s']:>5} of {r['fresh_probes']:<4} {r['fresh_median_s']:>6.2f}s "
              f"{r['fresh_slowest_s']:>7.2f}s {r['rss_peak_mb']:>7} MB")
    summary = {"guard": not args.no_guard, "proxy": args.proxy,
               "nginx_worker_connections": args.nginx_worker_connections or None, "rss_start_mb": start >> 20,
               "rss_after_mb": after >> 20,
               "fresh_after_s": round(settled_fresh, 2), "phases": results,
               "fresh_within_2s": all(r["fresh_slowest_s"] < 2.0 for r in results),
               "rss_within_200mb": all((r["rss_peak_mb"] - (start >> 20)) <= 200 for r in results)
               and (after - start) >> 20 <= 200}
    print(f"RSS start {start >> 20} MB, {args.settle:g} s after {after >> 20} MB; fresh client after "
          f"{settled_fresh:.2f} s")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()

"""Idle connections from many addresses, straight at the app (issue 62 §4): is a fresh client still served?

Usage (the issue's figure; loopback only, bounded in time)::

    .venv/bin/python benchmarks/address_flood.py --connections 20000 --addresses 200 --hold 30
    .venv/bin/python benchmarks/address_flood.py --connections 20000 --addresses 200 --hold 30 --proxy nginx

Starts ``grebench app`` on an empty data dir in a child process (the product's own launch: the connection guard,
the app's settings), then opens ``--connections`` TCP connections that never send a byte, spread over
``--addresses`` loopback source addresses (each client socket is bound to 127.1.x.y before it connects; Linux
routes all of 127.0.0.0/8 to ``lo``), and reopens whatever the app closes, at once, as an attacker would.
Per-address caps cannot stop this: 20,000 / 200 is 100 a address, and at the app's total cap the addresses are
even.

While the connections are opened (a probe every ``--probe-every`` established connections, at least every
``--probe-interval`` seconds) and while they are held (``--hold`` seconds, a probe every ``--probe-interval``), a
**fresh client** (a new source address each time, 127.2.x.y) asks ``GET --path`` (default ``/``, the board page)
and the time to the first byte of the answer is measured (10 s at most); the answer must be ``200``.  Each probe is
a JSON line: when, the phase, how many flood connections were established, the time to first byte, the status, the
app's open descriptors (``/proc/PID/fd``) and the kernel's listen-queue overflows so far (``TcpExtListenOverflows``:
a SYN dropped because the accept queue was full, which a client's kernel retries 1, 3, 7 s later).  The last line is
the summary: the worst and the median probe, whether every probe was under 2 s, the app's open-file limit.

The flood runs in child processes of at most ``--per-process`` sockets each (each raises its soft open-file limit to
its hard one): one process cannot hold all 20,000 where the hard limit is 20,000 (its own descriptors come on top),
and the probing process keeps its descriptors free.  The app is started with soft limit ``--app-soft-nofile``
(1,024, a login shell's default) and hard limit ``--app-nofile``: the app raises its soft limit to the hard one
itself (``grebench.site._connections.raise_open_file_limit``), which the summary's ``app_nofile`` shows.

``--proxy nginx`` puts the repository's reverse proxy in front (``deploy/nginx`` as ``compose.yaml`` mounts it; see
``benchmarks/connection_limits.py``): the flood and the probes then go through nginx.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import select
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from connection_limits import _free_port, start_nginx  # the sibling benchmark's helpers

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")


def flood_address(k: int, addresses: int) -> str:
    """The source address of flood connection ``k``: one of ``addresses`` in 127.1.0.1 ... (250 a /24)."""
    i = k % addresses
    return f"127.1.{i // 250}.{i % 250 + 1}"


def fresh_address(n: int) -> str:
    """The source address of probe ``n``: a new one each time (127.2.x.y), holding no connection."""
    return f"127.2.{n // 250 % 250}.{n % 250 + 1}"


def listen_overflows() -> int:
    """The kernel's ``TcpExtListenOverflows`` (SYNs or handshakes dropped because an accept queue was full)."""
    try:
        lines = Path("/proc/net/netstat").read_text().splitlines()
    except OSError:
        return -1
    for names, values in zip(lines[::2], lines[1::2], strict=False):
        if names.startswith("TcpExt:"):
            fields = dict(zip(names.split()[1:], values.split()[1:], strict=False))
            return int(fields.get("ListenOverflows", -1))
    return -1


def open_fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


def nofile_of(pid: int) -> int:
    """The soft open-file limit of process ``pid`` (``/proc/PID/limits``)."""
    try:
        for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
            if line.startswith("Max open files"):
                return int(line.split()[3])
    except (OSError, ValueError, IndexError):
        pass
    return -1


def probe(port: int, path: str, source: str, timeout: float = 10.0) -> tuple[float, int]:
    """(seconds to the first byte of the answer to ``GET path`` from ``source``, its status; ``timeout``, 0 when
    none came).  The whole answer is read (the app closes: ``Connection: close``)."""
    started = time.monotonic()
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.bind((source, 0))
            sock.connect(("127.0.0.1", port))
            sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
            head = sock.recv(65536)
            first = time.monotonic() - started
            if not head:
                return timeout, 0
            sock.settimeout(max(0.1, timeout - first))
            while sock.recv(65536):
                pass
    except OSError:
        return timeout, 0
    try:
        status = int(head.split(b" ", 2)[1])
    except (IndexError, ValueError):
        status = 0
    return first, status


class Flood:
    """``count`` idle connections (numbered from ``first``) held open and reopened at once when closed, in one
    process: non-blocking sockets on one epoll, nothing in Python per socket but a dict entry (an asyncio stream per
    socket reconnects about 2,000 a second on this machine; this several times that)."""

    def __init__(self, port: int, first: int, count: int, addresses: int, concurrency: int) -> None:
        self.port, self.first, self.count, self.addresses = port, first, count, addresses
        self.concurrency = concurrency
        self.open = self.opened = self.closed = self.failed = self.refused = self.started = 0
        self.epoll = select.epoll()
        self.socks: dict[int, tuple[int, socket.socket, bool]] = {}  # fd -> (connection number, socket, connected)
        self.connecting = 0

    def connect(self, k: int) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        try:
            sock.bind((flood_address(k, self.addresses), 0))
            sock.connect_ex(("127.0.0.1", self.port))
        except OSError:
            sock.close()
            self.failed += 1
            return
        self.socks[sock.fileno()] = (k, sock, False)
        self.connecting += 1
        self.epoll.register(sock.fileno(), select.EPOLLOUT | select.EPOLLIN)

    def event(self, fd: int, mask: int) -> int | None:
        """Handle one epoll event; the connection number to reconnect when its socket closed."""
        k, sock, connected = self.socks[fd]
        if not connected and mask & select.EPOLLOUT and not mask & (select.EPOLLERR | select.EPOLLHUP):
            self.connecting -= 1
            self.socks[fd] = (k, sock, True)
            self.open += 1
            self.opened += 1
            self.epoll.modify(fd, select.EPOLLIN)
            return None
        if connected and not mask & (select.EPOLLERR | select.EPOLLHUP):
            try:
                data = sock.recv(4096)
            except BlockingIOError:
                return None
            except OSError:
                data = b""
            if data:  # a refusal's 503, then its hold: still a socket held
                self.refused += data.startswith(b"HTTP/1.1 503")
                return None
        self.epoll.unregister(fd)
        del self.socks[fd]
        sock.close()
        if connected:
            self.open -= 1
            self.closed += 1
        else:
            self.connecting -= 1
            self.failed += 1
        return k

    def tally(self) -> dict[str, int]:
        return {"first": self.first, "open": self.open, "opened": self.opened, "closed_by_server": self.closed,
                "connect_failed": self.failed, "refused_503": self.refused, "started": self.started}

    def run(self, stop: Any, report: Any) -> None:
        waiting = list(range(self.first + self.count - 1, self.first - 1, -1))  # to connect (first ones last: pop)
        reported = 0.0
        while not stop.is_set():
            while waiting and self.connecting < self.concurrency:
                k = waiting.pop()
                self.started = max(self.started, k - self.first + 1)
                self.connect(k)
            for fd, mask in self.epoll.poll(0.05, 1024):
                again = self.event(fd, mask)
                if again is not None:
                    waiting.append(again)  # at once, as an attacker would
            now = time.monotonic()
            if now - reported >= 0.1:
                report.put(self.tally())
                reported = now
        report.put(self.tally())
        for _, sock, _ in self.socks.values():
            sock.close()


def _flood(port: int, first: int, count: int, addresses: int, concurrency: int, stop: Any, report: Any) -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if count + 64 > hard:
        raise SystemExit(f"a flood process needs {count + 64} descriptors, its hard limit is {hard}")
    Flood(port, first, count, addresses, concurrency).run(stop, report)


def start_app(data: Path, port: int, soft: int, hard: int, proxied: bool) -> subprocess.Popen[bytes]:
    """``grebench app``'s launch (:func:`grebench.site.launch_app`) in a child process with open-file limits
    ``soft``/``hard``; ``proxied``: it trusts X-Forwarded-For from 127.0.0.1 (nginx in front)."""
    env = {**os.environ, "GREBENCH_APP_PORT": str(port), "GREBENCH_DATA_DIR": str(data),
           "GREBENCH_LOCAL_CANDIDATES": "", "GREBENCH_LOCAL_JUDGES": "",
           "GREBENCH_APP_REQUESTS_PER_ADDRESS_PER_MIN": "100000",
           **({"GREBENCH_APP_TRUSTED_PROXIES": "127.0.0.1/32"} if proxied else {})}
    code = ("from grebench.settings import load_settings; from grebench.site import launch_app; "
            "launch_app(load_settings())")

    def limit() -> None:
        current = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        top = min(hard, current)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, top), top))

    return subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, preexec_fn=limit)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=20000)
    parser.add_argument("--addresses", type=int, default=200)
    parser.add_argument("--hold", type=float, default=30.0, help="seconds the flood is held once every connection "
                        "was attempted")
    parser.add_argument("--probe-every", type=int, default=500, help="a probe every N more established connections "
                        "while the flood is opened")
    parser.add_argument("--probe-interval", type=float, default=1.0, help="seconds between probes at most")
    parser.add_argument("--path", default="/", help="what the fresh client asks for (default: the board page)")
    parser.add_argument("--per-process", type=int, default=10000, help="most sockets one flood process holds")
    parser.add_argument("--concurrency", type=int, default=2000, help="connects in flight at once per process")
    parser.add_argument("--app-nofile", type=int, default=20000, help="the app's hard open-file limit")
    parser.add_argument("--app-soft-nofile", type=int, default=1024,
                        help="the app's soft open-file limit when started (it raises it to the hard one)")
    parser.add_argument("--proxy", choices=("none", "nginx"), default="none")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp())
    app_port = _free_port()
    proxied = args.proxy == "nginx"
    app = start_app(work / "data", app_port, args.app_soft_nofile, args.app_nofile, proxied)
    children: list[subprocess.Popen[bytes]] = [app]
    port = app_port
    results: list[dict[str, Any]] = []
    baseline: list[float] = [0.0]
    load_before = 0.0
    final: dict[str, int] = {}
    ctx = multiprocessing.get_context("fork")
    stop, report = ctx.Event(), ctx.Queue()
    workers: list[Any] = []
    try:
        deadline = time.monotonic() + 180
        while probe(app_port, args.path, "127.0.0.1", 5.0)[1] != 200:
            if time.monotonic() > deadline or app.poll() is not None:
                raise SystemExit("the app did not start")
            time.sleep(0.5)
        if proxied:
            port = _free_port()
            children.append(start_nginx(work / "nginx", port, app_port))
            while probe(port, args.path, "127.0.0.1", 5.0)[1] != 200:
                if time.monotonic() > deadline or children[-1].poll() is not None:
                    raise SystemExit(f"nginx did not start (see {work / 'nginx' / 'error.log'})")
                time.sleep(0.5)
        load_before = os.getloadavg()[0]
        baseline = [probe(port, args.path, fresh_address(60000 + i))[0] for i in range(3)]
        overflows0 = listen_overflows()
        shares = [(first, min(args.per_process, args.connections - first))
                  for first in range(0, args.connections, args.per_process)]
        began = time.monotonic()
        for i, (first, count) in enumerate(shares):
            workers.append(ctx.Process(target=_flood, args=(port, first, count, args.addresses, args.concurrency,
                                                            stop, report), name=f"flood-{i}"))
        for worker in workers:
            worker.start()

        # each worker's latest tally, by its first connection's number
        latest: dict[int, dict[str, int]] = {}
        lock = threading.Lock()

        def drain() -> None:
            while not stop.is_set() or not report.empty():
                try:
                    tally = report.get(timeout=0.2)
                except Exception:  # queue.Empty
                    continue
                with lock:
                    latest[tally["first"]] = tally

        drainer = threading.Thread(target=drain, daemon=True)
        drainer.start()

        def totals() -> dict[str, int]:
            with lock:
                out: dict[str, int] = {}
                for tally in latest.values():
                    for key, value in tally.items():
                        if key != "first":
                            out[key] = out.get(key, 0) + value
                return out

        n, last_probe, last_open, held_since = 0, 0.0, 0, None
        pids = [c.pid for c in children]
        while True:
            now = time.monotonic()
            total = totals()
            if held_since is None and total.get("started", 0) >= args.connections:
                held_since = now
            if held_since is not None and now - held_since >= args.hold:
                break
            if now - began > args.hold + 600:
                break
            due = now - last_probe >= args.probe_interval
            if held_since is None and total.get("open", 0) - last_open >= args.probe_every:
                due = True
            if not due:
                time.sleep(0.02)
                continue
            last_probe, last_open = now, total.get("open", 0)
            ttfb, status = probe(port, args.path, fresh_address(n))
            n += 1
            row = {"t": round(now - began, 2), "phase": "held" if held_since is not None else "opening",
                   "flood_open": total.get("open", 0), "flood_opened": total.get("opened", 0),
                   "flood_closed_by_server": total.get("closed_by_server", 0),
                   "ttfb_s": round(ttfb, 3), "status": status,
                   "server_fds": sum(open_fds(p) for p in pids), "listen_overflows": listen_overflows() - overflows0}
            results.append(row)
            print(json.dumps(row), flush=True)
        final = totals()
    finally:
        stop.set()
        for worker in workers:
            worker.join(timeout=60)
            if worker.is_alive():
                worker.kill()
        app_nofile = nofile_of(app.pid)
        for c in reversed(children):
            c.terminate()
            try:
                c.wait(timeout=30)
            except subprocess.TimeoutExpired:
                c.kill()
    times = [r["ttfb_s"] for r in results]
    served = [r for r in results if r["status"] == 200]
    over = [r for r in results if r["ttfb_s"] >= 2.0 or r["status"] != 200]
    summary = {
        "summary": True, "proxy": args.proxy, "connections": args.connections, "addresses": args.addresses,
        "hold_s": args.hold, "path": args.path, "app_nofile": app_nofile, "probes": len(results),
        "probes_200": len(served), "probes_over_2s_or_failed": len(over),
        "worst_ttfb_s": max(times, default=0.0), "median_ttfb_s": round(statistics.median(times), 3) if times else 0.0,
        "quiet_ttfb_s": round(max(baseline), 3), "under_2s": bool(results) and not over,
        "flood": final, "listen_overflows": results[-1]["listen_overflows"] if results else 0,
        "cpus": os.cpu_count(), "load_before": round(load_before, 2),
    }
    print(json.dumps(summary), flush=True)
    print(f"{len(served)} of {len(results)} probes answered 200; worst {summary['worst_ttfb_s']:.2f} s, median "
          f"{summary['median_ttfb_s']:.3f} s (quiet {summary['quiet_ttfb_s']:.3f} s); under 2 s: "
          f"{summary['under_2s']}; flood open at the end {final.get('open', 0)}, opened {final.get('opened', 0)}, "
          f"closed by the server {final.get('closed_by_server', 0)}; app open-file limit {app_nofile}",
          file=sys.stderr)


if __name__ == "__main__":
    main()

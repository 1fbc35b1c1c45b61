"""The app's memory under a stream of short sessions: bounded session state vs Gradio's default, side by side.

Usage: .venv/bin/python benchmarks/app_memory.py [--duration 60] [--workers 4] [--papers 30]

Loopback only, bounded in time (stops by itself).  Builds a small data dir (`grebench run` with the offline
estimator, no local model, then the exports), then for each setting in turn starts `grebench app` in a child
process and drives it for ``--duration`` seconds with ``--workers`` threads, every request from a new session
(`gradio_client` with a fresh session hash, the Models tab's endpoint, whose tables Gradio keeps as session state),
sampling the child's RSS (psutil) every 2 s.  Settings: ``app_session_capacity`` as shipped, and 10,000 (Gradio's
default, what the app used before).  Prints RSS at start / middle / end, requests per second and latency
percentiles for both, and ends with one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _grebench(data: Path, *args: str, env: dict[str, str] | None = None, **kw: Any) -> Any:
    exe = str(Path(sys.executable).with_name("grebench"))
    return subprocess.run([exe, "--data-dir", str(data), *args], env={**os.environ, **(env or {})}, check=True,
                          capture_output=True, text=True, **kw)


def prepare(root: Path, papers: int) -> Path:
    """A data dir with boards and exports, made fast: offline estimator, no local model."""
    data = root / "data"
    env = {"GREBENCH_LOCAL_CANDIDATES": "", "GREBENCH_LOCAL_JUDGES": "", "GREBENCH_ESTIMATOR": "offline",
           "GREBENCH_PAPERS": str(papers), "GREBENCH_BOOTSTRAP_SAMPLES": "200"}
    _grebench(data, "run", "--json", env=env)
    _grebench(data, "export", env=env)
    return data


def drive(data: Path, capacity: int, duration: float, workers: int) -> dict[str, Any]:
    import psutil
    from gradio_client import Client

    port = _free_port()
    env = {**os.environ, "GREBENCH_APP_PORT": str(port), "GREBENCH_APP_SESSION_CAPACITY": str(capacity)}
    exe = str(Path(sys.executable).with_name("grebench"))
    child = subprocess.Popen([exe, "--data-dir", str(data), "app"], env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 120
        while True:  # ready when it answers (observed, bounded)
            try:
                Client(url, verbose=False)
                break
            except Exception:
                if time.monotonic() > deadline or child.poll() is not None:
                    raise RuntimeError("the app did not start") from None
                time.sleep(0.5)
        proc = psutil.Process(child.pid)
        samples: list[tuple[float, float]] = []
        latencies: list[float] = []
        errors = [0]
        lock = threading.Lock()
        stop = time.monotonic() + duration

        def worker() -> None:
            own = Client(url, verbose=False)
            while time.monotonic() < stop:
                own.session_hash = uuid.uuid4().hex  # a new visitor
                t = time.perf_counter()
                try:
                    own.predict("human", api_name="/model")
                    with lock:
                        latencies.append(time.perf_counter() - t)
                except Exception:
                    with lock:
                        errors[0] += 1

        threads = [threading.Thread(target=worker, daemon=True) for _ in range(workers)]
        start = time.monotonic()
        for th in threads:
            th.start()
        while time.monotonic() < stop:
            samples.append((time.monotonic() - start, proc.memory_info().rss / 2**20))
            time.sleep(2.0)
        for th in threads:
            th.join(timeout=60)
        samples.append((time.monotonic() - start, proc.memory_info().rss / 2**20))
    finally:
        child.terminate()
        child.wait(timeout=30)
    lat = sorted(latencies)
    mid = samples[len(samples) // 2][1]
    return {"capacity": capacity, "requests": len(lat), "errors": errors[0],
            "req_per_s": round(len(lat) / duration, 1),
            "p50_s": round(statistics.median(lat), 3) if lat else None,
            "p99_s": round(lat[int(0.99 * (len(lat) - 1))], 3) if lat else None,
            "rss_start_mib": round(samples[0][1]), "rss_mid_mib": round(mid), "rss_end_mib": round(samples[-1][1]),
            "rss_max_mib": round(max(v for _, v in samples))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of load per setting")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--papers", type=int, default=30)
    parser.add_argument("--capacities", default="shipped,10000",
                        help="comma-separated app_session_capacity values to compare (shipped = the default setting)")
    args = parser.parse_args()
    from grebench.settings import load_settings

    shipped = int(load_settings(env={}).app_session_capacity)
    with tempfile.TemporaryDirectory() as tmp:
        data = prepare(Path(tmp), args.papers)
        caps = [shipped if c.strip() == "shipped" else int(c) for c in args.capacities.split(",") if c.strip()]
        results = [drive(data, cap, args.duration, args.workers) for cap in caps]
    for r in results:
        print(f"capacity {r['capacity']:>6}: RSS {r['rss_start_mib']} -> {r['rss_mid_mib']} -> {r['rss_end_mib']} MiB "
              f"(max {r['rss_max_mib']}), {r['req_per_s']} req/s, p50 {r['p50_s']} s, p99 {r['p99_s']} s, "
              f"{r['errors']} errors", file=sys.stderr)
    print(json.dumps({"duration_s": args.duration, "workers": args.workers, "results": results}))


if __name__ == "__main__":
    main()

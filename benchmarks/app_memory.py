"""The app's memory under a stream of short sessions: bounded session state vs Gradio's default, side by side.

Usage: .venv/bin/python benchmarks/app_memory.py [--duration 60] [--workers 4] [--papers 30]

Loopback only, bounded in time (stops by itself).  Builds a small data dir (`grebench run` with the offline
estimator, no local model, then the exports), then for each setting in turn starts `grebench app` in a child
process and drives it for ``--duration`` seconds with ``--workers`` threads, every request from a new session
(`gradio_client` with a fresh session hash, the Models tab's endpoint, whose tables Gradio keeps as session state),
sampling the child's RSS (psutil) every 2 s.  Settings: ``app_session_capacity`` as shipped, and 10,000 (Gradio's
default, what the app used before).  Prints RSS at start / middle / end, requests per second and latency
percentiles for both, and ends with one JSON line.

``--big-requests`` (issue 31 §5) instead starts `grebench app` on an empty data dir and sends what an attacker
would: bodies of ``--big-mb`` MB to ``/gradio_api/call/submit`` (declared by Content-Length, and chunked with none),
``--files`` requests of 16 MiB to ``/gradio_api/component_server``, and one multipart POST of 900 small files to
``/gradio_api/upload``; each request stops being sent as soon as the app answers.  Prints the app's RSS and peak RSS
(VmHWM) before and after each, the answers, and how many files the upload folder holds; ends with one JSON line.
Run it with ``PYTHONPATH=<an older checkout>`` to measure that code instead.
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
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


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


def _memory_mib(pid: int) -> tuple[float, float]:
    """(RSS, peak RSS) of a process, MiB, from /proc (the peak is VmHWM: the most it ever held)."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return (round(int(fields["VmRSS"].split()[0]) / 1024, 1), round(int(fields["VmHWM"].split()[0]) / 1024, 1))


def big_requests(big_mb: int, files: int) -> dict[str, Any]:
    """Start `grebench app` on an empty data dir and send it the big requests of issue 31 §5 (see the docstring)."""
    import httpx

    from tests.security._http import post_streamed

    with tempfile.TemporaryDirectory() as tmp:
        port, uploads = _free_port(), Path(tmp) / "uploads"
        env = {**os.environ, "GREBENCH_APP_PORT": str(port), "GRADIO_TEMP_DIR": str(uploads)}
        exe = str(Path(sys.executable).with_name("grebench"))
        child = subprocess.Popen([exe, "--data-dir", str(Path(tmp) / "data"), "app"], env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url, steps = f"http://127.0.0.1:{port}", []
        try:
            deadline = time.monotonic() + 180
            while True:  # ready when it answers (observed, bounded)
                try:
                    if httpx.get(f"{url}/gradio_api/info", timeout=5).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline or child.poll() is not None:
                    raise RuntimeError("the app did not start")
                time.sleep(0.5)
            size = big_mb * 1_000_000
            attacks: list[tuple[str, Any]] = [
                (f"{big_mb} MB JSON, Content-Length", lambda: [post_streamed(
                    url, "/gradio_api/call/submit", size, declare=size, prefix=b'{"data": ["')]),
                (f"{big_mb} MB JSON, chunked", lambda: [post_streamed(
                    url, "/gradio_api/call/submit", size, prefix=b'{"data": ["')]),
                (f"{files} x 16 MiB multipart to component_server", lambda: [post_streamed(
                    url, "/gradio_api/component_server", 16 * 2 ** 20, declare=16 * 2 ** 20,
                    content_type="multipart/form-data; boundary=x", prefix=b"--x\r\n") for _ in range(files)]),
                ("900 files in one upload", lambda: [_upload_many(url, 900)]),
            ]
            for name, attack in attacks:
                before, t = _memory_mib(child.pid), time.perf_counter()
                answers = attack()
                after = _memory_mib(child.pid)
                stored = sum(1 for p in uploads.rglob("*") if p.is_file()) if uploads.exists() else 0
                steps.append({"attack": name, "statuses": sorted({str(a.status) for a in answers}),
                              "sent_mb": round(sum(a.sent for a in answers) / 1e6, 1),
                              "rss_mib": [before[0], after[0]], "peak_rss_mib": [before[1], after[1]],
                              "seconds": round(time.perf_counter() - t, 1), "files_stored": stored})
                print(f"{name}: answers {steps[-1]['statuses']}, sent {steps[-1]['sent_mb']} MB, RSS {before[0]} -> "
                      f"{after[0]} MiB, peak {before[1]} -> {after[1]} MiB, {steps[-1]['seconds']} s, "
                      f"{stored} files in the upload folder", file=sys.stderr)
        finally:
            child.terminate()
            child.wait(timeout=30)
    return {"big_mb": big_mb, "files": files, "steps": steps}


def _upload_many(url: str, count: int) -> Any:
    """One multipart POST of ``count`` small files to Gradio's upload route (httpx computes the Content-Length)."""
    import httpx

    from tests.security._http import Answer

    answer = httpx.post(f"{url}/gradio_api/upload", timeout=60,
                        files=[("files", (f"r{i}.jsonl", b"{}\n")) for i in range(count)])
    return Answer(answer.status_code, answer.content, int(answer.request.headers.get("content-length", 0)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of load per setting")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--papers", type=int, default=30)
    parser.add_argument("--capacities", default="shipped,10000",
                        help="comma-separated app_session_capacity values to compare (shipped = the default setting)")
    parser.add_argument("--big-requests", action="store_true", help="send big requests instead (issue 31 §5)")
    parser.add_argument("--big-mb", type=int, default=300, help="MB of each big JSON body (--big-requests)")
    parser.add_argument("--files", type=int, default=24, help="16 MiB requests to component_server (--big-requests)")
    args = parser.parse_args()
    if args.big_requests:
        print(json.dumps(big_requests(args.big_mb, args.files)))
        return
    from grebench.settings import load_settings

    shipped = int(load_settings(env={}).app.app_session_capacity)
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

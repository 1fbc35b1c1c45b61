"""Load on the readers while the writer works: the static site vs the Gradio app, and the submission endpoint.

Usage: .venv/bin/python benchmarks/load.py [--readers 50] [--requests 10] [--papers 60 | --source bundled] [--max-s 120]

Loopback only, bounded in count and time (stops by itself). Steps: `grebench run` + `grebench export` in a temp
data dir; the static site served by `http.server` from the built site dir and the app (`create_app`) on free
ports; then N reader threads per target, each a fixed number of requests, while a subprocess keeps writing
(`grebench run` then `grebench export`, in a loop, on the same data dir: the single writer, which the readers never
wait for since they read the exports). Then the submission endpoint: a burst from one submitter (exactly
`submissions_per_week` accepted) and one submission each from many submitters (all accepted). Prints p50/p95 and
error rates side by side and ends with one JSON line.  Each target gets its own ``--max-s``; requests a reader did
not start before that deadline are counted as ``not_run`` (not as errors, not in the latencies).  The app runs with the
queue settings of ``create_app``; ``reader_builds`` is how many times it loaded the export during the load.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "grebench.cli", *args], env=env, capture_output=True, text=True,
                          timeout=600)


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *_args: Any) -> None:
        pass


def _ms(values: list[float], q: int) -> float | None:
    """The q-th percentile in milliseconds (None without data)."""
    if len(values) < 2:
        return round(values[0] * 1000, 1) if values else None
    return round(statistics.quantiles(values, n=100)[q - 1] * 1000, 1)


def _readers(name: str, n: int, per: int, make: Callable[[], Callable[[int], str]], max_s: float) -> dict:
    """n threads, each ``per`` requests (stopping ``max_s`` after the start); latency of each and the errors.

    ``call(k)`` returns the kind of request it made; p50/p95 are also reported per kind.
    """
    deadline = time.monotonic() + max_s
    lat: list[float] = []
    kinds: dict[str, list[float]] = {}
    errors: list[str] = []
    lock = threading.Lock()

    def reader(_i: int) -> None:
        try:
            call = make()
        except Exception as exc:  # a reader that cannot even connect counts all its requests as errors
            with lock:
                errors.extend([f"connect: {type(exc).__name__}: {exc}"] * per)
            return
        for k in range(per):
            if time.monotonic() > deadline:
                return
            started = time.perf_counter()
            try:
                kind = call(k)
                with lock:
                    lat.append(time.perf_counter() - started)
                    kinds.setdefault(kind, []).append(lat[-1])
            except Exception as exc:
                with lock:
                    errors.append(f"{type(exc).__name__}: {str(exc)[:120]}")

    started = time.perf_counter()
    with ThreadPoolExecutor(n) as pool:
        list(pool.map(reader, range(n)))
    wall = time.perf_counter() - started
    total = len(lat) + len(errors)
    q = statistics.quantiles(lat, n=20) if len(lat) >= 2 else [float("nan")] * 19
    return {"target": name, "requests": total, "not_run": n * per - total, "ok": len(lat), "errors": len(errors),
            "error_rate": round(len(errors) / total, 4) if total else None,
            "p50_ms": round(statistics.median(lat) * 1000, 1) if lat else None, "p95_ms": round(q[18] * 1000, 1),
            "rps": round(len(lat) / wall, 1) if wall else None, "first_errors": sorted(set(errors))[:3],
            "by_kind": {k: {"n": len(v), "p50_ms": _ms(v, 50), "p95_ms": _ms(v, 95)} for k, v in sorted(kinds.items())}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--readers", type=int, default=50)
    parser.add_argument("--requests", type=int, default=10, help="requests per reader")
    parser.add_argument("--source", default="", help="a source spec (default: the first --papers bundled papers)")
    parser.add_argument("--papers", type=int, default=60, help="bundled papers in the default archive")
    parser.add_argument("--burst", type=int, default=10, help="submissions from the one submitter")
    parser.add_argument("--submitters", type=int, default=20)
    parser.add_argument("--max-s", type=float, default=120.0, help="stop each target's readers after this long")
    args = parser.parse_args()
    t0 = time.monotonic()

    from grebench._offline import apply_offline_defaults

    apply_offline_defaults()
    from grebench.settings import load_settings

    root = Path(tempfile.mkdtemp(prefix="grebench-load-"))
    if not args.source:
        from grebench.ingest._archive import bundled_path

        with bundled_path().open(encoding="utf-8") as src:
            (root / "sample.jsonl").write_text("".join(line for _, line in zip(range(args.papers), src, strict=False)),
                                               encoding="utf-8")
        args.source = f"archive:{root / 'sample.jsonl'}"
    config = root / "grebench.toml"
    config.write_text(f'data_dir = "{root / "data"}"\nbootstrap_samples = 200\n', encoding="utf-8")
    env = {**os.environ, "GREBENCH_CONFIG": str(config)}
    for step in (("run", "--source", args.source, "--json"), ("export",)):
        done = _cli(env, *step)
        if done.returncode not in (0, 1):
            sys.exit(f"grebench {step[0]} failed:\n{done.stderr[-2000:]}")
    setup_s = time.monotonic() - t0
    settings = load_settings(config, env={"GREBENCH_APP_PORT": str(_free_port())})

    site = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(settings.site_path)))
    site.daemon_threads = True
    threading.Thread(target=site.serve_forever, daemon=True).start()
    site_url = f"http://127.0.0.1:{site.server_address[1]}"
    html = sorted("/" + p.relative_to(settings.site_path).as_posix() for p in settings.site_path.rglob("*.html"))
    pages = ["/index.html", "/leaderboard.json", *html[1:9]]

    from grebench.site._app import create_app, launch_kwargs

    demo = create_app(settings)  # its own queue settings (QUEUE_KWARGS, per-event concurrency limits)
    kwargs = launch_kwargs(settings)
    kwargs.update(prevent_thread_lock=True, quiet=True)
    _, app_url, _ = demo.launch(**kwargs)
    app_url = app_url.rstrip("/")
    import duckdb
    import httpx
    from gradio_client import Client

    models = [r[0] for r in duckdb.sql(
        f"SELECT name FROM read_parquet('{settings.data_path / 'export' / 'candidates.parquet'}')").fetchall()]

    # the writer: the main job and the export, again and again on the same data dir, until the readers are done
    stop = threading.Event()
    writes = {"runs": 0, "failed": 0}

    def writer() -> None:
        while not stop.is_set():
            for step in (("run", "--source", args.source, "--json"), ("export",)):
                proc = subprocess.Popen([sys.executable, "-m", "grebench.cli", *step], env=env,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                while proc.poll() is None and not stop.is_set():
                    time.sleep(0.1)
                if proc.poll() is None:
                    proc.terminate()
                    proc.wait(timeout=30)
                    return
                writes["failed" if proc.returncode not in (0, 1) else "runs"] += 1

    write_thread = threading.Thread(target=writer, daemon=True)
    write_thread.start()

    def site_reader() -> Callable[[int], str]:
        client = httpx.Client(timeout=30)

        def call(k: int) -> str:
            client.get(site_url + pages[k % len(pages)]).raise_for_status()
            return "page"
        return call

    def app_reader() -> Callable[[int], str]:
        client = Client(app_url, verbose=False)
        page = httpx.Client(timeout=30)

        def call(k: int) -> str:
            if k % 2:
                client.predict(models[k % len(models)], api_name="/model")  # reads the exported Parquet
                return "/model"
            page.get(app_url + "/").raise_for_status()
            return "GET /"
        return call

    site_stats = _readers("static site", args.readers, args.requests, site_reader, args.max_s)
    app_stats = _readers("gradio app", args.readers, args.requests, app_reader, args.max_s)
    from grebench.site._app import reader

    app_stats["reader_builds"] = reader(settings).builds
    stop.set()
    write_thread.join(timeout=60)

    client = Client(app_url, verbose=False)

    def submit(name: str, contact: str) -> str:
        return str(client.predict(name, "openai/gpt-4o-mini", "", "2025-03-01", "2024-12-01", contact, "", "",
                                  api_name="/submit"))

    with ThreadPoolExecutor(args.burst) as pool:
        burst = list(pool.map(lambda i: submit(f"Burst-{i}", "one@example.org"), range(args.burst)))
    with ThreadPoolExecutor(min(args.submitters, 20)) as pool:
        many = list(pool.map(lambda i: submit(f"Many-{i}", f"user{i}@example.org"), range(args.submitters)))
    demo.close()
    site.shutdown()
    limit = int(settings.submissions.submissions_per_week)
    burst_ok = sum(m.startswith("Queued") for m in burst)
    many_ok = sum(m.startswith("Queued") for m in many)
    refused = sorted({m.split(":")[0][:60] for m in burst if not m.startswith("Queued")})

    print(f"setup (run + export on {args.source}): {setup_s:.1f} s; writer cycles during the load: "
          f"{writes['runs']} ok, {writes['failed']} failed")
    print(f"{'':22}{'static site':>14}{'gradio app':>14}")
    for key in ("requests", "not_run", "ok", "errors", "error_rate", "p50_ms", "p95_ms", "rps"):
        print(f"{key:22}{site_stats[key]!s:>14}{app_stats[key]!s:>14}")
    for stats in (site_stats, app_stats):
        for kind, k_stats in stats["by_kind"].items():
            print(f"  {stats['target']} {kind}: {k_stats}")
    print(f"app: the reader database was built {app_stats['reader_builds']} times during the load")
    for stats in (site_stats, app_stats):
        for err in stats["first_errors"]:
            print(f"  {stats['target']} error: {err}")
    print(f"submissions: one submitter x{args.burst} -> {burst_ok} accepted (limit {limit}); refused with {refused}")
    print(f"submissions: {args.submitters} submitters x1 -> {many_ok} accepted")
    result = {"readers": args.readers, "requests_per_reader": args.requests, "site": site_stats, "app": app_stats,
              "writer_cycles": writes, "burst": {"sent": args.burst, "accepted": burst_ok, "limit": limit},
              "many": {"sent": args.submitters, "accepted": many_ok}, "wall_s": round(time.monotonic() - t0, 1),
              "rate_limit_held": burst_ok == limit, "all_many_accepted": many_ok == args.submitters}
    for stats in (site_stats, app_stats):
        stats.pop("first_errors")
    print(json.dumps(result))
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

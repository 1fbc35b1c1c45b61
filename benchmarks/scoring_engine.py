"""Benchmark of the GEM scoring engine, measured side by side in one run (ratios, not absolute timings).

1. hf estimator vs a loop in the style of the paper authors' code (one request at a time, no inference mode,
   softmax then log over the full vocabulary at every position, no prefix reuse, marginal cached per
   (paper, reference)) on the same model weights, in the same dtype, and the same (paper, candidate, reference) set;
   max |Δ| of the per-request log-prob sums between the two.
2. FLOP utilisation of the hf estimator: necessary FLOPs / time against a matmul peak measured in the same run and
   the same dtype.
3. Offline estimator throughput on the bundled data.

``--model smollm2-135m`` (default): the real built-in evaluation LM, built as the product builds ``hf:smollm2-135m``
(installed under the models directory, e.g. ``GREBENCH_MODELS_DIR``; never pulled by the benchmark), peak = the best
of the model's own matmul shapes.  ``--model tiny``: a random-weight Llama (CPU_SHAPE), peak = 2048^3 matmuls.
``--dtype auto`` is what the product picks (:func:`grebench.runtime.choose_dtype`; tiny: float32).
Ends with one JSON line.  ``--shape llama-3.1-8b`` builds a random Llama-3.1-8B-shaped model in bf16 on CUDA and
runs the same comparison there (the naive loop on the GPU too), with the engine's prefix reuse decided as the product
decides it (``--reuse auto``: measured) and the peak taken over the model's own matmul shapes.  The engine is timed
as the scoring engine calls it: ``papers_per_batch`` papers per call (one on a CPU, many on a GPU).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grebench.scoring._request import LogprobRequest
from grebench.scoring.estimators._server import scored_sum
from tests.scoring.tiny_builders import build_tiny_llama, bundled_papers, judgment_corpus  # no test tooling needed

if TYPE_CHECKING:
    import torch

    from grebench.scoring.estimators._hf import HFEstimator
    from grebench.settings import Settings



def bench_requests(n_papers: int) -> list[LogprobRequest]:
    """Realistic GRE-bench requests from the bundled data, preprocessed by the real ``rules`` judgment-line extractor.

    Per paper (≥ 3 reviews): candidates = one human review of the paper, a human review of another paper, and that
    same-paper review with every other line dropped; references = the paper's other reviews (2–3); per reference the
    marginal and one conditional per candidate.  Synopsis = the full abstract.
    """
    from grebench.scoring import rules_judgment_lines

    def lines(text: str) -> str:
        return "\n".join(rules_judgment_lines(text))

    papers = [p for p in bundled_papers() if len(p["reviews"]) >= 3][: n_papers + 1]
    reqs = []
    for k, p in enumerate(papers[:n_papers]):
        revs = [t for t in (lines(r) for r in p["reviews"]) if t]
        other = lines(papers[k + 1]["reviews"][0])
        cands = [revs[-1], other, "\n".join(revs[-1].split("\n")[::2])]
        for ref in revs[:-1][:3]:
            reqs.append(LogprobRequest(p["id"], p["abstract"], None, ref))
            reqs += [LogprobRequest(p["id"], p["abstract"], c, ref) for c in cands]
    return reqs


def naive_scores(est: HFEstimator, reqs: list[LogprobRequest]) -> list[float]:
    """Authors'-style loop: full forward per request, softmax→log over the vocabulary, marginal cached."""
    import torch

    cache: dict[tuple[str, str | None, str], float] = {}
    out = []
    for r in reqs:
        key = (r.paper_id, r.synopsis, r.target)
        if r.first_review is None and key in cache:
            out.append(cache[key])
            continue
        t = est.encode(r)
        ids = torch.tensor([t.ids], device=est.device)
        logits = est.model(ids).logits[0].float().detach()
        logp = torch.log(torch.softmax(logits, dim=-1))
        start = len(t.ids) - t.n_target
        verbs = list(est.encode.verb_ids)
        rows = logp[start - 1:len(t.ids) - 1]
        vals = [float(rows[j, t.ids[start + j]]) for j in range(t.n_target)]
        tops = [{v: float(rows[j, v]) for v in verbs} if j in t.choice else {} for j in range(t.n_target)]
        val = scored_sum(t, vals, tops, verbs)  # the product's target rule, as the server estimators apply it
        if r.first_review is None:
            cache[key] = val
        out.append(val)
    return out


def _sync(device: torch.device | str) -> None:
    import torch

    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def matmul_gflops(device: torch.device | str, dtype: torch.dtype, m: int, k: int, n: int,
                  seconds: float = 0.3) -> float:
    """Measured GFLOP/s of an (m×k)·(k×n) matmul: one warm-up, then ≥ 3 repeats filling about ``seconds``."""
    import torch

    a, b = torch.randn(m, k, device=device, dtype=dtype), torch.randn(k, n, device=device, dtype=dtype)
    torch.matmul(a, b)
    _sync(device)
    t = time.perf_counter()
    torch.matmul(a, b)
    _sync(device)
    reps = max(3, int(seconds / max(time.perf_counter() - t, 1e-6)))
    t = time.perf_counter()
    for _ in range(reps):
        torch.matmul(a, b)
    _sync(device)
    return 2 * m * k * n * reps / (time.perf_counter() - t) / 1e9


def matmul_peak(device: torch.device | str, dtype: torch.dtype, n: int = 2048, reps: int = 10) -> float:
    """Measured FLOP/s of large square matmuls on this machine."""
    import torch

    a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
    torch.matmul(a, b)
    _sync(device)
    t = time.perf_counter()
    for _ in range(reps):
        torch.matmul(a, b)
    _sync(device)
    return 2 * n**3 * reps / (time.perf_counter() - t)


def model_matmul_shapes(cfg: Any, tokens: int = 1024, scored: int = 256) -> dict[str, tuple[int, int, int]]:
    """(m, k, n) of the matmuls that dominate a forward pass of this model over ``tokens`` tokens."""
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    h, i = cfg.hidden_size, cfg.intermediate_size
    return {"mlp_up": (tokens, h, i), "mlp_down": (tokens, i, h),
            "attn_o": (tokens, cfg.num_attention_heads * head_dim, h), "lm_head": (scored, h, cfg.vocab_size)}


def model_matmul_peak(device: torch.device | str, dtype: torch.dtype, shapes: dict[str, tuple[int, int, int]],
                      rounds: int = 3) -> tuple[float, dict[str, float]]:
    """Best FLOP/s over the model's own matmul shapes, best of ``rounds`` each: (peak FLOP/s, GFLOP/s per shape)."""
    per = {name: max(matmul_gflops(device, dtype, *mkn) for _ in range(rounds)) for name, mkn in shapes.items()}
    return max(per.values()) * 1e9, {name: round(v, 1) for name, v in per.items()}


def necessary_flops(est: HFEstimator, reqs: list[LogprobRequest]) -> tuple[float, int]:
    """FLOPs any exact engine must spend on this request set, and the number of tokens that must be processed.

    Tokens that must be processed = the nodes of the token trie of all distinct prompts, each prompt's last token
    excluded (nothing reads its output): a position shared by several prompts (the per-paper prefix, a first
    review shared by all references, even a common start of two targets) counts once.  This is a lower bound of what
    the two-level cache computes, so the utilisation is not inflated by reuse.  FLOPs = 2 × non-embedding parameters
    per such token + causal attention (QKᵀ and AV: 4 × layers × attention width × (position + 1)) + LM head
    (2 × hidden × vocab) at scored positions only.
    """
    cfg = est.model.config
    body = sum(p.numel() for n, p in est.model.named_parameters() if "embed_tokens" not in n and "lm_head" not in n)
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    att = 4 * cfg.num_hidden_layers * cfg.num_attention_heads * head_dim
    trie: dict = {}
    flops, tokens, seen = 0.0, 0, set()
    for r in reqs:
        t = est.encode(r)
        ids = tuple(t.ids)
        if ids in seen:
            continue
        seen.add(ids)
        node = trie
        for pos, tok in enumerate(ids[:-1]):
            nxt = node.get(tok)
            if nxt is None:
                nxt = node[tok] = {}
                tokens += 1
                flops += 2 * body + att * (pos + 1)
            node = nxt
        flops += 2 * cfg.hidden_size * cfg.vocab_size * t.n_target
    return flops, tokens


def naive_flops(est: HFEstimator, reqs: list[LogprobRequest]) -> float:
    """FLOPs of the naive loop's own algorithm (full prompt per request, LM head at every position, marginal once per
    (paper, reference)): at equal efficiency, naive_flops / necessary_flops is the speed-up reuse can buy."""
    cfg = est.model.config
    body = sum(p.numel() for n, p in est.model.named_parameters() if "embed_tokens" not in n and "lm_head" not in n)
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    att = 4 * cfg.num_hidden_layers * cfg.num_attention_heads * head_dim
    seen, flops = set(), 0.0
    for r in reqs:
        key = (r.paper_id, r.synopsis, r.first_review, r.target)
        if r.first_review is None and key in seen:
            continue
        seen.add(key)
        n = len(est.encode(r).ids)
        flops += n * (2 * body + 2 * cfg.hidden_size * cfg.vocab_size) + att * n * (n + 1) / 2
    return flops


def run_engine(est: HFEstimator, reqs: list[LogprobRequest], device: str) -> tuple[list[float], float]:
    """Engine time on the whole request set after a warm-up call."""
    import torch

    est.logprobs(reqs[:2])  # warm-up
    if device == "cuda":
        torch.cuda.synchronize()
    t = time.perf_counter()
    vals = [r.logprob for r in est.logprobs(reqs)]
    if device == "cuda":
        torch.cuda.synchronize()
    return vals, time.perf_counter() - t


# CPU shape: hidden 512 with 4 heads of 128 and 1 KV head (Llama-3.1-8B's head size and 4:1 GQA), MLP 3.5× hidden,
# LM head 16,384 wide (32× hidden: the head/hidden ratio of Llama-3.1-8B, 128,256/4,096).  Hidden 512 is the
# smallest width at which this CPU's matmuls reach ~85% of its square-matmul peak (256 reaches ~35-70%), so compute,
# not Python or memory traffic, dominates both loops; 4 layers keep the default run near 2 minutes on 2 cores.
CPU_SHAPE = {"hidden": 512, "layers": 4, "heads": 4, "kv_heads": 1, "intermediate": 1792, "vocab": 8000,
             "model_vocab": 16_384}
SMOLLM2 = "smollm2-135m"
FLOPS_NOTE = ("necessary FLOPs = 2 x non-embedding params x tokens that must be processed at least once (trie of "
              "all prompts: shared prefixes and first reviews count once) + causal attention + LM head at scored "
              "positions only; against the measured matmul peak in the run's dtype (tiny: best of 2048^3 matmuls; "
              "smollm2-135m: best of the model's own matmul shapes, 1024 tokens, LM head 256 rows)")
# Default papers per model: smollm2-135m prompts are ~1,000 tokens and the naive loop runs every one in full, so
# 2 papers (20 requests) keep the whole run near 1.5 min in bfloat16 and ~4 min in float32 on 2 shared cores.
DEFAULT_PAPERS = {"tiny": 8, SMOLLM2: 2, "llama-3.1-8b": 50}

PeakFn = Callable[[], tuple[float, dict[str, float]]]


def body_flops(est: HFEstimator, positions: int, scored: int) -> float:
    """2 x non-embedding params per token position + the LM head at scored positions (attention left out, small at
    these lengths): with the positions a path ran (pads included) its computed FLOPs, with the necessary tokens the
    necessary FLOPs on the same definition, so their ratio is the share of the path's work that was needed."""
    cfg = est.model.config
    body = sum(p.numel() for n, p in est.model.named_parameters() if "embed_tokens" not in n and "lm_head" not in n)
    return 2 * body * positions + 2 * cfg.hidden_size * cfg.vocab_size * scored


def compare(est: HFEstimator, reqs: list[LogprobRequest], peak_fn: PeakFn,
            papers_per_call: int | None = None) -> dict[str, Any]:
    """Both engine paths (prefix reuse batched across the call's papers, and plain forwards) and the naive loop on
    the same model, interleaved call by call, with FLOP share, computed/necessary FLOPs and max |Δ| of each.

    ``papers_per_call``: papers per engine call (default what the product's scoring engine gives one call here:
    one on a CPU, many on a GPU; a CPU run with many shows the batched reuse path a GPU runs).  The peak is
    measured before and after the timed loops and the best kept (a busy shared machine lowers it).
    """
    import torch

    toks = [est.encode(r) for r in reqs]
    ntok = sum(len(t.ids) for t in toks)
    n_target = [t.n_target for t in toks]
    need, need_tok = necessary_flops(est, reqs)
    print(f"{len(reqs)} requests, {ntok} prompt tokens ({need_tok} must be processed, {sum(n_target)} scored), "
          f"model {est.model.num_parameters() / 1e6:.1f}M params, {est.model.dtype}, {est.device}, "
          f"{torch.get_num_threads()} threads", file=sys.stderr)
    load_before = os.getloadavg()[0]
    peak, per_shape = peak_fn()
    est.logprobs_with(reqs[:2], True)  # warm-up, both paths
    est.logprobs_with(reqs[:2], False)
    by_paper: dict[str, list[int]] = {}
    for i, r in enumerate(reqs):
        by_paper.setdefault(r.paper_id, []).append(i)
    papers = list(by_paper.values())
    step = max(1, papers_per_call or int(est.papers_per_batch))
    paths = {"reuse": True, "plain": False}
    vals = {name: [0.0] * len(reqs) for name in [*paths, "naive"]}
    seconds = dict.fromkeys(vals, 0.0)
    fed = dict.fromkeys(paths, 0)
    for k in range(0, len(papers), step):  # interleaved: a load change on a shared machine hits every loop
        idx = [i for group in papers[k:k + step] for i in group]
        sub = [reqs[i] for i in idx]
        line = []
        for name in [*paths, "naive"]:
            before = est.positions_fed
            _sync(est.device)
            t = time.perf_counter()
            got = naive_scores(est, sub) if name == "naive" else [r.logprob for r in est.logprobs_with(sub,
                                                                                                      paths[name])]
            _sync(est.device)
            took = time.perf_counter() - t
            seconds[name] += took
            if name in fed:
                fed[name] += est.positions_fed - before
            for i, v in zip(idx, got, strict=True):
                vals[name][i] = v
            line.append(f"{name} {took:.2f}s")
        print(f"  papers {k + 1}-{min(k + step, len(papers))}/{len(papers)}: {len(idx)} requests, "
              + ", ".join(line), file=sys.stderr)
    peak2, per_shape2 = peak_fn()
    peak = max(peak, peak2)
    per_shape = {name: max(v, per_shape2[name]) for name, v in per_shape.items()}

    def path(name: str) -> dict[str, Any]:
        diffs = [abs(a - b) for a, b in zip(vals[name], vals["naive"], strict=True)]
        made = body_flops(est, fed[name], sum(n_target))
        return {"seconds": round(seconds[name], 2), "speedup_vs_naive": round(seconds["naive"] / seconds[name], 2),
                "flop_share": round(need / seconds[name] / peak, 3), "positions_run": fed[name],
                "necessary_over_computed_flops": round(body_flops(est, need_tok, sum(n_target)) / made, 3),
                "max_abs_diff_per_100_target_tokens": round(100 * max(d / n for d, n in zip(diffs, n_target,
                                                                                              strict=True)), 4),
                "max_abs_diff": max(diffs)}

    both = {name: path(name) for name in paths}
    chosen = "reuse" if est.reuse_prefix else "plain"
    diffs = [abs(a - b) for a, b in zip(vals[chosen], vals["naive"], strict=True)]
    worst = max(range(len(reqs)), key=lambda i: diffs[i])
    t_engine, t_naive = seconds[chosen], seconds["naive"]
    between = max(abs(a - b) / n for a, b, n in zip(vals["reuse"], vals["plain"], n_target, strict=True))
    return {"n_requests": len(reqs), "engine_s": round(t_engine, 2), "naive_s": round(t_naive, 2),
            "speedup": round(t_naive / t_engine, 2), "max_abs_diff": diffs[worst],
            "max_abs_diff_per_target_token": max(d / n for d, n in zip(diffs, n_target, strict=True)),
            "mean_abs_diff_per_target_token": sum(diffs) / sum(n_target),
            "max_abs_diff_per_100_target_tokens": round(100 * max(d / n for d, n in zip(diffs, n_target,
                                                                                          strict=True)), 4),
            "mean_abs_diff_per_100_target_tokens": round(100 * sum(diffs) / sum(n_target), 4),
            "engine_path": "prefix reuse batched across the call's papers" if est.reuse_prefix
            else "plain forward batched across papers",
            "papers_per_call": step, "paths": both,
            "reuse_vs_plain_max_abs_diff_per_100_target_tokens": round(100 * between, 5),
            "max_abs_diff_request": {"logprob_engine": vals[chosen][worst], "logprob_naive": vals["naive"][worst],
                                     "target_tokens": n_target[worst]},
            "flop_share": round(need / t_engine / peak, 3), "peak_gflops": round(peak / 1e9, 1),
            "engine_gflops": round(need / t_engine / 1e9, 1), "peak_gflops_by_shape": per_shape,
            "threads": torch.get_num_threads(), "prompt_tokens": ntok, "target_tokens": sum(n_target),
            "necessary_tokens": need_tok, "necessary_gflop": round(need / 1e9, 1),
            "naive_flops_over_necessary": round(naive_flops(est, reqs) / need, 2),
            "load_average_1min": round(load_before, 2), "load_average_1min_after": round(os.getloadavg()[0], 2),
            "flops_definition": FLOPS_NOTE}


def offline_rate() -> float:
    """Offline estimator requests per second on 100 papers' requests."""
    from grebench.scoring.estimators._offline import OfflineEstimator

    off = OfflineEstimator(judgment_corpus())
    off_reqs = bench_requests(100)
    t = time.perf_counter()
    off.logprobs(off_reqs)
    return len(off_reqs) / (time.perf_counter() - t)


def report(result: dict[str, Any]) -> dict[str, Any]:
    """Print the human-readable summary of a compared run; add the legacy key names the docs use."""
    result["offline_requests_per_s"] = round(offline_rate(), 1)
    result["flop_utilisation"], result["matmul_peak_gflops"] = result["flop_share"], result["peak_gflops"]
    print(f"model {result['model']}, dtype {result['dtype']} ({result['dtype_reason']})", file=sys.stderr)
    print(f"engine {result['engine_s']:.2f}s vs naive {result['naive_s']:.2f}s: {result['speedup']}x; "
          f"max |diff| {result['max_abs_diff']:.2e} nats "
          f"(max per target token {result['max_abs_diff_per_target_token']:.2e}, "
          f"mean per target token {result['mean_abs_diff_per_target_token']:.2e})", file=sys.stderr)
    print(f"FLOP share {result['flop_share']:.1%}: engine {result['engine_gflops']} GFLOP/s necessary vs matmul peak "
          f"{result['peak_gflops']} GFLOP/s ({result['dtype']}, {result['peak_gflops_by_shape'] or 'square 2048'}); "
          f"naive/necessary FLOPs {result['naive_flops_over_necessary']}; load average "
          f"{result['load_average_1min']} -> {result['load_average_1min_after']}; "
          f"offline {result['offline_requests_per_s']:.0f} requests/s", file=sys.stderr)
    for name, p in result["paths"].items():
        print(f"  {name}: {p['seconds']}s, {p['speedup_vs_naive']}x the naive loop, FLOP share {p['flop_share']:.1%}, "
              f"necessary/computed FLOPs {p['necessary_over_computed_flops']:.2f} ({p['positions_run']} positions), "
              f"max |diff| {p['max_abs_diff_per_100_target_tokens']} nats per 100 scored tokens", file=sys.stderr)
    print(f"  reuse vs plain: max |diff| {result['reuse_vs_plain_max_abs_diff_per_100_target_tokens']} nats per 100 "
          f"scored tokens; papers per call {result['papers_per_call']}", file=sys.stderr)
    return result


def main_tiny(n_papers: int, dtype: str, papers_per_call: int | None = None) -> dict[str, Any]:
    """Engine vs naive loop on a random Llama of CPU_SHAPE (float32 unless ``dtype`` says otherwise)."""
    import torch

    from grebench.scoring.estimators._hf import HFEstimator

    chosen = "float32" if dtype == "auto" else dtype
    why = ("auto: float32, as this random-weight benchmark always ran" if dtype == "auto" else "given by --dtype")
    reqs = bench_requests(n_papers)
    with tempfile.TemporaryDirectory() as tmp:
        path = build_tiny_llama(Path(tmp) / "ckpt", **CPU_SHAPE)
        est = HFEstimator(str(path), dtype=chosen, device="cpu", batch_tokens=8192)
    tdt = getattr(torch, chosen)
    result = compare(est, reqs, lambda: (matmul_peak("cpu", tdt), {}), papers_per_call)
    return report({"model": "tiny", "dtype": chosen, "dtype_reason": why, "device": "cpu", **result,
                   "shape": {k: v for k, v in CPU_SHAPE.items() if k != "vocab"}})


def smollm2_dtype(settings: Settings, requested: str) -> tuple[str, str]:
    """The dtype the product runs hf:smollm2-135m in for ``requested`` on this device, and why."""
    from grebench.runtime import choose_dtype

    dtype, rec = choose_dtype(settings, SMOLLM2, settings.scoring.hf_device, requested)
    if rec["source"] == "setting":
        return dtype, "given by --dtype"
    if rec["source"] == "device":
        return dtype, f"auto on {rec['device']}: the product's choice for this device, unmeasured"
    where = f"cached probe {rec.get('file')} of {rec.get('created_at')}" if rec["source"] == "cache" else \
        f"probe measured now ({rec.get('probe_s')}s, stored in {rec.get('file')})"
    return dtype, (f"auto on CPU: {where}: bfloat16 {rec.get('speedup')}x the float32 speed, mean |Δ log p| "
                   f"{rec.get('mean_abs_delta_logp')} nats; rule: {rec.get('rule')}")


def main_smollm2(n_papers: int, dtype: str) -> dict[str, Any]:
    """Engine vs naive loop on the installed smollm2-135m, built as the product builds ``hf:smollm2-135m``."""
    import torch

    from grebench.models import installed, models_path
    from grebench.scoring.estimators import resolve_estimator
    from grebench.scoring.estimators._hf import HFEstimator
    from grebench.settings import load_settings

    settings = load_settings().replace(hf_dtype=dtype)
    if installed(settings, SMOLLM2) is None:  # the product would pull it on first use: a benchmark never downloads
        raise SystemExit(f"{SMOLLM2} is not installed under {models_path(settings)}: run `grebench models pull "
                         f"{SMOLLM2}` or set GREBENCH_MODELS_DIR to a directory that holds it")
    chosen, why = smollm2_dtype(settings, dtype)
    t = time.perf_counter()
    est = resolve_estimator(f"hf:{SMOLLM2}", settings)
    load_s = time.perf_counter() - t
    assert isinstance(est, HFEstimator)
    if est.model.dtype != getattr(torch, chosen):
        raise SystemExit(f"the product built {est.id} in {est.model.dtype}, expected {chosen}")
    print(f"{est.id} on {est.device} (checked and loaded in {load_s:.1f}s)", file=sys.stderr)
    shapes = model_matmul_shapes(est.model.config)
    reqs = bench_requests(n_papers)
    result = compare(est, reqs, lambda: model_matmul_peak(est.device, est.model.dtype, shapes))
    return report({"model": SMOLLM2, "dtype": chosen, "dtype_reason": why, "device": str(est.device),
                   "estimator_id": est.id, **result,
                   "peak_shapes": {name: list(mkn) for name, mkn in shapes.items()}, "load_s": round(load_s, 1)})


def profile_calls(est: HFEstimator, reqs: list[LogprobRequest], out: Path) -> None:
    """torch.profiler tables (CUDA time by operator) of one engine call per path on the first call's papers."""
    from torch.profiler import ProfilerActivity, profile

    papers: list[str] = []
    for r in reqs:
        if r.paper_id not in papers:
            papers.append(r.paper_id)
    keep = set(papers[:max(1, int(est.papers_per_batch))])
    sub = [r for r in reqs if r.paper_id in keep]
    out.mkdir(parents=True, exist_ok=True)
    for name, reuse in (("reuse", True), ("plain", False)):
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            est.logprobs_with(sub, reuse)
            _sync(est.device)
        table = prof.key_averages().table(sort_by="cuda_time_total", row_limit=30)
        (out / f"profile-{name}.txt").write_text(f"{len(sub)} requests, {len(keep)} papers\n{table}\n",
                                                  encoding="utf-8")
        print(f"profile of one {name} call written to {out / f'profile-{name}.txt'}", file=sys.stderr)


def main_8b(n_papers: int, dtype: str = "auto", reuse: str = "auto", profile_dir: Path | None = None,
            batch_tokens: int = 32_768) -> dict[str, Any]:
    """Engine vs the authors'-style loop, both on the GPU, on a random Llama-3.1-8B-shaped model.

    The engine decides prefix reuse as the product does (:func:`choose_reuse`, measured here, not cached); the peak
    is the best of the model's own matmul shapes at the engine's batch size (8,192 tokens, LM head 2,048 rows).
    """
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from grebench.scoring.estimators._hf import HFEstimator, choose_reuse

    if not torch.cuda.is_available():
        raise SystemExit("--shape llama-3.1-8b needs a CUDA GPU (16 GB of bf16 weights); none is available here")
    chosen = "bfloat16" if dtype == "auto" else dtype
    tdt = getattr(torch, chosen)
    cfg = LlamaConfig(hidden_size=4096, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                      intermediate_size=14336, vocab_size=128256, max_position_embeddings=131072,
                      rope_parameters={"rope_type": "default", "rope_theta": 500000.0}, tie_word_embeddings=False)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg).to(tdt)
    with tempfile.TemporaryDirectory() as tmp:
        tok = AutoTokenizer.from_pretrained(build_tokenizer_only(Path(tmp)), local_files_only=True)
    est = HFEstimator.from_model(model, tok, f"hf:random-llama-3.1-8b:dtype={chosen}",
                                 batch_tokens=batch_tokens)
    record = choose_reuse(est, reuse, None)
    print(f"reuse decision: {record.get('why', record['source'])}", file=sys.stderr)
    shapes = model_matmul_shapes(cfg, tokens=8192, scored=2048)
    reqs = bench_requests(n_papers)
    result = compare(est, reqs, lambda: model_matmul_peak("cuda", tdt, shapes))
    if profile_dir is not None:
        profile_calls(est, reqs, profile_dir)
    return report({"model": "random-llama-3.1-8b", "batch_tokens": batch_tokens, "dtype": chosen,
                   "dtype_reason": "auto on CUDA: bfloat16" if dtype == "auto" else "given by --dtype",
                   "device": "cuda", "gpu": torch.cuda.get_device_name(0), **result,
                   "reuse_decision": {k: v for k, v in record.items() if k != "key"},
                   "peak_shapes": {name: list(mkn) for name, mkn in shapes.items()},
                   "matmul_peak_tflops": round(result["peak_gflops"] / 1e3, 1)})


def build_tokenizer_only(path: Path) -> Path:
    """A tiny BPE tokenizer with the Llama-3-style template (ids fit inside any larger vocabulary)."""
    return build_tiny_llama(path / "tok", hidden=16, layers=1, heads=2, kv_heads=1, vocab=8000)


def main() -> None:
    """Run the benchmark and print one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=[SMOLLM2, "tiny"], default=SMOLLM2,
                        help="the real built-in evaluation LM (default) or the random-weight tiny Llama")
    parser.add_argument("--shape", choices=["tiny", "llama-3.1-8b"], default=None,
                        help="llama-3.1-8b: random 8B-shaped model on CUDA (engine only); tiny: same as --model tiny")
    parser.add_argument("--dtype", choices=["auto", "float32", "bfloat16"], default="auto",
                        help="auto: what the product picks (grebench.runtime.choose_dtype; tiny: float32)")
    defaults = ", ".join(f"{k} {v}" for k, v in DEFAULT_PAPERS.items())
    parser.add_argument("--papers", type=int, default=0, help=f"papers in the request set (default {defaults})")
    parser.add_argument("--papers-per-call", type=int, default=0,
                        help="tiny: papers per engine call (default: the product's, one on a CPU); 8 runs the batched "
                             "reuse path a GPU runs")
    parser.add_argument("--reuse", choices=["auto", "on", "off"], default="auto",
                        help="llama-3.1-8b: prefix reuse as the product decides it (auto: measured) or forced")
    parser.add_argument("--batch-tokens", type=int, default=32_768,
                        help="llama-3.1-8b: the engine's token budget per forward batch")
    parser.add_argument("--profile", type=Path, default=None,
                        help="llama-3.1-8b: write torch.profiler tables of one call per path to this directory")
    args = parser.parse_args()
    which = args.shape if args.shape else args.model
    papers = args.papers or DEFAULT_PAPERS[which]
    if which == "llama-3.1-8b":
        print(json.dumps(main_8b(papers, args.dtype, args.reuse, args.profile, args.batch_tokens)))
        return
    if which == "tiny":
        print(json.dumps(main_tiny(papers, args.dtype, args.papers_per_call or None)))
        return
    print(json.dumps(main_smollm2(papers, args.dtype)))


if __name__ == "__main__":
    main()

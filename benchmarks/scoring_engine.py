"""Benchmark of the GEM scoring engine, measured side by side in one run (ratios, not absolute timings).

1. hf estimator vs a loop in the style of the paper authors' code (one request at a time, no inference mode,
   softmax then log over the full vocabulary at every position, no prefix reuse, marginal cached per
   (paper, reference)) on the same random-weight Llama and the same (paper, candidate, reference) set.
2. FLOP utilisation of the hf estimator: necessary FLOPs / time against the measured matmul peak.
3. Offline estimator throughput on the bundled data.

Ends with one JSON line.  ``--shape llama-3.1-8b`` builds a random Llama-3.1-8B-shaped model in bf16 on CUDA.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grebench.scoring._request import LogprobRequest
from tests.scoring.tiny_llama import build_tiny_llama, bundled_papers, judgment_corpus


def bench_requests(n_papers: int, max_lines: int = 12) -> list[LogprobRequest]:
    """Marginal + 3 conditionals (same-paper human, other-paper human, truncated human) per reference, 2 refs."""
    corpus = judgment_corpus()
    papers = [p for p in bundled_papers() if len(corpus[p["id"]]) >= 3][: n_papers + 1]
    reqs = []
    for k, p in enumerate(papers[:n_papers]):
        revs = ["\n".join(t.split("\n")[:max_lines]) for t in corpus[p["id"]]]
        other = "\n".join(corpus[papers[k + 1]["id"]][0].split("\n")[:max_lines])
        for ref in revs[:2]:
            reqs.append(LogprobRequest(p["id"], p["abstract"], None, ref))
            reqs += [LogprobRequest(p["id"], p["abstract"], c, ref)
                     for c in (revs[2], other, "\n".join(revs[2].split("\n")[::2]))]
    return reqs


def naive_scores(est, reqs: list[LogprobRequest]) -> list[float]:
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
        n = len(t.ids)
        val = float(sum(float(logp[j - 1, t.ids[j]]) for j in range(n - t.n_target, n)))
        if r.first_review is None:
            cache[key] = val
        out.append(val)
    return out


def matmul_peak(device: str, dtype, n: int = 2048, reps: int = 10) -> float:
    """Measured FLOP/s of large square matmuls on this machine."""
    import torch

    a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
    torch.matmul(a, b)
    if device == "cuda":
        torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(reps):
        torch.matmul(a, b)
    if device == "cuda":
        torch.cuda.synchronize()
    return 2 * n**3 * reps / (time.perf_counter() - t)


def necessary_flops(est, reqs: list[LogprobRequest]) -> float:
    """2·(non-embedding params)·(tokens that must be processed, prefix once per paper) + attention + LM head."""
    cfg = est.model.config
    d, layers, vocab = cfg.hidden_size, cfg.num_hidden_layers, cfg.vocab_size
    kv = d * cfg.num_key_value_heads // cfg.num_attention_heads
    per_layer = 2 * d * d + 2 * d * kv + 3 * d * cfg.intermediate_size
    flops, seen = 0.0, set()
    for r in reqs:
        t = est.encode(r)
        new = [] if t.prefix in seen else range(len(t.prefix))
        seen.add(t.prefix)
        for pos in [*new, *range(len(t.prefix), len(t.ids))]:
            flops += 2 * layers * per_layer + 4 * layers * d * (pos + 1)  # weights + QK^T and AV over the context
        flops += 2 * d * vocab * t.n_target  # LM head at scored positions
    return flops


def run_engine(est, reqs: list[LogprobRequest], device: str) -> tuple[list[float], float]:
    import torch

    est.logprobs(reqs[:2])  # warm-up
    if device == "cuda":
        torch.cuda.synchronize()
    t = time.perf_counter()
    vals = [r.logprob for r in est.logprobs(reqs)]
    if device == "cuda":
        torch.cuda.synchronize()
    return vals, time.perf_counter() - t


def main_cpu(n_papers: int) -> dict:
    import torch

    from grebench.scoring.estimators._hf import HFEstimator
    from grebench.scoring.estimators._offline import OfflineEstimator

    reqs = bench_requests(n_papers)
    with tempfile.TemporaryDirectory() as tmp:
        path = build_tiny_llama(Path(tmp) / "ckpt", hidden=256, layers=4, heads=8, kv_heads=4, vocab=2000,
                                intermediate=688, model_vocab=8192)  # head/hidden ratio of Llama-3.1-8B
        est = HFEstimator(str(path), dtype="float32", device="cpu", batch_tokens=16_384)
    ntok = sum(len(est.encode(r).ids) for r in reqs)
    print(f"{len(reqs)} requests, {ntok} prompt tokens, model {est.model.num_parameters() / 1e6:.1f}M params",
          file=sys.stderr)
    fast, t_engine = run_engine(est, reqs, "cpu")
    t = time.perf_counter()
    slow = naive_scores(est, reqs)
    t_naive = time.perf_counter() - t
    peak = matmul_peak("cpu", torch.float32)
    util = necessary_flops(est, reqs) / t_engine / peak
    corpus = judgment_corpus()
    off = OfflineEstimator(corpus)
    off_reqs = bench_requests(min(len(corpus), 100), max_lines=40)
    t = time.perf_counter()
    off.logprobs(off_reqs)
    off_rate = len(off_reqs) / (time.perf_counter() - t)
    diff = max(abs(a - b) for a, b in zip(fast, slow, strict=True))
    result = {"speedup": round(t_naive / t_engine, 2), "max_abs_diff": diff,
              "flop_utilisation": round(util, 3), "engine_s": round(t_engine, 2), "naive_s": round(t_naive, 2),
              "matmul_peak_gflops": round(peak / 1e9, 1), "threads": torch.get_num_threads(),
              "offline_requests_per_s": round(off_rate, 1), "n_requests": len(reqs)}
    print(f"engine {t_engine:.2f}s vs naive {t_naive:.2f}s: {result['speedup']}x, max |diff| "
          f"{result['max_abs_diff']:.2e}; FLOP utilisation {util:.1%} of {peak / 1e9:.1f} GFLOP/s; "
          f"offline {off_rate:.0f} requests/s", file=sys.stderr)
    return result


def main_8b(n_papers: int) -> dict:
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from grebench.scoring.estimators._hf import HFEstimator

    if not torch.cuda.is_available():
        raise SystemExit("--shape llama-3.1-8b needs a CUDA GPU (16 GB of bf16 weights); none is available here")
    cfg = LlamaConfig(hidden_size=4096, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                      intermediate_size=14336, vocab_size=128256, max_position_embeddings=131072,
                      rope_theta=500000.0, tie_word_embeddings=False)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    with tempfile.TemporaryDirectory() as tmp:
        tok = AutoTokenizer.from_pretrained(build_tokenizer_only(Path(tmp)), local_files_only=True)
    est = HFEstimator.from_model(model, tok, "hf:random-llama-3.1-8b:dtype=bfloat16", batch_tokens=32_768)
    reqs = bench_requests(n_papers)
    _, t_engine = run_engine(est, reqs, "cuda")
    scored = sum(est.encode(r).n_target for r in reqs)
    peak = matmul_peak("cuda", torch.bfloat16, n=8192, reps=20)
    util = necessary_flops(est, reqs) / t_engine / peak
    return {"speedup": None, "max_abs_diff": None, "flop_utilisation": round(util, 3),
            "scored_tokens_per_s": round(scored / t_engine, 1), "engine_s": round(t_engine, 2),
            "matmul_peak_tflops": round(peak / 1e12, 1), "n_requests": len(reqs)}


def build_tokenizer_only(path: Path) -> Path:
    """A tiny BPE tokenizer with the Llama-3-style template (ids fit inside any larger vocabulary)."""
    return build_tiny_llama(path / "tok", hidden=16, layers=1, heads=2, kv_heads=1, vocab=2000)


def main() -> None:
    """Run the benchmark and print one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shape", choices=["tiny", "llama-3.1-8b"], default="tiny")
    parser.add_argument("--papers", type=int, default=0, help="papers in the request set (default 8 tiny, 50 8b)")
    args = parser.parse_args()
    result = main_cpu(args.papers or 8) if args.shape == "tiny" else main_8b(args.papers or 50)
    print(json.dumps(result))


if __name__ == "__main__":
    main()

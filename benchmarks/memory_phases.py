"""Peak memory of the first run's two heaviest in-process phases, each bound off and on, side by side (issue 47 §4).

Usage: .venv/bin/python benchmarks/memory_phases.py [--model smollm2-135m] [--rows 9] [--prompt-tokens 1400]

Every configuration runs in a fresh process (its peak is that process's ``ru_maxrss``, so one configuration's heap
cannot inflate the next), on the built-in evaluation LM (pulled on first use, like ``grebench run``):

- **scoring**: the hf estimator on one paper-shaped request set (a 250-word abstract, 4 references and 7 candidates
  of ~450 words: every reference's marginal and one request per candidate and reference), at the LM-head chunk and
  batch budget of before (2,048 positions, ``hf_batch_mib`` 512) and of now (the CPU's byte-bounded chunk,
  ``hf_batch_mib`` 256);
- **generation**: ``LocalGenerator`` prefilling ``--rows`` left-padded prompts of about ``--prompt-tokens`` tokens
  (and 8 new tokens: the prefill is the peak) in one forward and in chunks of ``PREFILL_CHUNK``.

It prints each phase's peak and time and the ratios now/before, then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import time

WORDS = ["the", "model", "method", "results", "paper", "proposed", "training", "data", "experiments", "baseline",
         "authors", "show", "performance", "approach", "learning", "network", "loss", "we", "evaluate", "on",
         "benchmark", "improves", "compared", "with", "prior", "work", "analysis", "theoretical", "empirical",
         "representation", "attention", "gradient", "accuracy", "robust", "generalization", "scale", "a", "of", "in",
         "to", "and", "is", "not", "clear", "why", "ablation", "missing", "strong", "novel", "limited"]


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def _scoring(model: str, head_chunk: int | None, mib: int) -> dict[str, float]:
    from grebench.models import resolve_checkpoint
    from grebench.scoring._request import LogprobRequest
    from grebench.scoring.estimators import _hf
    from grebench.settings import load_settings

    path, _ = resolve_checkpoint(load_settings(), model)
    est = _hf.HFEstimator(str(path), dtype="float32", device="cpu", batch_bytes=mib * 2 ** 20)
    if head_chunk is not None:  # the bound of before: a fixed chunk whatever the budget
        type(est).head_chunk = property(lambda self: head_chunk)  # type: ignore[method-assign,assignment]
    rng = random.Random(20241031)
    abstract = _text(rng, 250)
    refs = [_text(rng, 450) for _ in range(4)]
    cands = [_text(rng, 450) for _ in range(7)]
    reqs = [LogprobRequest("p", abstract, None, r) for r in refs]
    reqs += [LogprobRequest("p", abstract, c, r) for r in refs for c in cands]
    started = time.perf_counter()
    est.logprobs(reqs)
    return {"seconds": time.perf_counter() - started, "chunk": float(est.head_chunk)}


def _generation(model: str, rows: int, prompt_tokens: int, chunk: int | None) -> dict[str, float]:
    from grebench.models import resolve_checkpoint
    from grebench.runtime import LocalGenerator
    from grebench.runtime._generate import BatchPlan
    from grebench.settings import load_settings

    path, _ = resolve_checkpoint(load_settings(), model)
    gen = LocalGenerator(path, "cpu", "float32")
    rng = random.Random(0)
    prompts = {f"p{i}": gen.prompt_ids([("user", _text(rng, prompt_tokens - 30 - 7 * i))]) for i in range(rows)}
    plan = gen.plan(prompts, 8, 10 ** 12)
    plan = BatchPlan(plan.batches, 8, plan.budget_bytes, plan.kv_bytes_per_token, "float32", chunk)
    started = time.perf_counter()
    gen.run(plan, prompts, lambda done: None)
    return {"seconds": time.perf_counter() - started, "chunk": float(chunk or 0)}


def _child(argv: list[str]) -> None:
    kind, model = argv[0], argv[1]
    if kind == "scoring":
        out = _scoring(model, None if argv[2] == "auto" else int(argv[2]), int(argv[3]))
    else:
        out = _generation(model, int(argv[2]), int(argv[3]), None if argv[4] == "none" else int(argv[4]))
    out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out))


def _run(args: list[str]) -> dict[str, float]:
    proc = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True, text=True,
                          env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
    if proc.returncode != 0:
        sys.exit(f"{' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _child(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--rows", type=int, default=9)
    parser.add_argument("--prompt-tokens", type=int, default=1400)
    a = parser.parse_args()
    from grebench.runtime._generate import PREFILL_CHUNK

    results = {
        "scoring_before": _run(["scoring", a.model, "2048", "512"]),
        "scoring_now": _run(["scoring", a.model, "auto", "256"]),
        "generation_before": _run(["generation", a.model, str(a.rows), str(a.prompt_tokens), "none"]),
        "generation_now": _run(["generation", a.model, str(a.rows), str(a.prompt_tokens), str(PREFILL_CHUNK)]),
    }
    print(f"{'phase':<20} {'peak MB':>8} {'seconds':>8}  chunk")
    for name, r in results.items():
        print(f"{name:<20} {r['peak_mb']:8.0f} {r['seconds']:8.1f}  {r['chunk']:.0f}")
    for phase in ("scoring", "generation"):
        now, before = results[f"{phase}_now"], results[f"{phase}_before"]
        print(f"{phase}: peak now/before {now['peak_mb'] / before['peak_mb']:.2f}, "
              f"time now/before {now['seconds'] / before['seconds']:.2f}")
    print(json.dumps(results))


if __name__ == "__main__":
    main()

"""Does the reuse probe give the same answer on a busy machine?  (issue 33 §2)

Builds the evaluation LM as the product builds it (``hf:smollm2-135m``: installed under the models directory, e.g.
``GREBENCH_MODELS_DIR``; never pulled here) and runs the product's reuse probe (:func:`measure_reuse`) ``--probes``
times while ``--competitors`` other CPU-bound processes run beside it (a Python busy loop each, at normal
priority), then once more with none.  Prints each verdict with its basis and evidence, and one JSON line: how many
probes agreed.  ``--model tiny`` runs the random-weight tiny Llama instead (float32).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _estimator(model: str) -> Any:
    from grebench.scoring.estimators import resolve_estimator
    from grebench.scoring.estimators._hf import HFEstimator
    from grebench.settings import load_settings

    if model == "tiny":
        from tests.scoring.tiny_builders import build_tiny_llama

        path = build_tiny_llama(Path(tempfile.mkdtemp()) / "ckpt", hidden=512, layers=4, heads=4, kv_heads=1,
                                intermediate=1792, vocab=8000, model_vocab=16_384)
        return HFEstimator(str(path), dtype="float32", device="cpu")
    from grebench.models import installed, models_path

    settings = load_settings().replace(hf_prefix_reuse="on")  # the probe runs below, not at load
    if installed(settings, model) is None:
        raise SystemExit(f"{model} is not installed under {models_path(settings)}: run `grebench models pull "
                         f"{model}` or set GREBENCH_MODELS_DIR to a directory that holds it")
    est = resolve_estimator(f"hf:{model}", settings)
    assert isinstance(est, HFEstimator)
    return est


def _probe(est: Any) -> dict[str, Any]:
    from grebench.scoring.estimators._hf import measure_reuse

    t = time.perf_counter()
    record = measure_reuse(est)
    record["probe_s"] = round(time.perf_counter() - t, 1)
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2-135m", help="a built-in model name, or tiny")
    parser.add_argument("--probes", type=int, default=5)
    parser.add_argument("--competitors", type=int, default=1, help="CPU-bound processes beside the probes")
    args = parser.parse_args()
    est = _estimator(args.model)
    print(f"{est.id} on {est.device}, {est.dtype}", file=sys.stderr)
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.competitors)]
    try:
        loaded = [_probe(est) for _ in range(args.probes)]
    finally:
        for p in busy:
            p.kill()
            p.wait()
    quiet = _probe(est)
    for label, r in [*((f"busy {i + 1}", r) for i, r in enumerate(loaded)), ("quiet", quiet)]:
        print(f"{label}: {'reuse' if r['reuse'] else 'plain'} ({r['basis']}; load {r['load_before']} -> "
              f"{r['load_after']}, busy={r['busy']}; {r['probe_s']}s) {r['why']}", file=sys.stderr)
    verdicts = [r["reuse"] for r in loaded]
    same = max(verdicts.count(True), verdicts.count(False))
    print(json.dumps({"model": args.model, "estimator": est.id, "competitors": args.competitors,
                      "probes": args.probes, "agreeing": same, "verdict": verdicts[0] if same == len(verdicts)
                      else None, "quiet_verdict": quiet["reuse"], "bases": [r["basis"] for r in loaded],
                      "speedups": [r["speedup"] for r in loaded], "quiet_speedup": quiet["speedup"],
                      "rounds": [r["rounds"] for r in loaded]}))


if __name__ == "__main__":
    main()

"""How often the LM copy check flags honest reviews, with a real LM, on many papers (issue 62, done-when 2).

Run with the product's own install::

    .venv/bin/python benchmarks/lm_copy_false_positives.py --lm-estimator hf:smollm2-135m --papers 40 \
        --cache /tmp/lm-fp.duckdb

For a seeded ``--papers N`` of each bundled sample (ICLR 2020, ICLR 2026; every paper with two or more reviews when
omitted), :class:`grebench.scoring.LMCopyCheck` is calibrated on every public review of those papers against the
paper's other public reviews.  The false-positive rate is **cross-fitted**, as in ``copy_detection.py --paraphrase``:
the papers of a sample are split in two seeded halves, each half's reviews are checked against the bar calibrated on
the *other* half, so no review sets the bar it is measured against.  The rate is printed per sample with a 95 %
Clopper-Pearson interval, beside the bar each half gives and the cost (requests, seconds, seconds a review).

``--cache`` keeps the log-probabilities in a store file (the product's log-prob cache,
:class:`grebench.scoring.CachedLogprobs`): a run stopped halfway picks up where it stopped, losing at most one batch,
and a second run with more papers computes only the new ones.
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from pathlib import Path

from scipy.stats import beta

from grebench.ingest import BUNDLED, bundled_source
from grebench.settings import load_settings
from grebench.store import PaperRecord, open_store


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The exact binomial interval of k successes in n trials."""
    a = (1 - level) / 2
    lo = 0.0 if k == 0 else float(beta.ppf(a, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - a, k + 1, n - k))
    return lo, hi


def main() -> None:
    from grebench.scoring import CachedLogprobs, LMCopyCheck, PaperReviews, conformal_bar, rules_judgment_lines
    from grebench.scoring.estimators import EstimatorHandle

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--papers", type=int, default=None, help="a seeded N papers of each sample (default: all)")
    parser.add_argument("--seed", type=int, default=20261207)
    parser.add_argument("--lm-estimator", default="offline", help="offline, or hf:smollm2-135m for SmolLM2")
    parser.add_argument("--cache", default=None, help="a store file for the log-prob cache (resumable runs)")
    parser.add_argument("--data-dir", default=os.environ.get("GREBENCH_DATA_DIR"),
                        help="where the model is cached (default: $GREBENCH_DATA_DIR, else a fresh folder)")
    args = parser.parse_args()

    samples: dict[str, dict[str, PaperReviews]] = {}
    for name in BUNDLED:
        found = [p for p in bundled_source(name).fetch() if isinstance(p, PaperRecord) and len(p.reviews) >= 2]
        found.sort(key=lambda p: p.paper_id)
        if args.papers is not None:
            found = random.Random(f"{args.seed}/{name}").sample(found, min(args.papers, len(found)))
        samples[name] = {p.paper_id: PaperReviews(p.paper_id, p.abstract,
                                                  {r.review_id: rules_judgment_lines(r.text) for r in p.reviews})
                         for p in found}
    corpus = {f"{name}/{pid}": ["\n".join(lines) for lines in pr.reviews.values() if lines]
              for name, by in samples.items() for pid, pr in by.items()}
    settings = load_settings(env={"GREBENCH_DATA_DIR": args.data_dir or tempfile.mkdtemp(),
                                  "GREBENCH_ESTIMATOR": args.lm_estimator})
    handle = EstimatorHandle(args.lm_estimator, settings)
    cache = open_store(Path(args.cache) if args.cache else None)
    try:
        estimator = handle.get(corpus if handle.info.needs_corpus else None)
        cached = CachedLogprobs(cache, estimator, "LM copy check")
        print(f"LM copy check false positives, {estimator.id}, cross-fitted halves (seed {args.seed})")
        print(f"{'sample':<10} {'papers':>6} {'reviews':>7} {'flagged':>7} {'rate':>7} {'95 % interval':>17} "
              f"{'bars (half 0 / 1)':>18} {'requests':>9} {'computed':>9} {'s/review':>8}")
        total_k = total_n = 0
        for name, papers in samples.items():
            started, before = time.monotonic(), cached.computed
            check = LMCopyCheck(estimator, papers, logprobs=cached)
            check.calibrate()
            half = {pid: k % 2 for k, pid in enumerate(random.Random(args.seed).sample(sorted(papers), len(papers)))}
            bars = [conformal_bar([v for v, pid in zip(check.calibration, check.calibration_papers, strict=True)
                                   if half[pid] != h]) for h in (0, 1)]
            flagged = sum(v >= bars[half[pid]] for v, pid in zip(check.calibration, check.calibration_papers,
                                                                 strict=True))
            n = len(check.calibration)
            lo, hi = clopper_pearson(flagged, n)
            seconds = time.monotonic() - started
            total_k, total_n = total_k + flagged, total_n + n
            print(f"{name:<10} {len(papers):>6} {n:>7} {flagged:>7} {flagged / max(n, 1):>7.2%} "
                  f"{f'{lo:.2%}–{hi:.2%}':>17} {f'{bars[0]:.2f} / {bars[1]:.2f}':>18} {check.requests:>9} "
                  f"{cached.computed - before:>9} {seconds / max(n, 1):>8.1f}", flush=True)
        lo, hi = clopper_pearson(total_k, total_n)
        print(f"{'both':<10} {'':>6} {total_n:>7} {total_k:>7} {total_k / max(total_n, 1):>7.2%} "
              f"{f'{lo:.2%}–{hi:.2%}':>17}")
    finally:
        handle.close()
        cache.close()


if __name__ == "__main__":
    main()

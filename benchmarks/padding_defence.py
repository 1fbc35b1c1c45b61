"""Padding under GEM-S, and a candidate defence measured beside it (issue 35 §2): a length-matched null baseline.

Run on a store that has scored the padding controls, e.g.::

    export GREBENCH_DATA_DIR=/tmp/pad GREBENCH_MODELS_DIR=...
    grebench ingest --source bundled:iclr2026
    grebench bench --papers 20 --candidate padding-topic --candidate padding-generic ...
    grebench score --papers 20 --estimator hf:smollm2-135m --metric gem-s
    python benchmarks/padding_defence.py --metric gem-s

The defence measured here is a rule about information, not about text: a review is credited only with what it says
beyond what *the same number of judgment lines that say nothing about this paper* would earn.  For each paper and
each candidate with n judgment lines, a null review of n lines is drawn (seeded) from the human candidate reviews of
*other* papers of the store, and scored against the same references with the same setup (:func:`score_texts`: the
product's own scoring path and log-prob cache).  Adjusted PMI = PMI(candidate) - PMI(null of n lines), per
reference; equivalently, the marginal "Not available." is replaced by a review of the same length about another
paper.  Printed: Cohen's d against the human review for every control, before and after, with the product's own
bootstrap CI, paired p and verdict; and how the human reviews rank by the metric before and after (Spearman ρ over
papers).  Ends with one JSON line.

Measured on 20 papers of the bundled ICLR 2026 sample with hf:smollm2-135m (docs/scoring.md, "Padding"): the rule
makes padding pay more (padding-hedge d +0.20 -> +0.31) and reorders honest reviews (Spearman 0.65), so it is not
used; the script stays as the yardstick for the next candidate defence.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from grebench.pipeline._resolve import scored_setups
from grebench.scoring import EstimatorHandle, paired_test
from grebench.scoring._preprocess import preprocess_texts, resolve_preprocessor
from grebench.scoring._preprocess import text_sha256 as sha
from grebench.scoring._texts import score_texts, stored_pmis
from grebench.scoring._validate import _bootstrap_d, cohens_d, verdict
from grebench.settings import load_settings
from grebench.store import open_store


def main() -> None:
    """Measure and print; one JSON line at the end."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--metric", default="gem-s")
    parser.add_argument("--seed", type=int, default=20200426)
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--candidate", action="append", default=None,
                        help="only these candidates besides the human review (repeatable; default: every scored one)")
    args = parser.parse_args()
    settings = load_settings()
    store = open_store(settings.db_path)
    setup = scored_setups(store)
    if setup is None:
        raise SystemExit("nothing scored in this store: run grebench score first")
    rows = store.rows("SELECT g.paper_id, g.candidate, g.text FROM generations g JOIN scores s ON "
                      "s.generation_id = g.generation_id WHERE s.metric = ? AND s.estimator = ? GROUP BY ALL",
                      [args.metric, setup.estimator_id])
    texts: dict[str, dict[str, str]] = {}
    for r in rows:
        if args.candidate is None or r["candidate"] in {"human", *args.candidate}:
            texts.setdefault(r["candidate"], {})[r["paper_id"]] = r["text"] or ""
    human = texts.get("human", {})
    papers = sorted(human)
    pre = resolve_preprocessor(setup.preprocessor_spec, settings, store)
    all_texts = sorted({t for by in texts.values() for t in by.values()})
    judged = preprocess_texts(store, pre, all_texts)
    lines = {t: list(judged[sha(t)].lines) if sha(t) in judged else [] for t in all_texts}
    pmis = stored_pmis(store, setup, args.metric)

    # null reviews: n judgment lines of other papers' human reviews, seeded per (paper, n)
    nulls: dict[tuple[str, int], str] = {}
    for paper in papers:
        pool = [line for other in papers if other != paper for line in lines[human[other]]]
        for by in texts.values():
            if paper not in by:
                continue
            n = len(lines[by[paper]])
            if n and (paper, n) not in nulls:
                rng = random.Random(f"{args.seed}:null:{paper}:{n}")
                nulls[(paper, n)] = "\n".join(rng.sample(pool, min(n, len(pool))))
    started = time.perf_counter()
    handle = EstimatorHandle(setup.estimator_spec, settings)
    try:
        scored = score_texts(store, settings, setup, args.metric, [(p, t) for (p, _), t in nulls.items()],
                             handle=handle, preprocessor=pre)
    finally:
        handle.close()
    null_s = time.perf_counter() - started

    def per_paper(candidate: str, adjusted: bool) -> dict[str, float]:
        out = {}
        for paper, text in texts.get(candidate, {}).items():
            refs = pmis.get((paper, sha(text)), {})
            if not refs:
                continue
            n = len(lines[text])
            null = scored.pmis.get((paper, sha(nulls[(paper, n)])), {}) if n else {}
            if adjusted:
                values = [v - null[ref] for ref, v in refs.items() if ref in null] if n else \
                    [v for v in refs.values()]  # no lines: the floor, as stored
            else:
                values = list(refs.values())
            if values:
                out[paper] = float(np.mean(values))
        return out

    report: dict[str, Any] = {"estimator": setup.estimator_id, "preprocessor": setup.preprocessor_id,
                              "metric": args.metric, "papers": len(papers), "null_requests": scored.estimator_calls,
                              "null_seconds": round(null_s, 1), "controls": {}}
    base = {adj: per_paper("human", adj) for adj in (False, True)}
    print(f"{len(papers)} papers, {report['null_requests']} null-review requests in {null_s:.0f}s; "
          f"{setup.estimator_id} / {setup.preprocessor_id} / {args.metric}", file=sys.stderr)
    print(f"{'control':24} {'d before':>9} {'CI':>17} {'verdict':>27} | {'d after':>8} {'CI':>17} {'verdict':>27}",
          file=sys.stderr)
    for candidate in sorted(texts):
        if candidate == "human":
            continue
        cells: dict[bool, dict[str, Any]] = {}
        for adj in (False, True):
            cand = per_paper(candidate, adj)
            common = sorted(set(cand) & set(base[adj]))
            if len(common) < 3:
                continue
            s = np.array([base[adj][p] for p in common])
            s2 = np.array([cand[p] for p in common])
            d = cohens_d(s, s2)
            lo, hi = _bootstrap_d(s, s2, args.bootstrap, args.seed)
            test = paired_test(s2 - s)
            p = test.p
            cells[adj] = {"d": round(d, 3), "ci": [round(lo, 3), round(hi, 3)], "p": round(p, 4),
                          "verdict": verdict(d, test), "papers": len(common)}
        if len(cells) < 2:
            continue
        report["controls"][candidate] = {"before": cells[False], "after": cells[True]}
        b, a = cells[False], cells[True]
        print(f"{candidate:24} {b['d']:+9.2f} [{b['ci'][0]:+.2f}, {b['ci'][1]:+.2f}] {b['verdict']:>27} | "
              f"{a['d']:+8.2f} [{a['ci'][0]:+.2f}, {a['ci'][1]:+.2f}] {a['verdict']:>27}", file=sys.stderr)
    from scipy import stats

    common = sorted(set(base[False]) & set(base[True]))
    rho = float(stats.spearmanr([base[False][p] for p in common], [base[True][p] for p in common]).statistic)
    report["human_ranking_spearman"] = round(rho, 3)
    print(f"human reviews ranked by {args.metric}, before vs after: Spearman rho {rho:.3f} over {len(common)} papers",
          file=sys.stderr)
    print(json.dumps(report))


if __name__ == "__main__":
    main()

"""The validation of one store under two scoring setups side by side: before and after a change of what is scored.

Issue 35 §2: the evaluation LM's target rule ``judgment-v1`` (grebench.scoring.estimators._tokenize) leaves the fixed
words of each reference line's judgment phrase unscored and scores its verb as a choice among the four.  Run on a
store that was scored under both rules (the same papers, candidates and references), e.g.::

    export GREBENCH_DATA_DIR=/tmp/pad GREBENCH_MODELS_DIR=...
    grebench ingest --source bundled:iclr2026
    grebench bench --papers 20 --candidate human --candidate padding-hedge ...   # every control to validate
    grebench score --papers 20 --estimator hf:smollm2-135m --metric gem-s
    python benchmarks/target_rule.py --metric gem-s

The rule is not a setting, so the scores from before it come from the code before it: the same ``score`` command run
from a worktree at ``0d05268`` (``git worktree add ../before 0d05268``, with that checkout's package on the path in
place of this one).  Each rule's scores carry their own estimator id, so the two never mix in the store.

It prints, for every control, Cohen's d against the human review with the product's bootstrap CI, paired p and
verdict under each setup (:func:`grebench.scoring._validate.validation_rows`, what ``grebench validate`` reports), how
the human reviews rank by the metric under each (Spearman ρ over papers), and how much each setup's human scores
follow the number of judgment lines of the review (Spearman ρ with the line count).  Ends with one JSON line.
It reads stored scores only: no estimator call.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
from scipy import stats

from grebench.scoring._metrics import metric_preprocessor
from grebench.scoring._preprocess import preprocess_texts, resolve_preprocessor
from grebench.scoring._preprocess import text_sha256 as sha
from grebench.scoring._validate import _per_paper, validation_rows
from grebench.settings import load_settings
from grebench.store import open_store


def _setups(store: Any, metric: str) -> list[tuple[str, str]]:
    return [(r["estimator"], r["preprocessor"]) for r in store.rows(
        "SELECT DISTINCT estimator, preprocessor FROM scores WHERE metric = ? AND candidate = 'human' ORDER BY 1",
        [metric])]


def main() -> None:
    """Compare and print; one JSON line at the end."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--metric", default="gem-s")
    parser.add_argument("--before", help="estimator id of the earlier setup (default: the id without ':target=')")
    parser.add_argument("--after", help="estimator id of the later setup (default: the id with ':target=')")
    parser.add_argument("--bootstrap", type=int, default=2000)
    args = parser.parse_args()
    settings = load_settings()
    store = open_store(settings.db_path, read_only=True)
    setups = _setups(store, args.metric)
    models = [s for s in setups if not s[0].startswith("offline:")]
    before = next((s for s in models if s[0] == args.before or (args.before is None and ":target=" not in s[0])), None)
    after = next((s for s in models if s[0] == args.after or (args.after is None and ":target=" in s[0])), None)
    if before is None or after is None:
        raise SystemExit(f"need two scored setups of {args.metric}; this store has {setups}")
    rows = {name: {r["transformation"]: r for r in validation_rows(store, est, pre, [args.metric], args.bootstrap)}
            for name, (est, pre) in (("before", before), ("after", after))}
    print(f"before: {before[0]}\nafter:  {after[0]}\n")
    print(f"{'control':26s} {'before d [95% CI]':>22s} {'p':>7s}  {'verdict':28s} | {'after d [95% CI]':>22s} "
          f"{'p':>7s}  verdict")
    for name in rows["before"]:
        b, a = rows["before"][name], rows["after"].get(name)
        if a is None:
            continue
        print(f"{name:26s} {b['d']:+.2f} [{b['ci_low']:+.2f}, {b['ci_high']:+.2f}] {b['p']:7.3g}  {b['verdict']:28s} | "
              f"{a['d']:+.2f} [{a['ci_low']:+.2f}, {a['ci_high']:+.2f}] {a['p']:7.3g}  {a['verdict']}")
    human = {name: {p: float(np.mean(list(refs.values()))) for p, refs in _per_paper(
        store, args.metric, est, metric_preprocessor(args.metric, pre), "human").items()}
        for name, (est, pre) in (("before", before), ("after", after))}
    papers = sorted(set(human["before"]) & set(human["after"]))
    rho = float(stats.spearmanr([human["before"][p] for p in papers], [human["after"][p] for p in papers])[0])
    texts = {r["paper_id"]: r["text"] or "" for r in store.rows(
        "SELECT paper_id, text FROM generations WHERE candidate = 'human' AND status = 'ok' "
        "QUALIFY row_number() OVER (PARTITION BY paper_id ORDER BY generated_at DESC) = 1")}
    pre = resolve_preprocessor(before[1], settings, store)
    judged = preprocess_texts(store, pre, sorted(set(texts.values())))
    n_lines = {p: len(judged[sha(t)].lines) if sha(t) in judged else 0 for p, t in texts.items()}
    counts = [n_lines.get(p, 0) for p in papers]
    with_length = {name: float(stats.spearmanr([human[name][p] for p in papers], counts)[0])
                   for name in ("before", "after")}
    print(f"\nhuman reviews ranked by {args.metric}, before vs after: Spearman rho {rho:.3f} over {len(papers)} papers")
    print(f"human scores vs the review's number of judgment lines: rho {with_length['before']:.3f} before, "
          f"{with_length['after']:.3f} after")
    print(json.dumps({"metric": args.metric, "before": before[0], "after": after[0], "papers": len(papers),
                      "human_ranking_spearman": round(rho, 4),
                      "human_score_vs_lines_spearman": {k: round(v, 4) for k, v in with_length.items()},
                      "rows": {name: list(r.values()) for name, r in rows.items()}}))


if __name__ == "__main__":
    main()

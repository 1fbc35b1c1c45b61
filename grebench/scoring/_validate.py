"""The metric's own validation (methods.md §4): does it reward information, not length or style?

For each metric and each transformation of the human candidate review, compare the
per-paper scores of the human review (s) and of its transformation (s') over the same
papers and references: Cohen's d = (mean s' - mean s) / sqrt((sd s² + sd s'²) / 2), a 95%
CI by bootstrap over papers, and a paired t-test p-value.  Verdicts:

- ``penalised``: d < 0 and p < 0.05 (what a degradation should get);
- ``rewarded``: d > 0 and p < 0.05 (a manipulation that gains: a failure of the metric);
- ``not rewarded``: no significant increase.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from grebench.store import Store, utcnow

HUMAN = "human"


@dataclass(frozen=True)
class Transformation:
    """A control candidate that transforms the human candidate review, and what kind of change it is."""

    candidate: str
    kind: str  # degradation | manipulation
    needs_llm: bool = False


TRANSFORMATIONS = (
    Transformation("sentence-deletion", "degradation"),
    Transformation("abstract-restatement", "degradation"),
    Transformation("other-paper", "degradation"),
    Transformation("elongation", "manipulation"),
    Transformation("deletion-completion", "degradation", needs_llm=True),
    Transformation("abstract-only", "degradation", needs_llm=True),
    Transformation("rephrase", "manipulation", needs_llm=True),
)

# The paper's Cohen's d for GEM-S with Llama-3.1-8B (methods.md §4), shown beside ours.
PAPER_D_GEM_S = {
    "sentence-deletion": -0.409,
    "deletion-completion": -0.206,
    "abstract-only": -0.566,
    "rephrase": -0.114,
    "elongation": -0.070,
}


def cohens_d(s: np.ndarray, s_prime: np.ndarray) -> float:
    """Standardised mean difference of s' over s with the pooled (average-variance) SD."""
    pooled = np.sqrt((s.var(ddof=1) + s_prime.var(ddof=1)) / 2)
    return float((s_prime.mean() - s.mean()) / pooled) if pooled > 0 else 0.0


def _bootstrap_d(s: np.ndarray, s_prime: np.ndarray, samples: int, seed: int) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(s), size=(samples, len(s)))
    a, b = s[idx], s_prime[idx]
    pooled = np.sqrt((a.var(axis=1, ddof=1) + b.var(axis=1, ddof=1)) / 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        d = np.where(pooled > 0, (b.mean(axis=1) - a.mean(axis=1)) / pooled, 0.0)
    low, high = np.percentile(d, [2.5, 97.5])
    return float(low), float(high)


def _paired_p(s: np.ndarray, s_prime: np.ndarray) -> float:
    from scipy import stats

    diff = s_prime - s
    if np.allclose(diff, 0):
        return 1.0
    return float(stats.ttest_rel(s_prime, s).pvalue)


def verdict(d: float, p: float) -> str:
    """Penalised, rewarded, or not rewarded (see module docstring)."""
    if p < 0.05 and d < 0:
        return "penalised"
    if p < 0.05 and d > 0:
        return "rewarded"
    return "not rewarded"


def _per_paper(store: Store, metric: str, estimator: str, preprocessor: str, candidate: str) -> dict[str, dict]:
    rows = store.con.execute(
        """SELECT paper_id, reference_review_id, pmi FROM scores
           WHERE metric = ? AND estimator = ? AND preprocessor = ? AND candidate = ?""",
        [metric, estimator, preprocessor, candidate],
    ).fetchall()
    by_paper: dict[str, dict] = {}
    for paper_id, ref, pmi in rows:
        by_paper.setdefault(paper_id, {})[ref] = pmi
    return by_paper


def validation_rows(
    store: Store, estimator: str, preprocessor: str, metrics: list[str], samples: int = 2000, seed: int = 0
) -> list[dict[str, Any]]:
    """One row per (metric, transformation) that has scores, with d, its CI, p and the verdict."""
    rows = []
    for metric in metrics:
        human = _per_paper(store, metric, estimator, preprocessor, HUMAN)
        for t in TRANSFORMATIONS:
            other = _per_paper(store, metric, estimator, preprocessor, t.candidate)
            s, s_prime = [], []
            for paper_id, refs in sorted(human.items()):
                common = sorted(set(refs) & set(other.get(paper_id, {})))
                if common:  # same papers and the same references for both
                    s.append(np.mean([refs[r] for r in common]))
                    s_prime.append(np.mean([other[paper_id][r] for r in common]))
            if len(s) < 3:
                continue
            a, b = np.array(s), np.array(s_prime)
            d = cohens_d(a, b)
            low, high = _bootstrap_d(a, b, samples, seed)
            p = _paired_p(a, b)
            rows.append({
                "metric": metric, "transformation": t.candidate, "kind": t.kind, "d": round(d, 4),
                "ci_low": round(low, 4), "ci_high": round(high, 4), "p": float(f"{p:.3g}"), "n_papers": len(s),
                "verdict": verdict(d, p), "mean_human": round(float(a.mean()), 4),
                "mean_transformed": round(float(b.mean()), 4),
                "paper_d": PAPER_D_GEM_S.get(t.candidate) if metric == "gem-s" else None,
            })
    return rows


def store_report(store: Store, run_id: str, estimator: str, preprocessor: str, rows: list[dict[str, Any]]) -> None:
    """Keep the report with the run (the site's methodology page shows the latest)."""
    store.con.execute(
        "INSERT OR REPLACE INTO validation_reports VALUES (?, ?, ?, ?, ?)",
        [run_id, estimator, preprocessor, json.dumps(rows), utcnow()],
    )


def latest_setup(store: Store, estimator_spec: str | None = None, preprocessor: str | None = None) -> tuple[str, str]:
    """The (estimator id, preprocessor) of the most recent scores matching the given spec prefix and preprocessor."""
    where, params = [], []
    if estimator_spec:
        where.append("(estimator = ? OR estimator LIKE ?)")
        params += [estimator_spec, f"{estimator_spec}:%"]
    if preprocessor:
        where.append("(preprocessor = ? OR preprocessor LIKE ?)")
        params += [preprocessor, f"{preprocessor}%"]
    sql = "SELECT estimator, preprocessor FROM scores"
    if where:
        sql += " WHERE " + " AND ".join(where)
    row = store.con.execute(sql + " GROUP BY 1, 2 ORDER BY max(created_at) DESC LIMIT 1", params).fetchone()
    if row is None:
        raise LookupError("no scores match: run `grebench score` first")
    return row[0], row[1]

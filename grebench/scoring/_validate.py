"""The metric's own validation (methods.md §4): does it reward information, not length or style?

For each metric and each transformation of the human candidate review, compare the per-paper scores of the human
review (s) and of its transformation (s') over the same papers and references: Cohen's d = (mean s' - mean s) /
sqrt((sd s² + sd s'²) / 2), a 95% CI by bootstrap over papers, and the p of the product's one paired test
(:func:`grebench.scoring._aggregate.paired_test`: a sign-flip permutation test with the paper as the unit, the test
the boards' "vs human" column reads too, so a board row and a validation row of one control always agree).
Verdicts:

- ``penalised``: lower, p < 0.05 (what a degradation should get);
- ``rewarded``: higher, p < 0.05 (a manipulation that gains: a failure of the metric);
- ``penalised, not significant``: lower, p >= 0.05;
- ``not rewarded``: not lower, p >= 0.05 (no significant increase);
- ``too few papers to tell``: the board has fewer papers than the test needs to reach p < 0.05 at all (6): no
  verdict either way (on 3 papers the smallest p is 0.25).

Whether a verdict is what the control expects (``as_expected``) is True, False, or None where the papers cannot
tell: too few for the test at all, or a degradation lowered in the right direction but short of significance on
fewer papers than its observed effect needs (``papers_needed`` says about how many).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypedDict

import numpy as np

from grebench.bench import CONTROLS, HUMAN, Control
from grebench.bench.controls import PENALISED
from grebench.registry import Registry
from grebench.scoring._aggregate import ALPHA, PairedTest, paired_test, papers_to_decide
from grebench.scoring._leaderboard import FLOOR_JOIN, FLOORED_PMI
from grebench.scoring._metrics import headline_metric
from grebench.settings import Settings, StageInputs
from grebench.store import Store, code_files, fingerprint, utcnow


def transformations() -> list[Control]:
    """The controls the validation compares with the human review (every registered control)."""
    return [e.obj for e in CONTROLS]


class ValidationRow(TypedDict):
    """One (metric, transformation) of the validation report (:func:`validation_rows`), stored with the run."""

    metric: str
    transformation: str             # the control, or ``<name> (other refs)``
    kind: str                       # degradation | manipulation
    d: float
    ci_low: float | None
    ci_high: float | None
    p: float
    p_min: float
    test: str
    n_papers: int
    verdict: str
    expected: str
    as_expected: bool | None
    papers_needed: int | None
    mean_human: float
    mean_transformed: float
    paper_d: float | None           # the GEM paper's d, on the headline metric only


class EstimatorAgreement(TypedDict):
    """How a fast proxy estimator agrees with the evaluation LM on one metric (:func:`estimator_agreement`)."""

    metric: str
    estimator: str
    proxy: str
    candidates: int
    rho_candidates: float
    papers: int
    rho_per_paper_mean: float | None


TOO_FEW = "too few papers to tell"
#: The power the papers-needed estimate aims at (the usual 80 %), two-sided at :data:`ALPHA`.
_Z_ALPHA, _Z_POWER = 1.959964, 0.841621


def meets_expectation(expected: str, verdict_: str, test: PairedTest | None = None) -> bool | None:
    """Whether a verdict is what the control expects (penalised, or at least not rewarded); None where the papers
    cannot tell: :data:`TOO_FEW`, or (with the ``test``) a verdict that no number of papers this small could turn."""
    if verdict_ == TOO_FEW or (test is not None and not test.can_decide and verdict_ != "rewarded"):
        return None
    if expected == PENALISED:
        if verdict_ == "penalised, not significant":
            return None
        return verdict_ == "penalised"
    return verdict_ != "rewarded"


def papers_needed(s: np.ndarray, s_prime: np.ndarray) -> int | None:
    """About how many papers the observed per-paper effect needs to be significant (two-sided at :data:`ALPHA`,
    80 % power, normal approximation on the standardised paired difference); None without a spread or an effect."""
    diff = s_prime - s
    sd = float(diff.std(ddof=1)) if diff.size > 1 else 0.0
    if sd <= 0 or not np.isfinite(sd) or diff.mean() == 0:
        return None
    dz = abs(float(diff.mean())) / sd
    return max(papers_to_decide(), int(np.ceil(((_Z_ALPHA + _Z_POWER) / dz) ** 2)))


def cohens_d(s: np.ndarray, s_prime: np.ndarray) -> float:
    """Standardised mean difference of s' over s with the pooled (average-variance) SD."""
    pooled = np.sqrt((s.var(ddof=1) + s_prime.var(ddof=1)) / 2)
    return float((s_prime.mean() - s.mean()) / pooled) if pooled > 0 else 0.0


def _bootstrap_d(s: np.ndarray, s_prime: np.ndarray, samples: int, seed: int) -> tuple[float, float]:
    """95% percentile interval of d over resamples of the papers.

    A resample that draws one paper every time has no spread, so its d is undefined; it is left out rather than
    divided by what rounding leaves of a zero variance (on 3 papers one resample in nine draws a single paper, and
    ``mean([x, x, x])`` need not be ``x``: that once put 8e15 in a published interval).  Without any defined
    resample the interval is unknown (NaN, shown as a dash)."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(s), size=(samples, len(s)))
    ordered = np.sort(idx, axis=1)
    spread = (ordered[:, 1:] != ordered[:, :-1]).any(axis=1)
    a, b = s[idx[spread]], s_prime[idx[spread]]
    pooled = np.sqrt((a.var(axis=1, ddof=1) + b.var(axis=1, ddof=1)) / 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        d = np.where(pooled > 0, (b.mean(axis=1) - a.mean(axis=1)) / pooled, 0.0)
    if not len(d):
        return float("nan"), float("nan")
    low, high = np.percentile(d, [2.5, 97.5])
    return float(low), float(high)


def _finite(x: float) -> float | None:
    """``x`` to 4 places, or None where it is not a number (kept out of JSON as NaN)."""
    return round(x, 4) if np.isfinite(x) else None


def verdict(d: float, test: PairedTest) -> str:
    """Penalised, rewarded, penalised but not significantly, not rewarded, or too few papers to tell (see the
    module docstring): the sign of ``d`` (that of the mean difference) and the paired test's p."""
    if test.p < ALPHA and d < 0:
        return "penalised"
    if test.p < ALPHA and d > 0:
        return "rewarded"
    if not test.can_decide:
        return TOO_FEW
    return "penalised, not significant" if d < 0 else "not rewarded"


def _per_paper(store: Store, metric: str, estimator: str, preprocessor: str, candidate: str) -> dict[str, dict]:
    rows = store.con.execute(  # a review without judgment lines gets the floor, as on the leaderboard
        f"""SELECT s.paper_id, s.reference_review_id, {FLOORED_PMI} FROM scores s {FLOOR_JOIN}
            WHERE s.metric = ? AND s.estimator = ? AND s.preprocessor = ? AND s.candidate = ?""",
        [metric, estimator, preprocessor, metric, estimator, preprocessor, candidate],
    ).fetchall()
    by_paper: dict[str, dict] = {}
    for paper_id, ref, pmi in rows:
        by_paper.setdefault(paper_id, {})[ref] = pmi
    return by_paper


def _copied(store: Store, candidate: str) -> dict[str, str]:
    """paper → the review a control's text was copied from (its latest generation's ``source_review_id``)."""
    return {r["paper_id"]: r["source_review_id"] for r in store.rows(
        """SELECT paper_id, source_review_id FROM generations WHERE candidate = ? AND status = 'ok'
           AND source_review_id IS NOT NULL
           QUALIFY row_number() OVER (PARTITION BY paper_id ORDER BY generated_at DESC, generation_id) = 1""",
        [candidate])}


def _row(metric: str, name: str, t: Control, human: dict[str, dict], other: dict[str, dict],
         exclude: dict[str, str], samples: int, seed: int) -> ValidationRow | None:
    s, s_prime = [], []
    for paper_id, refs in sorted(human.items()):
        common = sorted(set(refs) & set(other.get(paper_id, {})) - {exclude.get(paper_id)})
        if common:  # same papers and the same references for both
            s.append(np.mean([refs[r] for r in common]))
            s_prime.append(np.mean([other[paper_id][r] for r in common]))
    if len(s) < 3:
        return None
    a, b = np.array(s), np.array(s_prime)
    d = cohens_d(a, b)
    low, high = _bootstrap_d(a, b, samples, seed)
    test = paired_test(b - a)
    found = verdict(d, test)
    as_expected = meets_expectation(t.expected, found, test)
    needed = None
    if as_expected is None:  # how many papers would tell: a degradation's effect as observed, else the floor
        needed = (papers_needed(a, b) if t.expected == PENALISED and d < 0 else None) or papers_to_decide()
    return {
        "metric": metric, "transformation": name, "kind": t.kind, "d": round(d, 4),
        "ci_low": _finite(low), "ci_high": _finite(high), "p": float(f"{test.p:.3g}"), "p_min": test.p_min,
        "test": test.method, "n_papers": len(s), "verdict": found, "expected": t.expected,
        "as_expected": as_expected, "papers_needed": needed,
        "mean_human": round(float(a.mean()), 4), "mean_transformed": round(float(b.mean()), 4),
        "paper_d": t.paper_d if metric == headline_metric() else None,
    }


def validation_rows(
    store: Store, estimator: str, preprocessor: str, metrics: list[str], samples: int = 2000, seed: int = 0
) -> list[ValidationRow]:
    """One row per (metric, transformation) that has scores, with d, its CI, p and the verdict.

    A control copied from one of the paper's references (``source="reference"``: ``reference-copy``) gets two rows:
    on every reference, itself included (what an upload of a public review would earn: published, not hidden), and
    ``<name> (other refs)``, on the references it was not copied from.
    """
    rows = []
    for metric in metrics:
        human = _per_paper(store, metric, estimator, preprocessor, HUMAN)
        for t in transformations():
            other = _per_paper(store, metric, estimator, preprocessor, t.name)
            variants: list[tuple[str, dict[str, str]]] = [(t.name, {})]
            if t.source == "reference":
                variants.append((f"{t.name} (other refs)", _copied(store, t.name)))
            for name, exclude in variants:
                row = _row(metric, name, t, human, other, exclude, samples, seed)
                if row is not None:
                    rows.append(row)
    return rows


def estimator_agreement(store: Store, metric: str, estimator: str, preprocessor: str,
                        proxy: str | None) -> EstimatorAgreement | None:
    """How well a fast proxy estimator (its id, as the score stage recorded it) agrees with ``estimator`` on the
    same pairs: Spearman's rho of the candidates' mean scores, and the mean over papers of the per-paper rho across
    candidates.  None without a proxy, when the proxy has no scores on common pairs, or is the estimator's kind."""
    from scipy import stats

    if not proxy or Registry.split(estimator)[0] == Registry.split(proxy)[0]:
        return None
    rows = store.rows(
        f"""SELECT s.candidate, s.paper_id, avg({FLOORED_PMI}) AS main, avg(p.pmi) AS proxy
            FROM scores s {FLOOR_JOIN}
            JOIN scores p ON p.metric = s.metric AND p.preprocessor = s.preprocessor AND p.estimator = ?
                 AND p.candidate = s.candidate AND p.paper_id = s.paper_id
                 AND p.reference_review_id = s.reference_review_id
            WHERE s.metric = ? AND s.estimator = ? AND s.preprocessor = ?
            GROUP BY s.candidate, s.paper_id""",
        [metric, estimator, preprocessor, proxy, metric, estimator, preprocessor])
    if not rows:
        return None
    by_candidate: dict[str, list[tuple[float, float]]] = {}
    by_paper: dict[str, list[tuple[float, float]]] = {}
    for r in rows:
        by_candidate.setdefault(r["candidate"], []).append((r["main"], r["proxy"]))
        by_paper.setdefault(r["paper_id"], []).append((r["main"], r["proxy"]))
    means = [(float(np.mean([a for a, _ in v])), float(np.mean([b for _, b in v]))) for v in by_candidate.values()]
    rho_c = float(stats.spearmanr(*zip(*means, strict=True)).statistic) if len(means) >= 3 else float("nan")
    per_paper = [float(stats.spearmanr(*zip(*v, strict=True)).statistic) for v in by_paper.values() if len(v) >= 3
                 and len({a for a, _ in v}) > 1 and len({b for _, b in v}) > 1]
    return {"metric": metric, "estimator": estimator, "proxy": proxy, "candidates": len(means),
            "rho_candidates": round(rho_c, 4), "papers": len(per_paper),
            "rho_per_paper_mean": round(float(np.mean(per_paper)), 4) if per_paper else None}


def store_report(store: Store, run_id: str, estimator: str, preprocessor: str, rows: list[ValidationRow]) -> None:
    """Keep the report with the run (the site's methodology page shows the latest)."""
    store.con.execute(
        "INSERT OR REPLACE INTO validation_reports VALUES (?, ?, ?, ?, ?)",
        [run_id, estimator, preprocessor, json.dumps(rows), utcnow()],
    )


#: The validate stage's declaration: the settings its report depends on (its bootstrap, whether the LLM-made controls
#: are expected: ``control_model``, and the fast proxy it reports agreement with), each one's value in
#: :func:`validation_fingerprint`.  The proxy is the job's: its value is the proxy's scored estimator id the job
#: resolved (``ResolvedRun.proxy_setup``), not the setting.  The estimator and preprocessor are the job's too, in
#: the stage's scope (the scored setup's ids).  ``tests/pipeline/test_fingerprint_reads.py`` runs the stage with
#: settings that record every read and fails on one declared neither here as an input nor as operational.
VALIDATION_INPUTS = StageInputs(("seed", "bootstrap_samples", "control_model", "proxy_estimator"),
                                job=("proxy_estimator",))


def validation_fingerprint(store: Store, settings: Settings, estimator_id: str, preprocessor_id: str,
                           metrics: list[str], proxy_id: str | None = None, abstracts: bool = True) -> str:
    """What the report of one setup depends on: that setup's scores, the fast proxy's beside them (``proxy_id``: its
    estimator id, None when the job has none scored), the candidates, the declared settings
    (:data:`VALIDATION_INPUTS`), the controls, whether the job's papers have abstracts (``abstracts``: the report
    leaves out what needs one) and the code."""
    queries = {
        "scores": ("""SELECT count(*), bit_xor(hash(metric, candidate, paper_id, reference_review_id, generation_id,
                      pmi)) FROM scores WHERE estimator = ? AND preprocessor IN (?, 'none')""",
                   [estimator_id, preprocessor_id]),
        "candidates": ("SELECT count(*), bit_xor(hash(name, kind)) FROM candidates", [])}
    if proxy_id is not None:  # the agreement of the proxy's scores with the main ones is in the report
        queries["proxy_scores"] = (queries["scores"][0], [proxy_id, preprocessor_id])
    return fingerprint(store, queries=queries,
                       values=[settings.inputs(VALIDATION_INPUTS, {"proxy_estimator": proxy_id}), sorted(metrics),
                               CONTROLS.names(), abstracts],
                       code=code_files(Path(__file__)))

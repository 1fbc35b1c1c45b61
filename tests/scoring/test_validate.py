"""The validation report: Cohen's d against a hand computation, CIs, p-values and verdicts."""

from __future__ import annotations

import numpy as np

from grebench.scoring import (
    TOO_FEW,
    cohens_d,
    meets_expectation,
    paired_test,
    store_report,
    validation_rows,
    verdict,
)
from grebench.store import Store, utcnow


def _insert(store: Store, candidate: str, per_paper: dict[str, dict[str, float]], metric: str = "gem-s") -> None:
    now = utcnow()
    for paper, refs in per_paper.items():
        for ref, pmi in refs.items():
            store.con.execute(
                "INSERT INTO scores VALUES (?, 'est', 'rules-v1', 'gem-v1', ?, ?, ?, 'g', ?, 0, ?, 5, ?)",
                [metric, candidate, paper, ref, pmi, pmi, now])


def test_cohens_d_matches_hand_computation() -> None:
    s = np.array([1.0, 2.0, 3.0, 4.0])
    s2 = np.array([0.0, 1.0, 1.0, 2.0])
    # means 2.5 and 1.0; sample variances 1.6667 and 0.6667; pooled sd sqrt(1.1667) = 1.0801
    assert abs(cohens_d(s, s2) - (-1.5 / np.sqrt((5 / 3 + 2 / 3) / 2))) < 1e-12
    assert cohens_d(s, s) == 0.0


def test_bootstrap_interval_leaves_out_resamples_of_a_single_paper() -> None:
    """On 3 papers one resample in nine draws one paper three times: no spread, so no d.  The variance of
    [0.1, 0.1, 0.1] is 2.9e-34 in floating point, not 0, and dividing by it once published an interval reaching
    -3.7e17."""
    from grebench.scoring._validate import _bootstrap_d

    s, s_prime = np.array([0.1, 1.7, 2.9]), np.array([-4.3, 7.77, 12.345])
    assert np.array([0.1] * 3).var(ddof=1) > 0  # the rounding the interval must not divide by
    low, high = _bootstrap_d(s, s_prime, 2000, 0)
    # every resample with two or more distinct papers: |d| is bounded by the spread of these values
    assert -5 < low < high < 5
    # where every resample draws a single paper nothing is defined: unknown, not a number
    assert all(np.isnan(_bootstrap_d(np.array([0.1]), np.array([2.0]), 50, 0)))


def test_verdicts() -> None:
    significant = paired_test([1.0] * 10)  # p = 2/1024
    flat = paired_test([1.0, -1.0] * 5)  # p = 1 on enough papers to decide
    few = paired_test([1.0, 2.0, 3.0])  # 3 papers: p can be no lower than 0.25
    assert significant.p < 0.05 and flat.p >= 0.05 and flat.can_decide and not few.can_decide
    assert verdict(-0.4, significant) == "penalised"
    assert verdict(0.4, significant) == "rewarded"
    assert verdict(0.4, flat) == "not rewarded"
    # lower but not significantly: says so, and a degradation short of significance cannot be told on these papers
    assert verdict(-0.4, flat) == "penalised, not significant"
    assert meets_expectation("penalised", verdict(-0.4, flat)) is None
    assert meets_expectation("penalised", verdict(0.4, flat)) is False  # not lower at all: not as expected
    assert meets_expectation("not rewarded", verdict(-0.4, flat)) and meets_expectation("not rewarded", "not rewarded")
    # too few papers for the test to reach p < 0.05 at all: no verdict either way, whichever way it leans
    assert verdict(-3.0, few) == verdict(3.0, few) == TOO_FEW
    assert meets_expectation("penalised", TOO_FEW, few) is None
    assert meets_expectation("not rewarded", TOO_FEW, few) is None


def test_three_papers_give_no_verdict_and_no_p_below_a_quarter(store: Store) -> None:
    """The first run's complaint: on 3 papers a control above the human read "p = 0.000" and "NOT AS EXPECTED"."""
    human = {f"p{i}": {"r1": 10.0 + i, "r2": 11.0 + i} for i in range(3)}
    shuffled = {p: {r: v + 9.9 for r, v in refs.items()} for p, refs in human.items()}
    deleted = {p: {r: v + 1.5 for r, v in refs.items()} for p, refs in human.items()}
    _insert(store, "human", human)
    _insert(store, "sentence-shuffle", shuffled)
    _insert(store, "sentence-deletion", deleted)
    rows = {r["transformation"]: r for r in validation_rows(store, "est", "rules-v1", ["gem-s"], 200, 1)}
    for row in rows.values():
        assert row["p"] == 0.25 and row["p_min"] == 0.25
        assert row["verdict"] == TOO_FEW and row["as_expected"] is None and row["papers_needed"] == 6


def test_rows_use_common_papers_and_references(store: Store) -> None:
    rng = np.random.default_rng(0)
    human, deleted, longer = {}, {}, {}
    for i in range(60):
        base = rng.normal(10, 3)
        human[f"p{i}"] = {"r1": base, "r2": base + 1}
        deleted[f"p{i}"] = {"r1": base - 2 + rng.normal(0, 0.5), "r2": base - 1 + rng.normal(0, 0.5)}
        longer[f"p{i}"] = {"r1": base + rng.normal(0, 0.5), "r2": base + 1 + rng.normal(0, 0.5), "r9": 99.0}
    _insert(store, "human", human)
    _insert(store, "sentence-deletion", deleted)
    _insert(store, "elongation", longer)  # r9 is not a reference of the human review: must be ignored
    rows = {r["transformation"]: r for r in validation_rows(store, "est", "rules-v1", ["gem-s"], 500, 1)}
    assert set(rows) == {"sentence-deletion", "elongation"}
    deletion = rows["sentence-deletion"]
    assert deletion["kind"] == "degradation" and deletion["verdict"] == "penalised"
    assert deletion["ci_low"] <= deletion["d"] <= deletion["ci_high"] < 0
    assert deletion["n_papers"] == 60 and deletion["paper_d"] == -0.409
    elong = rows["elongation"]
    assert elong["verdict"] == ("not rewarded" if elong["d"] >= 0 else "penalised, not significant")
    assert abs(elong["d"]) < 0.2 and elong["p"] >= 0.05
    store_report(store, "run1", "est", "rules-v1", list(rows.values()))
    assert store.scalar("SELECT count(*) FROM validation_reports") == 1


def _insert_scores(store: Store, estimator: str, values: dict[tuple[str, str], float]) -> None:
    for (candidate, paper), pmi in values.items():
        for ref in ("r1", "r2"):
            store.con.execute(
                "INSERT INTO scores VALUES ('gem-s', ?, 'rules-v4', 'v', ?, ?, ?, 'g', ?, ?, ?, 5, now())",
                [estimator, candidate, paper, ref, pmi - 1.0, -1.0, pmi])


def test_proxy_agreement_is_rank_correlation_on_common_pairs(store: Store) -> None:
    from grebench.scoring import estimator_agreement

    papers = [f"p{i}" for i in range(6)]
    quality = {"human": 3.0, "llm-a": 2.0, "llm-b": 1.0, "generic": -1.0}
    main = {(c, p): q + 0.1 * i for c, q in quality.items() for i, p in enumerate(papers)}
    assert estimator_agreement(store, "gem-s", "hf:lm", "rules-v4", "offline:proxy") is None  # no proxy scores yet
    _insert_scores(store, "hf:lm", main)
    _insert_scores(store, "offline:proxy", {k: 10 * v for k, v in main.items()})  # same order everywhere
    same = estimator_agreement(store, "gem-s", "hf:lm", "rules-v4", "offline:proxy")
    assert same is not None and same["proxy"] == "offline:proxy" and same["candidates"] == 4
    assert same["rho_candidates"] == 1.0 and same["rho_per_paper_mean"] == 1.0 and same["papers"] == 6
    store.con.execute("DELETE FROM scores WHERE estimator = 'offline:proxy'")
    _insert_scores(store, "offline:proxy", {(c, p): -v for (c, p), v in main.items()})  # the reverse order
    reverse = estimator_agreement(store, "gem-s", "hf:lm", "rules-v4", "offline:proxy")
    assert reverse is not None and reverse["rho_candidates"] == -1.0 and reverse["rho_per_paper_mean"] == -1.0
    assert estimator_agreement(store, "gem-s", "offline:proxy", "rules-v4", "offline:proxy") is None  # itself
    assert estimator_agreement(store, "gem-s", "hf:lm", "rules-v4", None) is None  # no proxy scored

"""Bootstrap over papers: coverage, paired differences, rank intervals."""

from __future__ import annotations

import numpy as np

from grebench.scoring import bootstrap_ci, paired_difference, rank_bounds, rank_intervals, rank_range


def test_bootstrap_ci_covers_the_true_mean_at_the_nominal_rate() -> None:
    rng = np.random.default_rng(1)
    true_mean = 2.0
    covered = covered90 = 0
    datasets = 200
    for i in range(datasets):
        values = rng.exponential(true_mean, size=100)  # skewed, like PMI per paper
        ci = bootstrap_ci(values, samples=1000, seed=i)
        covered += ci["ci95_low"] <= true_mean <= ci["ci95_high"]
        covered90 += ci["ci90_low"] <= true_mean <= ci["ci90_high"]
        assert ci["ci90_low"] >= ci["ci95_low"] and ci["ci90_high"] <= ci["ci95_high"]
    assert 0.90 <= covered / datasets <= 0.99
    assert 0.84 <= covered90 / datasets <= 0.96


def test_bootstrap_ci_is_seeded() -> None:
    values = np.arange(50.0)
    assert bootstrap_ci(values, samples=500, seed=3) == bootstrap_ci(values, samples=500, seed=3)
    assert bootstrap_ci(values, samples=500, seed=3) != bootstrap_ci(values, samples=500, seed=4)


def test_paired_difference_detects_a_real_difference_and_not_a_null_one() -> None:
    rng = np.random.default_rng(7)
    papers = [f"p{i}" for i in range(120)]
    base = rng.normal(0, 5, size=len(papers))  # paper difficulty, shared by both candidates
    a = {p: float(b + rng.normal(0.8, 1.0)) for p, b in zip(papers, base, strict=True)}
    b = {p: float(v + rng.normal(0.0, 1.0)) for p, v in zip(papers, base, strict=True)}
    real = paired_difference(a, b, samples=2000, seed=1)
    assert real["ci95_low"] > 0 and real["p"] < 0.01 and real["papers"] == 120
    null_rejections = 0
    for trial in range(20):
        c = {p: float(v + rng.normal(0.0, 1.0)) for p, v in zip(papers, base, strict=True)}
        d = {p: float(v + rng.normal(0.0, 1.0)) for p, v in zip(papers, base, strict=True)}
        null_rejections += paired_difference(c, d, samples=1000, seed=trial)["p"] < 0.05
    assert null_rejections <= 3


def test_paired_difference_uses_common_papers_only() -> None:
    out = paired_difference({"p1": 3.0, "p2": 5.0, "p3": 100.0}, {"p1": 1.0, "p2": 1.0}, samples=200, seed=0)
    assert out["papers"] == 2 and out["diff"] == 3.0


def test_rank_intervals_on_a_constructed_case() -> None:
    rng = np.random.default_rng(0)
    papers = [f"p{i}" for i in range(80)]
    scores = {
        "best": {p: float(rng.normal(10, 1)) for p in papers},
        "tie-a": {p: float(rng.normal(5, 3)) for p in papers},
        "tie-b": {p: float(rng.normal(5, 3)) for p in papers},
        "worst": {p: float(rng.normal(-10, 1)) for p in papers[:40]},  # scored on fewer papers
    }
    ranks = rank_intervals(scores, samples=1000, seed=0)
    assert ranks["best"] == {"rank": 1, "rank_low": 1.0, "rank_high": 1.0}
    assert ranks["worst"]["rank"] == 4 and ranks["worst"]["rank_low"] == 4.0
    for name in ("tie-a", "tie-b"):
        assert ranks[name]["rank_low"] == 2.0 and ranks[name]["rank_high"] == 3.0


def test_rank_intervals_are_seeded_and_tied_candidates_overlap() -> None:
    rng = np.random.default_rng(3)
    papers = [f"p{i}" for i in range(40)]
    shared = [float(rng.normal(0, 2)) for _ in papers]
    scores = {"ahead": {p: v + 8.0 for p, v in zip(papers, shared, strict=True)},
              "tie-a": {p: v + float(rng.normal(0, 1)) for p, v in zip(papers, shared, strict=True)},
              "tie-b": {p: v + float(rng.normal(0, 1)) for p, v in zip(papers, shared, strict=True)}}
    ranks = rank_intervals(scores, samples=500, seed=11)
    assert rank_range(ranks["ahead"]) == "1–1"
    a, b = rank_bounds(ranks["tie-a"]), rank_bounds(ranks["tie-b"])
    assert a == b == (2, 3)  # neither tied candidate is told apart from the other
    assert rank_intervals(scores, samples=500, seed=11) == ranks  # the same seed: the same intervals


def test_a_rank_interval_is_shown_in_whole_ranks_never_narrower() -> None:
    assert rank_range({"rank": 2, "rank_low": 1.4, "rank_high": 2.6}) == "1–3"
    assert rank_range({"rank": 1, "rank_low": 1.0, "rank_high": 1.0}) == "1–1"
    assert rank_range({"rank": None, "rank_low": None, "rank_high": None}) is None
    assert rank_range({"rank": 3}) is None  # a history day kept before rank intervals were

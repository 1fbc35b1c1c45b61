"""Weighted votes, Bradley–Terry and agreement against hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest

from grebench.panel import bradley_terry, judge_score, outcome, rank_with_bootstrap, weighted_vote
from grebench.panel._aggregate import agreement, answer_value, win_matrix


def test_answers_are_averaged_over_both_orders() -> None:
    # a shown first and preferred ("one"), then b shown first and a preferred again ("two")
    assert judge_score([("one", "ab"), ("two", "ba")]) == 1.0
    # position bias: "one" in both orders cancels out
    assert judge_score([("one", "ab"), ("one", "ba")]) == 0.0
    assert judge_score([("tie", "ab"), ("two", "ba")]) == 0.5
    assert answer_value("two", "ab") == -1.0


def test_weighted_vote_hand_case() -> None:
    scores = {"j1": 1.0, "j2": -1.0, "j3": 0.5, "unqualified": -1.0}
    weights = {"j1": 0.9, "j2": 0.3, "j3": 0.6}
    expected = (0.9 * 1 - 0.3 * 1 + 0.6 * 0.5) / (0.9 + 0.3 + 0.6)
    assert weighted_vote(scores, weights) == pytest.approx(expected)
    assert outcome(weighted_vote(scores, weights)) == 1
    assert weighted_vote({"x": 1.0}, {}) == 0.0
    assert outcome(0.0) == 0 and outcome(-0.2) == -1


def test_bradley_terry_satisfies_the_mle_equations() -> None:
    names = ["a", "b", "c"]
    wins = np.array([[0, 7, 9], [3, 0, 6], [1, 4, 0]], dtype=float)  # a beat b 7 of 10, etc.
    logp = bradley_terry(names, wins, prior=0.0)
    p = np.exp(logp)
    n = wins + wins.T
    for i in range(3):
        expected = sum(n[i, j] * p[i] / (p[i] + p[j]) for j in range(3) if j != i)
        assert wins[i].sum() == pytest.approx(expected, abs=1e-6)
    assert logp.mean() == pytest.approx(0.0, abs=1e-12)
    assert logp[0] > logp[1] > logp[2]


def test_bradley_terry_two_candidates_closed_form() -> None:
    logp = bradley_terry(["a", "b"], np.array([[0.0, 3.0], [1.0, 0.0]]), prior=0.0)
    # a won 3, b won 1: p_a / p_b = 3
    assert logp[0] - logp[1] == pytest.approx(np.log(3.0), abs=1e-6)


def test_prior_keeps_separated_data_finite() -> None:
    wins = np.array([[0, 5, 5], [0, 0, 5], [0, 0, 0]], dtype=float)  # a beats all, b beats c: no MLE
    logp = bradley_terry(["a", "b", "c"], wins, prior=0.01)
    assert np.all(np.isfinite(logp)) and logp[0] > logp[1] > logp[2]


def _verdicts() -> list[dict]:
    rows = []
    for i in range(6):
        rows.append({"paper_id": f"p{i}", "candidate_a": "a", "candidate_b": "b", "score": 1.0 if i < 5 else -1.0})
        rows.append({"paper_id": f"p{i}", "candidate_a": "b", "candidate_b": "c", "score": 0.5})
        rows.append({"paper_id": f"p{i}", "candidate_a": "a", "candidate_b": "c", "score": 1.0})
    return rows


def test_win_matrix_uses_fractional_wins() -> None:
    w = win_matrix(["a", "b", "c"], [{"candidate_a": "b", "candidate_b": "c", "score": 0.5}])
    assert w[1, 2] == 0.75 and w[2, 1] == 0.25


def test_rankings_with_bootstrap_intervals() -> None:
    rows = rank_with_bootstrap(_verdicts(), samples=50, seed=1)
    assert [r["candidate"] for r in rows] == ["a", "b", "c"]
    assert [r["rank"] for r in rows] == [1, 2, 3]
    for r in rows:
        assert r["ci95_low"] <= r["strength"] <= r["ci95_high"]
        assert 1 <= r["rank_low"] <= r["rank"] <= r["rank_high"] <= 3
    assert rank_with_bootstrap(_verdicts(), samples=50, seed=1) == rows  # seeded


def test_agreement_tau_and_pair_signs() -> None:
    verdicts = [{"paper_id": "p1", "candidate_a": "a", "candidate_b": "b", "score": 0.8},
                {"paper_id": "p2", "candidate_a": "a", "candidate_b": "b", "score": -0.4},
                {"paper_id": "p1", "candidate_a": "b", "candidate_b": "c", "score": 0.0}]
    gem = {("a", "p1"): 3.0, ("b", "p1"): 1.0, ("a", "p2"): 2.0, ("b", "p2"): 1.0, ("c", "p1"): 0.0}
    out = agreement(verdicts, gem, {"a": 1.0, "b": 0.0, "c": -1.0}, {"a": 2.5, "b": 1.0, "c": 0.0})
    assert out["kendall_tau"] == pytest.approx(1.0)
    assert out["n_pairs"] == 2 and out["pair_agreement"] == 0.5  # the tie is not counted
    assert out["disagreements"] == [{"paper_id": "p2", "candidate_a": "a", "candidate_b": "b", "panel_score": -0.4,
                                     "gem_diff": 1.0}]
    reversed_tau = agreement([], {}, {"a": 1.0, "b": 0.0, "c": -1.0}, {"a": 0.0, "b": 1.0, "c": 2.0})["kendall_tau"]
    assert reversed_tau == pytest.approx(-1.0)

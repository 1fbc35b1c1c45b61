"""Issue 62: the sealed-gap test, and the operator's override of a hold.

A submitted model writes some reviews before the paper's reviews are public (sealed: nothing to copy) and some after
(vouched for by its declared cutoff once approved).  Copied information exists only where the reviews were public,
whatever the copy's wording; so a model whose information relative to the honest reviewers of each paper is higher
on its public papers than on its sealed ones is held (:func:`grebench.scoring.gap_test`,
:func:`grebench.scoring.sealed_gap`).  Approval waits until the test can run (``approval_needs_sealed``), and the
operator can approve over a hold with a reason that stays in the audit (``--override``)."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from grebench.endpoints import KeyVault
from grebench.scoring import GAP_ALPHA, GAP_MIN_PAPERS, gap_test, sealed_gap
from grebench.settings import Settings, load_settings
from grebench.store import Store, open_store, utcnow
from grebench.submissions import (
    SubmissionError,
    SubmissionForm,
    SubmissionQueue,
    accept_queued_submissions,
    approve_submission,
    held_submissions,
    recheck_held,
)

RESOLVER = {"api.model.example": ["93.184.216.34"]}


def _honest(rng: random.Random, papers: int = 40) -> dict[str, list[float]]:
    return {f"p{i:02d}": [rng.lognormvariate(0, 0.4) for _ in range(4)] for i in range(papers)}


# -- the test itself -------------------------------------------------------------------------------------------------

def test_honest_submissions_are_held_at_about_alpha_or_less() -> None:
    """One honest reviewer per paper against the others, a random half of the papers sealed: 200 seeded
    submissions, held at most at the test's alpha (plus sampling noise)."""
    held = 0
    for k in range(200):
        rng = random.Random(f"gap honest/{k}")
        honest = _honest(rng)
        sealed = set(rng.sample(sorted(honest), 20))
        held += gap_test({p: v[0] for p, v in honest.items()}, {p: v[1:] for p, v in honest.items()}, sealed).held
    assert held <= 200 * GAP_ALPHA + 3, held


def test_a_model_that_copies_where_the_reviews_were_public_is_held_with_those_papers_named() -> None:
    """Its own level on sealed papers is below the honest reviewers' (a weak model); on the public papers it adds
    copied information up to about the honest reviewers' level: under every per-paper bar and under the shift
    test's factor, but twice its own sealed level."""
    rng = random.Random(7)
    honest = _honest(rng)
    sealed = set(rng.sample(sorted(honest), 20))
    mine = {p: (0.5 if p in sealed else 1.0) * v[0] * rng.uniform(0.9, 1.1) for p, v in honest.items()}
    test = gap_test(mine, {p: v[1:] for p, v in honest.items()}, sealed, "offline / rules")
    assert test.held and test.p < GAP_ALPHA and test.ratio > 1.5, test
    assert set(test.excess_papers) <= set(honest) - sealed and len(test.excess_papers) >= 10, test
    text = test.describe()
    assert "sealed-gap test (offline / rules): on its 20 papers whose reviews were public" in text
    assert "its 20 sealed papers" in text and "one-sided p" in text and "the excess on" in text
    # the same model, honest everywhere: not held
    same = {p: 0.5 * v[0] * rng.uniform(0.9, 1.1) for p, v in honest.items()}
    assert not gap_test(same, {p: v[1:] for p, v in honest.items()}, sealed).held


def test_too_few_papers_of_either_kind_is_not_testable_and_never_held() -> None:
    rng = random.Random(8)
    honest = _honest(rng, 20)
    sealed = set(sorted(honest)[:GAP_MIN_PAPERS - 1])
    mine = {p: (0.1 if p in sealed else 10.0) * v[0] for p, v in honest.items()}
    test = gap_test(mine, honest, sealed)
    assert not test.testable and not test.held and test.p < GAP_ALPHA  # significant, but too few sealed papers
    assert f"not yet testable: {GAP_MIN_PAPERS - 1} sealed and 13 public papers scored" in test.describe()


# -- in the store: approval, holds, override ----------------------------------------------------------------------

def _score(store: Store, candidate: str, paper: str, share: float, sealed: bool | None = None) -> None:
    marginal = -100.0
    gid = f"{candidate}/{paper}"
    store.con.execute(
        "INSERT INTO scores (metric, estimator, preprocessor, prompt_version, candidate, paper_id, reference_review_id,"
        " generation_id, conditional, marginal, pmi, n_tokens, created_at) VALUES ('gem-s', 'offline', 'rules', "
        "'gem-v1', ?, ?, 'r1', ?, ?, ?, ?, 10, ?)",
        [candidate, paper, gid, marginal + share * 100, marginal, share * 100, utcnow()])
    if sealed is not None:
        store.con.execute("INSERT INTO generations (generation_id, candidate, paper_id, prompt_version, params_json, "
                          "status, text, generated_at, sealed) VALUES (?, ?, ?, 'v1', '{}', 'ok', 'A review.', ?, ?)",
                          [gid, candidate, paper, utcnow(), sealed])


def _submit(store: Store, settings: Settings, names: tuple[str, ...]) -> dict[str, str]:
    queue = SubmissionQueue(None)
    ids = {}
    for name in names:
        form = SubmissionForm(model_name=name, base_url="https://api.model.example/v1", released="2019-03-01",
                              cutoff="2000-01-01", contact=f"{name.lower()}@example.org", api_key="sk-test-key")
        result = queue.submit(form, settings, KeyVault(env={}), RESOLVER)
        assert result["ok"], result
        ids[name] = result["id"]
    accept_queued_submissions(store, queue, settings, RESOLVER)
    for name, kind in (("human", "human"), ("builtin-a", "llm"), ("builtin-b", "llm")):
        store.con.execute("INSERT INTO candidates (name, kind, params_json, updated_at) VALUES (?, ?, '{}', ?)",
                          [name, kind, utcnow()])
    return ids


def _honest_scores(store: Store, rng: random.Random) -> dict[str, list[float]]:
    """24 papers scored for the three honest reviewers (human baseline, two built-in models); their shares."""
    values = {f"paper{i:02d}": [0.05 * rng.lognormvariate(0, 0.3) for _ in range(3)] for i in range(24)}
    for pid, vals in values.items():
        for name, share in zip(("human", "builtin-a", "builtin-b"), vals, strict=True):
            _score(store, name, pid, share)
    return values


def test_approval_waits_for_sealed_evidence_then_refuses_a_copier_and_passes_an_honest_model(
        store: Store, settings: Settings) -> None:
    ids = _submit(store, settings, ("Copier", "Honest"))
    rng = random.Random(11)
    sealed = {f"paper{i:02d}" for i in range(0, 24, 2)}
    values = _honest_scores(store, rng)
    # first only the public papers are scored (the sealed ones wait for their reviews): approval waits
    for pid, vals in values.items():
        if pid not in sealed:
            _score(store, "Copier", pid, 1.05 * sorted(vals)[1], sealed=False)  # about the honest reviewers' level
            _score(store, "Honest", pid, 0.6 * sorted(vals)[1], sealed=False)
    audit = store.scalar("SELECT count(*) FROM board_changes")
    for name in ("Copier", "Honest"):
        with pytest.raises(SubmissionError, match="waits for sealed evidence: 0 sealed and 12 public papers"):
            approve_submission(store, ids[name], settings=settings)
    assert store.scalar("SELECT count(*) FROM board_changes") == audit  # waiting is not a hold
    assert held_submissions(store) == {}
    # the sealed papers' reviews are out and scored: the copier is at half its public level there, the honest one not
    for pid in sorted(sealed):
        vals = values[pid]
        _score(store, "Copier", pid, 0.5 * sorted(vals)[1], sealed=True)
        _score(store, "Honest", pid, 0.6 * sorted(vals)[1] * rng.uniform(0.9, 1.1), sealed=True)
    gap = sealed_gap(store, "Copier")
    assert gap is not None and gap.held and (gap.public, gap.sealed) == (12, 12), gap
    approved = approve_submission(store, ids["Honest"], settings=settings)
    assert "sealed-gap test (offline / rules): on its 12 papers" in approved["detail"] and "OVERRIDE" not in \
        approved["detail"]
    with pytest.raises(SubmissionError, match="sealed-gap test") as refused:
        approve_submission(store, ids["Copier"], settings=settings)
    named = set(re.findall(r"paper\d\d", str(refused.value).split("the excess on")[1]))
    assert named and not named & sealed, refused.value
    assert "--override REASON" in str(refused.value)
    assert "Copier" in held_submissions(store)
    assert store.scalar("SELECT cutoff FROM candidates WHERE name = 'Copier'") is None


def test_the_operator_can_approve_over_a_hold_and_only_new_evidence_holds_again(store: Store,
                                                                                  settings: Settings) -> None:
    ids = _submit(store, settings, ("Strong",))
    rng = random.Random(12)
    values = _honest_scores(store, rng)
    for i, (pid, vals) in enumerate(values.items()):
        _score(store, "Strong", pid, (1.0 if i % 2 else 0.6) * max(vals), sealed=i % 2 == 0)
    with pytest.raises(SubmissionError, match="sealed-gap test"):
        approve_submission(store, ids["Strong"], settings=settings)
    assert "Strong" in held_submissions(store)
    approved = approve_submission(store, ids["Strong"], settings=settings,
                                  override="the public papers are the easier half; checked 12 reviews by hand")
    assert "OVERRIDE by the operator over: sealed-gap test (reason: the public papers are the easier half" in \
        approved["detail"]
    assert "its information is higher on papers whose reviews were public" in approved["detail"]  # the evidence
    assert held_submissions(store) == {} and store.scalar(
        "SELECT cutoff FROM candidates WHERE name = 'Strong'") is not None
    assert recheck_held(store) == []  # the same evidence does not hold it again after the next scoring
    # new evidence does: its information is now far beyond the honest reviewers' on every paper
    store.con.execute("UPDATE scores SET pmi = pmi * 4, conditional = marginal + pmi * 4 WHERE candidate = 'Strong'")
    held = recheck_held(store)
    assert [h["candidate"] for h in held] == ["Strong"] and held[0]["approved"], held
    assert "information shift test" in held[0]["detail"] or "explain their paper's references" in held[0]["detail"]
    assert store.scalar("SELECT cutoff FROM candidates WHERE name = 'Strong'") is None


def test_without_approval_needs_sealed_approval_goes_ahead_and_the_gap_test_holds_later(tmp_path: Path) -> None:
    settings = load_settings(env={"GREBENCH_DATA_DIR": str(tmp_path), "GREBENCH_APPROVAL_NEEDS_SEALED": "false"})
    store = open_store(None)
    try:
        ids = _submit(store, settings, ("Copier",))
        rng = random.Random(13)
        values = _honest_scores(store, rng)
        for i, (pid, vals) in enumerate(values.items()):
            if i % 2:
                _score(store, "Copier", pid, 1.05 * sorted(vals)[1], sealed=False)
        approved = approve_submission(store, ids["Copier"], settings=settings)
        assert "OVERRIDE" not in approved["detail"]
        for i, (pid, vals) in enumerate(values.items()):
            if i % 2 == 0:
                _score(store, "Copier", pid, 0.5 * sorted(vals)[1], sealed=True)
        held = recheck_held(store)
        assert [h["candidate"] for h in held] == ["Copier"] and "sealed-gap test" in held[0]["detail"]
        assert "vouched cutoff 2000-01-01 is withdrawn" in held[0]["detail"]
    finally:
        store.close()


def test_an_override_before_the_test_could_run_does_not_excuse_the_test_once_it_can(store: Store,
                                                                                    settings: Settings) -> None:
    """Approved over "no sealed-gap test yet" (its audit line also shows the shift test that passed, and the words
    "sealed-gap test"): when the sealed papers are scored and the test fails, it is held all the same."""
    ids = _submit(store, settings, ("Early",))
    rng = random.Random(14)
    values = _honest_scores(store, rng)
    for i, (pid, vals) in enumerate(values.items()):
        if i % 2:
            _score(store, "Early", pid, 1.05 * sorted(vals)[1], sealed=False)
    approved = approve_submission(store, ids["Early"], settings=settings, override="the model card is convincing")
    assert "OVERRIDE by the operator over: no sealed-gap test yet (reason: the model card" in approved["detail"]
    assert "information shift test" in approved["detail"]  # shown as passed, not overridden
    assert recheck_held(store) == []
    for i, (pid, vals) in enumerate(values.items()):
        if i % 2 == 0:
            _score(store, "Early", pid, 0.5 * sorted(vals)[1], sealed=True)
    held = recheck_held(store)
    assert [h["candidate"] for h in held] == ["Early"] and "sealed-gap test" in held[0]["detail"], held
    assert store.scalar("SELECT cutoff FROM candidates WHERE name = 'Early'") is None

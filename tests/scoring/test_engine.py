"""Scoring engine: marginal reuse, caching, leak checks, preprocessor mixing, GEM-only papers, real estimator."""

from __future__ import annotations

import json

import pytest

from grebench.scoring import (
    RULES_ID,
    ScoringError,
    compute_boards,
    is_contaminated_row,
    leaderboard,
    stored_boards,
)
from grebench.settings import Settings
from grebench.store import Store, utcnow
from tests.scoring.conftest import FakeEstimator, add_generation, seed_baseline
from tests.scoring.parts import score

REVIEWS = {
    "A": ["Strengths: The hypernetwork initialisation is novel and the Lipschitz derivation is well written. "
          "Weaknesses: The Omniglot experiments are limited.",
          "The paper lacks baselines on ImageNet-scale hypernetworks. The ablation of the gating is missing. Why was "
          "the Wasserstein loss chosen?",
          "The gating mechanism is clear. The Omniglot evaluation is weak and the hypernetwork novelty is unclear. I "
          "suggest TinyImageNet."],
    "B": ["The PAC-Bayes theory is convincing. However, the sub-Gaussian assumptions are strong and unrealistic.",
          "The martingale proofs are interesting. The PAC-Bayes bounds are loose and not compared with Rademacher "
          "bounds.",
          "What happens without the log-concavity assumption? The authors should discuss the heavy-tailed case."],
}


def _insert_paper(store: Store, pid: str, abstract: str | None, judgments: dict[int, list[str]] | None = None,
                  preprocessor: str = "gpt-4o@paper") -> None:
    now = utcnow()
    store.con.execute("INSERT INTO papers (paper_id, venue_id, title, abstract, source, content_sha256, ingested_at, "
                      "updated_at) VALUES (?, 'V', ?, ?, 'test', 'x', ?, ?)", [pid, f"Paper {pid}", abstract, now, now])
    for i, text in enumerate(REVIEWS[pid]):
        rid = f"{pid}{i}"
        store.con.execute("INSERT INTO reviews VALUES (?, ?, 'official_review', NULL, NULL, ?, 1)", [rid, pid, now])
        lines = (judgments or {}).get(i)
        store.con.execute(
            "INSERT INTO review_versions VALUES (?, 1, NULL, 'h', NULL, NULL, NULL, ?, '[]', '{}', ?, ?, ?)",
            [rid, text, None if lines is None else json.dumps(lines), None if lines is None else preprocessor, now])
    store.con.execute("INSERT INTO baseline_splits VALUES (?, ?, ?, 1, ?)",
                      [pid, f"{pid}0", json.dumps([f"{pid}1", f"{pid}2"]), now])
    add_generation(store, "human", pid, REVIEWS[pid][0], f"{pid}0", kind="human")
    add_generation(store, "generic", pid, "The paper is interesting. The experiments are limited.")
    add_generation(store, "sentence-deletion", pid, REVIEWS[pid][0].split(".")[0] + ".", f"{pid}0")


@pytest.fixture
def small_store(store: Store) -> Store:
    _insert_paper(store, "A", "We propose a novel method for learning.")
    _insert_paper(store, "B", None)  # no abstract: GEM only
    return store


def test_marginal_computed_once_per_reference_and_reused(small_store: Store, settings: Settings,
                                                         fake_estimator: FakeEstimator) -> None:
    summary = score(small_store, settings, None, ["gem", "gem-s"], "offline", "rules", estimator=fake_estimator)
    # 3 candidates × 2 refs per paper; gem on 2 papers, gem-s on 1 (B has no abstract)
    assert summary["pairs_scored"] == 3 * 2 * 2 + 3 * 2
    marginals = [r for r in fake_estimator.requests if r.first_review is None]
    keys = [(r.paper_id, r.synopsis, r.target) for r in marginals]
    assert len(keys) == len(set(keys)) == 2 * 2 + 2  # one per (paper, reference, synopsis), not per candidate
    conditionals = len(fake_estimator.requests) - len(marginals)
    assert summary["estimator_calls"] == len(fake_estimator.requests) == conditionals + len(marginals)
    assert summary["cache_hits"] == 0
    assert fake_estimator.batches == 1  # batched by papers, not one call per pair
    assert {"metric": "gem-s", "what": "papers", "reason": "paper has no abstract (GEM only)", "count": 1} \
        in summary["skipped"]
    assert small_store.scalar("SELECT count(*) FROM scores WHERE metric = 'gem-s' AND paper_id = 'B'") == 0
    rows = small_store.rows("SELECT DISTINCT marginal, reference_review_id FROM scores WHERE metric = 'gem'")
    assert len(rows) == 4  # every candidate shares the reference's marginal
    pmi = small_store.rows("SELECT pmi, conditional - marginal AS d FROM scores")
    assert all(abs(r["pmi"] - r["d"]) < 1e-12 for r in pmi)


def test_rerun_makes_no_estimator_calls(small_store: Store, settings: Settings,
                                        fake_estimator: FakeEstimator) -> None:
    score(small_store, settings, None, ["gem"], "offline", "rules", estimator=fake_estimator)
    calls = fake_estimator.calls
    again = score(small_store, settings, None, ["gem"], "offline", "rules", estimator=fake_estimator)
    assert fake_estimator.calls == calls and again["estimator_calls"] == 0 and again["pairs_scored"] == 0
    # scores deleted but cache kept: every answer comes from the cache
    small_store.con.execute("DELETE FROM scores")
    third = score(small_store, settings, None, ["gem"], "offline", "rules", estimator=fake_estimator)
    assert fake_estimator.calls == calls and third["estimator_calls"] == 0
    assert third["cache_hits"] == calls and third["pairs_scored"] == 12
    # a new candidate needs only its conditionals: the marginals are reused from the cache
    add_generation(small_store, "elongation", "A", "Overall the paper is novel. " + REVIEWS["A"][0], "A0")
    fourth = score(small_store, settings, None, ["gem"], "offline", "rules", estimator=fake_estimator)
    assert fourth["pairs_scored"] == 2 and fourth["estimator_calls"] == 2 and fourth["cache_hits"] == 2


def test_own_review_is_never_a_reference(small_store: Store, settings: Settings,
                                         fake_estimator: FakeEstimator) -> None:
    score(small_store, settings, None, ["gem"], "offline", "rules", estimator=fake_estimator)
    leaked = small_store.scalar("""SELECT count(*) FROM scores s JOIN generations g USING (generation_id)
                                   WHERE g.source_review_id = s.reference_review_id""")
    assert leaked == 0
    small_store.con.execute("UPDATE baseline_splits SET reference_review_ids_json = '[\"A0\", \"A1\"]' "
                            "WHERE paper_id = 'A'")
    with pytest.raises(ScoringError, match="reference"):
        score(small_store, settings, None, ["gem"], "offline", "rules", estimator=fake_estimator)


def test_imported_refuses_when_references_lack_lines(store: Store, settings: Settings,
                                                     fake_estimator: FakeEstimator) -> None:
    _insert_paper(store, "A", "Abstract.", judgments={0: ["The reviewer appreciates the idea."],
                                                      1: ["The reviewer criticizes the baselines."]})
    with pytest.raises(ScoringError, match="1 of 2 reference reviews have no judgment lines"):
        score(store, settings, None, ["gem"], "offline", "imported", estimator=fake_estimator)
    assert fake_estimator.calls == 0


def test_imported_refuses_mixed_imported_preprocessors(store: Store, settings: Settings,
                                                       fake_estimator: FakeEstimator) -> None:
    _insert_paper(store, "A", "Abstract.", judgments={i: ["The reviewer appreciates it."] for i in range(3)})
    _insert_paper(store, "B", "Abstract.", judgments={i: ["The reviewer questions it."] for i in range(3)},
                  preprocessor="other-llm")
    with pytest.raises(ValueError, match="several preprocessors"):
        score(store, settings, None, ["gem"], "offline", "imported", estimator=fake_estimator)


def test_imported_scores_only_candidates_with_imported_lines(store: Store, settings: Settings,
                                                             fake_estimator: FakeEstimator) -> None:
    _insert_paper(store, "A", "Abstract.", judgments={i: [f"The reviewer appreciates point {i}."] for i in range(3)})
    summary = score(store, settings, None, ["gem"], "offline", "imported", estimator=fake_estimator)
    assert summary["preprocessor"] == "imported:gpt-4o@paper"
    assert {r["candidate"] for r in store.rows("SELECT DISTINCT candidate FROM scores")} == {"human"}
    assert sum(s["count"] for s in summary["skipped"] if "candidate review missing" in s["reason"]) == 2
    # different preprocessors land in different tables, never mixed
    score(store, settings, None, ["gem"], "offline", "rules", estimator=fake_estimator)
    assert store.scalar("SELECT count(DISTINCT preprocessor) FROM scores") == 2
    rows = leaderboard(store, "gem", "fake-lm", "imported:gpt-4o@paper", samples=200)
    assert [r["candidate"] for r in rows] == ["human"] and rows[0]["pairs"] == 2


def test_gem_s_assw_is_skipped_without_an_llm(small_store: Store, settings: Settings,
                                              fake_estimator: FakeEstimator) -> None:
    summary = score(small_store, settings, "r1", ["gem-s-assw"], "offline", "rules", estimator=fake_estimator)
    assert summary["pairs_scored"] == 0 and fake_estimator.calls == 0
    assert any(s["what"] == "metric" and "assw_model" in s["reason"] for s in summary["skipped"])


def test_contaminated_llm_papers_are_left_out(small_store: Store, settings: Settings,
                                              fake_estimator: FakeEstimator) -> None:
    small_store.con.execute("UPDATE papers SET reviews_public_at = TIMESTAMP '2020-01-01' WHERE paper_id = 'A'")
    small_store.con.execute("UPDATE papers SET reviews_public_at = TIMESTAMP '2024-01-01' WHERE paper_id = 'B'")
    for pid in ("A", "B"):
        add_generation(small_store, "llm-x", pid, REVIEWS[pid][2], kind="llm", cutoff="2021-06-01")
    score(small_store, settings, None, ["gem"], "offline", "rules", estimator=fake_estimator)
    rows = {r["candidate"]: r for r in leaderboard(small_store, "gem", "fake-lm", RULES_ID, samples=200)}
    assert rows["llm-x"]["papers"] == 1 and rows["llm-x"]["clean_papers"] == 1
    assert rows["llm-x"]["contaminated_papers"] == 1 and rows["human"]["papers"] == 2
    assert rows["human"]["kind"] == "human" and rows["generic"]["kind"] == "control"
    assert rows["human"]["diff_vs_human"] is None and rows["generic"]["p_vs_human"] is not None
    assert rows["llm-x"]["rank"] is not None and not is_contaminated_row(rows["llm-x"])

    # a model trained after every paper's reviews were public: shown, scored on its contaminated papers, never ranked
    for pid in ("A", "B"):
        add_generation(small_store, "llm-late", pid, REVIEWS[pid][1], kind="llm", cutoff="2025-01-01")
    score(small_store, settings, None, ["gem"], "offline", "rules", estimator=fake_estimator)
    board = leaderboard(small_store, "gem", "fake-lm", RULES_ID, samples=200)
    late = next(r for r in board if r["candidate"] == "llm-late")
    assert is_contaminated_row(late) and late["rank"] is None and late["rank_low"] is None
    assert (late["papers"], late["clean_papers"], late["contaminated_papers"]) == (2, 0, 2)
    assert late["diff_vs_human"] is not None and late["ci95_low"] <= late["score"] <= late["ci95_high"]
    ranked = [r["candidate"] for r in board if r["rank"] is not None]
    assert "llm-late" not in ranked and sorted(r["rank"] for r in board if r["rank"] is not None) == \
        list(range(1, len(ranked) + 1))
    order = [r["candidate"] for r in board]  # ranked rows, then the contaminated band, then the controls
    assert order.index("llm-late") > max(order.index(c) for c in ranked)
    assert all(order.index("llm-late") < order.index(r["candidate"]) for r in board if r["kind"] == "control")
    compute_boards(small_store, settings)  # the stored boards (site, app, CLI) keep that order
    [stored] = [b for b in stored_boards(small_store, metric="gem", estimator="fake-lm", preprocessor=RULES_ID)
                if b["scope"] == "all"]
    assert [r["candidate"] for r in stored["rows"]] == order


@pytest.mark.slow
def test_offline_estimator_ranks_human_above_generic_and_other_paper(bundled_store: Store,
                                                                     settings: Settings) -> None:
    seed_baseline(bundled_store, max_papers=100)
    summary = score(bundled_store, settings, None, ["gem", "gem-s"], "offline", "rules")
    skipped_refs = sum(s["count"] for s in summary["skipped"] if "reference" in s["what"] + s["reason"])
    assert summary["estimator"].startswith("offline") and summary["pairs_scored"] + skipped_refs == 100 * 3 * 2 * 2
    for metric in ("gem", "gem-s"):
        rows = {r["candidate"]: r for r in leaderboard(bundled_store, metric, summary["estimator"], RULES_ID,
                                                       samples=300)}
        assert rows["human"]["score"] > rows["generic"]["score"]
        assert rows["human"]["score"] > rows["other-paper"]["score"]
        assert rows["human"]["rank"] is None and rows["generic"]["p_vs_human"] < 0.05  # the baseline: a reference line
    again = score(bundled_store, settings, None, ["gem", "gem-s"], "offline", "rules")
    assert again["estimator_calls"] == 0 and again["pairs_scored"] == 0


def test_a_stop_ends_scoring_at_a_batch_boundary_and_keeps_the_answers(small_store: Store, settings: Settings,
                                                                        fake_estimator: FakeEstimator) -> None:
    from grebench import stop

    fake_estimator.papers_per_batch = 1  # type: ignore[attr-defined]  # one paper per batch: two batches
    asked = fake_estimator.logprobs

    def logprobs_then_signal(requests: list) -> list:  # the signal arrives while the first batch is answered
        stop.request_stop()
        return asked(requests)

    fake_estimator.logprobs = logprobs_then_signal  # type: ignore[method-assign]
    try:
        with pytest.raises(stop.Interrupted):
            score(small_store, settings, None, ["gem"], "offline", "rules", estimator=fake_estimator)
    finally:
        stop.reset()
    assert fake_estimator.batches == 1  # the second batch was never sent
    first = fake_estimator.calls
    assert small_store.scalar("SELECT count(*) FROM logprob_cache") == first  # what was answered is stored
    fake_estimator.logprobs = asked  # type: ignore[method-assign]
    resumed = score(small_store, settings, None, ["gem"], "offline", "rules", estimator=fake_estimator)
    assert resumed["cache_hits"] == first and fake_estimator.calls == first + resumed["estimator_calls"]

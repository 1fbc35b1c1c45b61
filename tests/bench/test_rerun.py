"""A bench rerun rewrites only the deterministic generations whose inputs changed."""

from __future__ import annotations

from grebench.bench import CONTROLS, run_bench
from grebench.bench._baseline import choose_split
from grebench.settings import Settings
from grebench.store import Store
from tests.bench.conftest import _review, tiny_papers


def test_rerun_writes_only_what_an_edited_review_changes(tiny_store: Store, settings: Settings) -> None:
    first = run_bench(tiny_store, settings, "r1")
    assert first["generations_written"] > 0
    assert run_bench(tiny_store, settings, "r2")["generations_written"] == 0
    before = {r[0]: r[1:] for r in tiny_store.con.execute(
        "SELECT generation_id, text, generated_at FROM generations").fetchall()}
    # edit paper0's human candidate review: a new version of that review only
    paper = tiny_papers()[0]
    split = choose_split(paper.paper_id, [r.review_id for r in paper.reviews], int(settings.seed))
    index = int(split.candidate_review_id.rsplit("-r", 1)[1])
    edited = "Summary:\nAn edited review. It changed.\n\nWeaknesses:\nNone."
    paper.reviews[index] = _review(paper.paper_id, index, edited)
    with tiny_store.transaction():
        assert tiny_store.upsert_paper(paper).versions_added == 1
    again = run_bench(tiny_store, settings, "r3")
    after = {r[0]: r[1:] for r in tiny_store.con.execute(
        "SELECT generation_id, text, generated_at FROM generations").fetchall()}
    changed = {gid for gid in after if after[gid] != before.get(gid)}
    rows = {r[0]: r[1:] for r in tiny_store.con.execute(
        "SELECT generation_id, candidate, paper_id, source_review_id FROM generations").fetchall()}
    # the human row of paper0, every control derived from that review (the ones that can be built for this tiny
    # paper), and the other-paper control that shows that review; nothing else
    derived = {e.name for e in CONTROLS if e.obj.source == "human" and not e.obj.needs_llm}
    built = {r[0] for r in tiny_store.con.execute(
        "SELECT candidate FROM generations WHERE paper_id = ?", [paper.paper_id]).fetchall()}
    expected = {"human", "other-paper"} | (derived & built)
    assert {"sentence-deletion", "elongation", "repetition", "verdict-inversion"} <= expected
    assert again["generations_written"] == len(changed) == len(expected)
    assert all(rows[g][2] == split.candidate_review_id for g in changed)
    assert {rows[g][0] for g in changed} == expected
    assert any("An edited review" in after[g][0] for g in changed)


def test_baselines_and_controls_are_never_sealed_whatever_the_clock(tiny_store: Store, settings: Settings) -> None:
    """A text built from the human reviews was not written before they were public, even when the recorded
    publication time lies after the build (a venue that sets it in the future, a resumed run): its row must not
    depend on when it was built."""
    tiny_store.con.execute("UPDATE papers SET reviews_public_at = TIMESTAMP '2999-01-01'")
    run_bench(tiny_store, settings, "r1")
    kinds = dict(tiny_store.con.execute(
        "SELECT c.kind, bool_or(g.sealed) FROM generations g JOIN candidates c ON c.name = g.candidate "
        "GROUP BY 1").fetchall())
    assert kinds.get("human") is False and kinds.get("control") is False
    from grebench.bench import reseal

    assert reseal(tiny_store) == 0

"""A board row is ranked only when it covers the board's sample (issue 31 §4): how many papers a contestant may miss.

Stores are built directly (generations and scores rows), so each rule is checked in isolation; the end-to-end attack
through the queue, the CLI and the site is tests/security/test_approval_and_coverage.py.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from grebench.bench._generations import make_row, write_rows
from grebench.scoring import leaderboard, rank_word
from grebench.scoring._coverage import allowed_missing
from grebench.store import PaperRecord, ReviewRecord, Store

PUBLIC = datetime(2019, 11, 8)


def _store(store: Store, papers: int, public: datetime = PUBLIC) -> Store:
    with store.transaction():
        for n in range(papers):
            pid = f"p{n}"
            review = ReviewRecord(review_id=f"{pid}-r0", paper_id=pid, kind="official_review", text="A review.",
                                  sections=[("Review", "A review.")], content={"review": "A review."})
            store.upsert_paper(PaperRecord(paper_id=pid, venue_id="V", title=f"T{n}", source="test", abstract="A.",
                                           reviews_public_at=public, reviews=[review]))
    return store


def _candidate(store: Store, name: str, kind: str, cutoff: Any = None, params: str = "{}") -> None:
    store.con.execute("INSERT INTO candidates (name, kind, cutoff, params_json, updated_at) VALUES (?, ?, ?, ?, ?)",
                      [name, kind, cutoff, params, datetime(2020, 1, 1)])


def _reviews(store: Store, name: str, papers: list[int], status: str = "ok", pmi: float = 1.0,
             at: datetime = datetime(2019, 12, 1)) -> None:
    rows = [make_row(candidate=name, paper_id=f"p{n}", prompt_version="v", params={}, source_review_id=None,
                     status=status, text="A review." if status == "ok" else None, sections=None, parse_ok=True,
                     flags={}, error=None, attempts=1, generated_at=at, reviews_public_at=PUBLIC) for n in papers]
    write_rows(store, rows)
    for row in rows:
        if status == "ok":
            store.con.execute("INSERT INTO scores VALUES ('gem', 'offline', 'rules', 'gem-v1', ?, ?, ?, ?, ?, 0.0, "
                              "?, 5, ?)", [name, row["paper_id"], f"{row['paper_id']}-r0", row["generation_id"],
                                           pmi, pmi, datetime(2020, 1, 1)])


def _board(store: Store, share: float = 0.05) -> dict[str, dict[str, Any]]:
    return {r["candidate"]: r for r in leaderboard(store, "gem", "offline", "rules", samples=20,
                                                   max_missing_share=share)}


def test_an_operator_model_may_miss_a_small_share_a_submitted_one_none(store: Store) -> None:
    _store(store, 20)
    _candidate(store, "human", "human")
    _reviews(store, "human", list(range(20)), pmi=0.5)
    _candidate(store, "ours", "llm")  # a configured model: its failures are ours (a timeout on our machine)
    _reviews(store, "ours", list(range(19)))
    _reviews(store, "ours", [19], status="failed")
    _candidate(store, "ours2", "llm")
    _reviews(store, "ours2", list(range(18)))
    rows = _board(store)
    assert (rows["ours"]["complete"], rows["ours"]["missing_papers"], rows["ours"]["due_papers"]) == (True, 1, 20)
    assert rows["ours"]["rank"] is not None
    assert (rows["ours2"]["complete"], rows["ours2"]["rank"], rank_word(rows["ours2"])) == (False, None, "incomplete")
    assert rows["human"]["complete"] is True and rows["human"]["rank"] is None  # a reference line, never ranked
    assert _board(store, share=0.0)["ours"]["rank"] is None  # the setting at its bound: nothing may be missing

    # a submitted model: the same one missing paper unranks it, failed or finished (its failures may be chosen)
    _candidate(store, "sub", "submitted", cutoff="2000-01-01")
    store.con.execute("INSERT INTO submissions (id, submitter, contact, model_name, model_string, params_json, "
                      "dedup_key, cutoff, status, created_at, updated_at) VALUES ('s1', 'a', 'a', 'sub', 'openai/x', "
                      "'{}', 'k', '2000-01-01', 'failed', ?, ?)", [datetime(2020, 1, 1), datetime(2020, 1, 1)])
    _reviews(store, "sub", list(range(19)))
    assert (_board(store)["sub"]["complete"], _board(store)["sub"]["rank"]) == (False, None)
    store.con.execute("UPDATE submissions SET status = 'finished'")
    assert (_board(store)["sub"]["complete"], _board(store)["sub"]["rank"]) == (False, None)
    _reviews(store, "sub", [19])
    assert _board(store)["sub"]["complete"] is True and _board(store)["sub"]["rank"] is not None


def test_a_file_of_reviews_cannot_choose_among_the_papers_it_could_have_sealed(store: Store) -> None:
    """Imported reviews without a cutoff count where they were received before the reviews were public (sealed):
    every paper still hidden when the file came is due, not only those the file chose."""
    _store(store, 4)
    _candidate(store, "human", "human")
    _reviews(store, "human", list(range(4)), pmi=0.5)
    _candidate(store, "file", "imported")
    _reviews(store, "file", [0, 1], at=datetime(2019, 10, 1))  # sealed: received before 2019-11-08
    row = _board(store)["file"]
    assert row["clean_papers"] == 2 and (row["due_papers"], row["missing_papers"], row["complete"]) == (4, 2, False)
    assert row["rank"] is None


@pytest.mark.parametrize(("kind", "submission", "due", "allowed"), [
    ("llm", None, 12, 0), ("llm", None, 60, 3), ("llm", None, 100, 5), ("submitted", "finished", 60, 0),
    ("submitted", "failed", 60, 0), ("submitted", "running", 60, 0), ("imported", None, 60, 0),
    ("local", None, 60, 3)])
def test_allowed_missing(kind: str, submission: str | None, due: int, allowed: int) -> None:
    assert allowed_missing(kind, submission, due, 0.05) == allowed

"""The human baseline: per paper, one official review plays the candidate, the others are references.

The pick is ``random.Random(f"{seed}:{paper_id}").choice`` over the paper's
official review ids in sorted order, so it is stable across runs and machines
and independent of the other papers.  Papers with fewer than three official
reviews are skipped with a reason (one candidate needs at least two
references); they appear in the bench summary as ``skipped_papers``, not as
failures, because nothing went wrong.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

from grebench.store import ReviewRecord, Store, utcnow

MIN_REVIEWS = 3


@dataclass(frozen=True)
class Split:
    """One paper's human candidate review and its references."""

    paper_id: str
    candidate_review_id: str
    reference_review_ids: tuple[str, ...]


def choose_split(paper_id: str, review_ids: list[str], seed: int) -> Split:
    """The seeded pick for one paper (``review_ids`` needs at least :data:`MIN_REVIEWS`)."""
    ordered = sorted(review_ids)
    chosen = random.Random(f"{seed}:{paper_id}").choice(ordered)
    return Split(paper_id, chosen, tuple(r for r in ordered if r != chosen))


def make_splits(store: Store, seed: int) -> tuple[list[Split], list[dict[str, str]]]:
    """Compute every paper's split, store changed ones in ``baseline_splits``; return splits and skips."""
    rows = store.rows(
        "SELECT p.paper_id, list(r.review_id ORDER BY r.review_id) AS ids FROM papers p "
        f"LEFT JOIN reviews r ON r.paper_id = p.paper_id AND r.kind = '{ReviewRecord.OFFICIAL}' "
        "GROUP BY p.paper_id ORDER BY p.paper_id")
    existing = {r["paper_id"]: (r["candidate_review_id"], r["reference_review_ids_json"], r["seed"])
                for r in store.rows("SELECT * FROM baseline_splits")}
    splits: list[Split] = []
    skipped: list[dict[str, str]] = []
    with store.transaction() as con:
        for row in rows:
            ids = [i for i in (row["ids"] or []) if i is not None]
            if len(ids) < MIN_REVIEWS:
                skipped.append({"paper_id": row["paper_id"], "reason": f"only {len(ids)} official review(s); "
                                f"the human baseline needs {MIN_REVIEWS} (one candidate, two references)"})
                con.execute("DELETE FROM baseline_splits WHERE paper_id = ?", [row["paper_id"]])
                continue
            split = choose_split(row["paper_id"], ids, seed)
            splits.append(split)
            stored = (split.candidate_review_id, json.dumps(list(split.reference_review_ids)), seed)
            if existing.get(split.paper_id) != stored:
                con.execute("DELETE FROM baseline_splits WHERE paper_id = ?", [split.paper_id])
                con.execute("INSERT INTO baseline_splits VALUES (?, ?, ?, ?, ?)",
                            [split.paper_id, *stored, utcnow()])
    return splits, skipped

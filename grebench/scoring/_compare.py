"""Two contestants of one board side by side (issue 63 §4): the board's paired test over the papers both were scored
on, and the papers where they differ most.

A pure reading of the per-paper values a stored board was made of (:func:`board_paper_scores`): the site's compare
pages and the app's Compare tab show the same numbers, and the row scores they restate are the stored board's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from grebench.scoring._aggregate import ALPHA, paired_difference, paired_test
from grebench.scoring._leaderboard import per_paper_scores
from grebench.store import Store

#: How many papers a comparison lists as the ones where the two differ most.
TOP_PAPERS = 10


class PaperDifference(TypedDict):
    """One paper of a comparison: each candidate's score on it (mean PMI over references) and a - b."""

    paper_id: str
    a: float
    b: float
    diff: float


class Comparison(TypedDict):
    """:func:`compare_pair`: the mean of a - b over the papers both were scored on, its paired-bootstrap 95% CI, the
    sign-flip test's p (the board's test: :func:`grebench.scoring.paired_test`), whether it tells them apart
    (p < 0.05), the test in words, and the papers where they differ most (largest |a - b| first)."""

    a: str
    b: str
    papers: int
    diff: float
    ci95_low: float
    ci95_high: float
    p: float
    distinguishable: bool
    method: str
    a_higher: int
    b_higher: int
    top: list[PaperDifference]


def compare_pair(a: str, b: str, scores: Mapping[str, Mapping[str, float]], top: int = TOP_PAPERS,
                 samples: int = 2000, seed: int = 0) -> Comparison:
    """``a`` against ``b`` on the per-paper values ``scores`` (candidate → paper → score), as the board tests a row
    against the human baseline (:func:`grebench.scoring.paired_difference`)."""
    one, two = scores.get(a) or {}, scores.get(b) or {}
    common = sorted(set(one) & set(two))
    diff = paired_difference(one, two, samples=samples, seed=seed)
    test = paired_test([one[p] - two[p] for p in common])
    rows: list[PaperDifference] = [{"paper_id": p, "a": one[p], "b": two[p], "diff": one[p] - two[p]}
                                   for p in common]
    rows.sort(key=lambda r: (-abs(r["diff"]), r["paper_id"]))
    return {"a": a, "b": b, "papers": len(common), "diff": diff["diff"], "ci95_low": diff["ci95_low"],
            "ci95_high": diff["ci95_high"], "p": diff["p"],
            "distinguishable": bool(common) and diff["p"] < ALPHA, "method": test.method,
            "a_higher": sum(r["diff"] > 0 for r in rows), "b_higher": sum(r["diff"] < 0 for r in rows),
            "top": rows[:top]}


def board_paper_scores(store: Store, board: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """The per-paper values a stored ``all``-scope board's rows are the means of: candidate → {paper → score} on the
    board's venue, clean papers (a row shown on its contaminated papers only: those), for every row of the board."""
    data = per_paper_scores(store, str(board["metric"]), str(board["estimator"]), str(board["preprocessor"]))
    venue = {str(p) for (p,) in store.con.execute("SELECT paper_id FROM papers WHERE venue_id = ?",
                                                  [board["venue_id"]]).fetchall()}
    out: dict[str, dict[str, float]] = {}
    for row in board["rows"]:
        name = str(row["candidate"])
        clean = {p: v for p, v in (data["scores"].get(name) or {}).items() if p in venue}
        out[name] = clean or {p: v for p, v in (data["contaminated"].get(name) or {}).items() if p in venue}
    return out

"""The one text rendering of a board: ranked rows, then LLMs with no clean paper (labelled, unranked), then controls."""

from __future__ import annotations

from grebench.scoring import CONTAMINATED_NOTE
from grebench.site import board_text

#: The roles the boards stage stores with each row (annotated board rows carry them).
ROLES = {"human": "baseline", "control": "reference"}


def _row(name: str, kind: str, score: float, rank: int | None, clean: int) -> dict:
    return {"candidate": name, "kind": kind, "role": ROLES.get(kind, "contestant"),
            "score": score, "ci95_low": score - 1, "ci95_high": score + 1,
            "papers": 12, "clean_papers": clean, "rank": rank, "rank_low": rank, "rank_high": rank,
            "diff_vs_human": None if kind == "human" else score - 20, "p_vs_human": None if kind == "human" else 0.01}


def test_a_contaminated_llm_is_shown_below_the_ranking_and_labelled_never_ranked() -> None:
    board = {"metric": "gem-s", "estimator": "hf:smollm2-135m", "preprocessor": "rules-v5", "venue_id": "V",
             "papers": 12, "rows": [_row("human", "human", 20.0, None, 12),
                                    _row("elongation", "control", 25.0, None, 12),
                                    _row("smollm2-135m", "llm", 11.8, None, 0)]}
    lines = board_text(board).splitlines()
    at = {name: next(i for i, line in enumerate(lines) if i > 2 and f" {name} " in line)
          for name in ("human", "smollm2-135m", "elongation")}
    assert at["human"] < at["smollm2-135m"] < at["elongation"]  # a control never above, even with a higher score
    # one word for the row, the same the site and the app show (grebench.scoring.CONTAMINATED)
    assert lines[at["smollm2-135m"]].lstrip().startswith("contaminated ")
    assert lines[at["elongation"]].lstrip().startswith("reference ")
    # the human baseline is a reference line with its score, never a rank (issue 63)
    assert lines[at["human"]].lstrip().startswith("reference ") and " 20.00 " in lines[at["human"]]
    assert "contam." not in "\n".join(lines)
    # the footnote names the true reason for any candidate (an untrusted import has no cutoff to blame)
    note = lines.index(CONTAMINATED_NOTE)
    assert "before the candidate's review was written or received" in lines[note]
    # and the board says in words that a control sits above the human baseline
    assert lines[note + 1].startswith("note: Control `elongation` (25.00) scores above the human baseline (20.00)")
    plain = {**board, "rows": board["rows"][:2]}
    assert "contaminated" not in board_text(plain)


def test_the_board_text_says_its_sample() -> None:
    base = {"metric": "gem-s", "estimator": "e", "preprocessor": "p", "venue_id": "V", "rows": [], "seed": 7}
    sampled = {**base, "papers": 12, "papers_eligible": 300, "sample": {"description": "seeded sample"}}
    assert board_text(sampled).splitlines()[1] == ("sample: 12 of 300 papers, seeded (seed 7), stratified by rating; "
                                                   "`--papers all` scores every paper")
    assert board_text({**base, "papers": 300, "papers_eligible": 300}).splitlines()[1] == "sample: all 300 papers"

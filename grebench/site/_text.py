"""The one text rendering of a stored leaderboard (``grebench run`` and ``grebench leaderboard`` print it).

One CI convention everywhere a board is shown as a table: the 95% bootstrap CI over papers (the plots on the site
add the 90% interval as the thick bar).  Ranked rows (LLMs, submitted models, imported reviews) come first with
their 95% rank interval (``2 (1–3)``), the human baseline among them at its score as a reference line without a rank
("reference"); then contestants that did not review the board's sample ("incomplete"), and
LLMs with no clean paper (scored on contaminated papers, not ranked: "contaminated"), the words the site and the app
use too; then controls as reference rows without a rank ("reference").  Below the table, what the board can tell in
words (:func:`grebench.scoring.board_findings`): a contestant that cannot be told apart from a floor control, a control
above the human baseline.
"""

from __future__ import annotations

from typing import Any

from grebench.scoring import (
    CONTAMINATED_NOTE,
    INCOMPLETE_NOTE,
    board_findings,
    format_p,
    rank_range,
    rank_word,
    sample_facts,
)
from grebench.store import BASELINE, REFERENCE  # a control's role: shown, never ranked


def _sample_line(board: dict[str, Any]) -> str:
    facts = sample_facts(board)
    return (f"sample: {facts['text']}" + ("; `--papers all` scores every paper" if facts["sampled"] else "")
            + (f"; controls: {facts['controls']}" if facts["controls"] != "no controls" else ""))


def board_text(board: dict[str, Any], title: str | None = None) -> str:
    """A stored board (see :func:`grebench.scoring.stored_boards`, annotated by :meth:`Labels.annotate`: each row's
    ``role`` and ``tag``) as a fixed-width text table."""
    lines = [title or f"{board['metric']} — estimator {board['estimator']} — preprocessor {board['preprocessor']} "
                      f"— {board.get('venue') or board['venue_id']}",
             _sample_line(board),
             f"{'rank':>12}  {'candidate':<44} {'score':>8}  {'95% CI':>19}  {'papers':>6}  vs human (paired)"]
    # the human baseline's reference line keeps its place among the ranked rows (the stored order: at its score)
    ranked = [r for r in board["rows"] if r.get("rank") is not None or r.get("role") == BASELINE]
    unranked = [r for r in board["rows"] if r.get("rank") is None and r.get("role") not in (REFERENCE, BASELINE)]
    reference = [r for r in board["rows"] if r.get("rank") is None and r.get("role") == REFERENCE]
    baseline = any(r.get("role") == BASELINE for r in board["rows"])
    for r in ranked + unranked + reference:
        mark = f" [{r['tag']}]" if r.get("tag") else ""
        vs = ("no paper in common" if baseline and r.get("role") != BASELINE else "") \
            if r.get("diff_vs_human") is None else \
            f"{r['diff_vs_human']:+.2f} ({format_p(r['p_vs_human'], r['papers'])})"
        span = rank_range(r)
        rank = rank_word(r) or (str(r["rank"]) if span is None else f"{r['rank']} ({span})")
        if rank_word(r) == "incomplete":
            mark += f" ({r.get('missing_papers')} of {r.get('due_papers')} papers missing)"
        lines.append(f"{rank:>12}  {r['candidate'] + mark:<44} {r['score']:>8.2f}  "
                     f"[{r['ci95_low']:>7.2f}, {r['ci95_high']:>7.2f}]  {r['papers']:>6}  {vs}")
    if any(rank_word(r) == "incomplete" for r in unranked):
        lines.append(INCOMPLETE_NOTE)
    if any(rank_word(r) == "contaminated" for r in unranked):
        lines.append(CONTAMINATED_NOTE)
    lines += [f"note: {finding}" for finding in board_findings(board["rows"])]
    return "\n".join(lines)

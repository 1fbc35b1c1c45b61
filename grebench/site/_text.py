"""The one text rendering of a stored leaderboard (``grebench run`` and ``grebench leaderboard`` print it).

One CI convention everywhere a board is shown as a table: the 95% bootstrap CI over papers (the plots on the site
add the 90% interval as the thick bar).  Ranked rows (LLMs, imported reviews, the human baseline) come first with
their rank interval; controls follow as reference rows without a rank.
"""

from __future__ import annotations

from typing import Any

MARKS = {"human": " [human baseline]", "control": " [control]", "imported": " [imported]"}


def _sample_line(board: dict[str, Any]) -> str:
    sample = board.get("sample")
    eligible = board.get("papers_eligible")
    of = f" of {eligible}" if eligible else ""
    if sample:
        return (f"papers: {board['papers']}{of} ({sample.get('description') or 'a sample'}; `--papers all` "
                "scores every paper)")
    return f"papers: {board['papers']}{of}"


def board_text(board: dict[str, Any], title: str | None = None) -> str:
    """A stored board (see :func:`grebench.scoring.stored_boards`) as a fixed-width text table."""
    lines = [title or f"{board['metric']} — estimator {board['estimator']} — preprocessor {board['preprocessor']} "
                      f"— {board.get('venue') or board['venue_id']}",
             _sample_line(board),
             f"{'rank':>9}  {'candidate':<34} {'score':>8}  {'95% CI':>19}  {'papers':>6}  vs human (paired)"]
    ranked = [r for r in board["rows"] if r.get("rank") is not None]
    reference = [r for r in board["rows"] if r.get("rank") is None]
    for r in ranked + reference:
        mark = MARKS.get(r["kind"], "")
        vs = "" if r.get("diff_vs_human") is None else f"{r['diff_vs_human']:+.2f} (p={r['p_vs_human']:.3f})"
        rank = "ref" if r.get("rank") is None else f"{r['rank']} [{r['rank_low']:.0f}-{r['rank_high']:.0f}]"
        lines.append(f"{rank:>9}  {r['candidate'] + mark:<34} {r['score']:>8.2f}  "
                     f"[{r['ci95_low']:>7.2f}, {r['ci95_high']:>7.2f}]  {r['papers']:>6}  {vs}")
    return "\n".join(lines)

"""A board's history plot over its published versions (matplotlib, Agg, deterministic SVG, no external fonts) and its
alt text; the board's own figure is :mod:`grebench.site._board_plot`."""

from __future__ import annotations

import io
import math
from typing import Any

from grebench.scoring import rank_bounds, rank_range


def _finite(*values: Any) -> bool:
    return all(v is not None and math.isfinite(float(v)) for v in values)


def history_svg(rows: list[dict[str, Any]]) -> str:
    """A board's history over its published versions (rows of one board, ``day`` = a version's publish time:
    :func:`grebench.site._timeline.board_histories`), two panels sharing the time axis: each ranked candidate's
    score with its 95% CI as a band, and its rank (1 at the top) with its 95% rank interval as a band; the legend
    names each candidate with its rank and rank interval in the latest version."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    by_candidate: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        if r.get("rank") is not None and _finite(r["score"]):
            by_candidate.setdefault(str(r["candidate"]), []).append(r)
    with matplotlib.rc_context({"svg.hashsalt": "grebench", "svg.fonttype": "none", "font.family": "sans-serif",
                                "font.size": 9}):
        fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(8.0, 4.8), height_ratios=(3, 2),
                                          layout="constrained")
        worst = 1
        for name, points in sorted(by_candidate.items(), key=lambda kv: (kv[1][-1]["rank"], kv[0])):
            points = sorted(points, key=lambda p: p["day"])
            days = [p["day"] for p in points]
            last = points[-1]
            span = rank_range(last)
            label = f"#{last['rank']}" + (f" ({span})" if span else "") + f" {name}"
            colour = top.plot(days, [p["score"] for p in points], marker="o", markersize=3, label=label)[0].get_color()
            _band(top, [(p["day"], p["ci95_low"], p["ci95_high"]) for p in points], colour)
            bottom.plot(days, [p["rank"] for p in points], marker="o", markersize=3, color=colour,
                        drawstyle="steps-mid")
            bounds = [(p["day"], *b) for p in points if (b := rank_bounds(p)) is not None]
            _band(bottom, bounds, colour, step=True)
            worst = max([worst, *(p["rank"] for p in points), *(b[2] for b in bounds)])
        all_days = sorted({r["day"] for r in rows})
        span_days = (all_days[-1] - all_days[0]).days if all_days else 0
        bottom.xaxis.set_major_locator(mdates.DayLocator(interval=max(1, span_days // 10)))  # whole days, ≤ ~10 ticks
        bottom.xaxis.set_major_formatter(mdates.DateFormatter("%Y-%m-%d"))
        top.set_ylabel("score (band = 95% CI)")
        bottom.set_ylabel("rank (band = 95%\nrank interval)")
        bottom.set_ylim(worst + 0.5, 0.5)  # rank 1 at the top
        bottom.yaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
        bottom.set_xlabel("board version published (UTC; a replay's are its simulated days)")
        for ax in (top, bottom):
            ax.grid(alpha=0.3)
        if by_candidate:  # beside the panels: a board has up to a dozen ranked candidates
            top.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False,
                       title="rank (95% interval)\nin the latest version", title_fontsize=8, alignment="left")
        for label in bottom.get_xticklabels():
            label.set(rotation=30, horizontalalignment="right")
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None})
        plt.close(fig)
    return buf.getvalue()


def _band(ax: Any, points: list[tuple[Any, Any, Any]], colour: str, step: bool = False) -> None:
    """A translucent band through (x, low, high) points with finite bounds (none: nothing drawn)."""
    kept = [p for p in points if _finite(p[1], p[2])]
    if kept:
        ax.fill_between([p[0] for p in kept], [p[1] for p in kept], [p[2] for p in kept], color=colour, alpha=0.15,
                        step="mid" if step else None, linewidth=0)


def history_alt(rows: list[dict[str, Any]], title: str) -> str:
    """The history figure's alt text: how many versions, from when to when, and each ranked candidate's rank, score
    and rank interval in the first and the latest version."""
    days = sorted({r["day"] for r in rows})
    if not days:
        return f"Board history of {title}: no versions."
    first, last = days[0], days[-1]
    by_name: dict[str, dict[str, dict[str, Any]]] = {}
    for r in rows:
        if r.get("rank") is not None and _finite(r["score"]):
            by_name.setdefault(str(r["candidate"]), {})[str(r["day"])] = r
    parts = []
    for name, seen in sorted(by_name.items(), key=lambda kv: (kv[1].get(str(last), {}).get("rank") or 10**6, kv[0])):
        start, end = seen.get(str(first)), seen.get(str(last))
        now = (f"rank {end['rank']} ({rank_range(end) or end['rank']}), {float(end['score']):.2f}" if end
               else "not on the latest version")
        before = f"; first version rank {start['rank']}, {float(start['score']):.2f}" if start else ""
        parts.append(f"{name}: {now}{before}")
    return (f"Board history of {title} over {len(days)} published versions, {str(first)[:10]} to {str(last)[:10]}. "
            "Latest version: " + "; ".join(parts) + ".")

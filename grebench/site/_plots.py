"""Static SVG plots of leaderboards (matplotlib, Agg backend, deterministic output, no external fonts)."""

from __future__ import annotations

import io
import math
from typing import Any

from grebench.scoring import rank_bounds, rank_range
from grebench.site._labels import row_colour
from grebench.store import BASELINE, REFERENCE


def _finite(*values: Any) -> bool:
    return all(v is not None and math.isfinite(float(v)) for v in values)


def board_svg(board: dict[str, Any]) -> str:
    """Ranked candidates with 90% (thick) and 95% (thin) bootstrap intervals; the human baseline's 95% CI as a band;
    controls as dashed reference lines (a yardstick of the metric, never a contestant).  The board comes annotated
    (:meth:`grebench.site.Labels.annotate`): each row's ``role`` and ``colour``, the board's ``metric_label``."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    finite = [r for r in board["rows"] if _finite(r["score"])]
    rows = [r for r in finite if r.get("role") != REFERENCE]
    references = [r for r in finite if r.get("role") == REFERENCE]
    with matplotlib.rc_context({"svg.hashsalt": "grebench", "svg.fonttype": "none", "font.family": "sans-serif",
                                "font.size": 9}):
        fig, ax = plt.subplots(figsize=(7.0, 1.4 + 0.32 * max(len(rows), 1)))
        band = board.get("human_band")
        if band and _finite(band["low"], band["high"]):
            baseline = next((r for r in board["rows"] if r.get("role") == BASELINE), {"role": BASELINE})
            ax.axvspan(band["low"], band["high"], color=row_colour(baseline), alpha=0.12,
                       label="human baseline (95% CI)")
        # the scale follows the contestants: a control far outside it (reference-copy scores ~10x the human) is drawn
        # at the edge with its score written out, instead of squeezing every contestant into one corner
        xs = [float(v) for r in rows for v in (r["score"], r.get("ci95_low"), r.get("ci95_high")) if _finite(v)]
        if band and _finite(band["low"], band["high"]):
            xs += [float(band["low"]), float(band["high"])]
        low, high = (min(xs), max(xs)) if xs else (0.0, 1.0)
        margin = max(high - low, 1.0)
        edge_low, edge_high = low - margin, high + margin
        clipped = False
        for i, r in enumerate(references):
            x, name = float(r["score"]), str(r["candidate"])
            if x > edge_high or x < edge_low:
                x, name, clipped = (edge_high if x > edge_high else edge_low), f"{name} ({x:.0f}, off scale)", True
            ax.axvline(x, color=row_colour(r), linestyle="--", linewidth=0.8,
                       label="controls (reference, not ranked)" if i == 0 else None)
            ax.annotate(name, (x, 1.0), xycoords=("data", "axes fraction"), rotation=90,
                        fontsize=7, color="#555555", ha="right", va="top")
        if clipped:
            ax.set_xlim(edge_low - 0.05 * margin, edge_high + 0.05 * margin)
        for y, r in enumerate(reversed(rows)):
            colour = row_colour(r)
            if _finite(r["ci95_low"], r["ci95_high"]):
                ax.plot([r["ci95_low"], r["ci95_high"]], [y, y], color=colour, linewidth=1)
            if _finite(r["ci90_low"], r["ci90_high"]):
                ax.plot([r["ci90_low"], r["ci90_high"]], [y, y], color=colour, linewidth=3.5, alpha=0.6)
            ax.plot([r["score"]], [y], marker="o", color=colour)
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels([f"{r['rank']}. {r['candidate']}" if r.get("rank") is not None
                            else f"{r['candidate']} (contaminated, not ranked)" for r in reversed(rows)])
        ax.set_ylim(-0.6, max(len(rows), 1) - 0.4 + (1.2 if references else 0.0))
        metric = board.get("metric_label") or board["metric"]
        ax.set_xlabel(f"{metric} (PMI, nats; dot = score, thick = 90% CI, thin = 95% CI)")
        ax.grid(axis="x", alpha=0.3)
        if band or references:
            ax.legend(loc="lower right", fontsize=8, frameon=False)
        fig.tight_layout()
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None})
        plt.close(fig)
    return buf.getvalue()


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

"""A board's headline figure (matplotlib, Agg, deterministic SVG) and its alt text, which gives the ranking in words.

Two panels share the score axis.  Above, the contestants (ranked, incomplete, contaminated, and the human baseline
with its 95% CI as a band), one row each: dot = score, thick bar = 90% CI, thin bar = 95% CI.  Below, the controls
as labelled ticks: reference points of the metric, never among the contestants.  A control's label is placed in
the first lane where its box (measured with the renderer) touches no other label, and stays inside the panel; a
control far outside the contestants' scale is drawn at the edge with its score written out.  The legend and the
axis caption sit below the panels, outside the data.  Two widths are drawn: ``wide`` for a laptop (the figure
shows at its natural size at 1366 px) and ``narrow`` for a phone (390 px), whose text stays readable after the
page scales it to the screen (the page picks one with ``<picture>``).
"""

from __future__ import annotations

import io
import math
import textwrap
from collections.abc import Mapping
from typing import Any

from grebench.site._labels import row_colour
from grebench.store import BASELINE, REFERENCE

#: Figure width (inches) and font size (points) per layout; a row's and a control lane's height (inches).
LAYOUTS = {"wide": (9.5, 9.0), "narrow": (4.0, 8.0)}
ROW_IN = 0.34
LANE_IN = 0.2
NAME_CHARS = {"wide": 48, "narrow": 18}  # a longer name is cut in the figure (the table and alt text keep it)
CAPTION_CHARS = {"wide": 110, "narrow": 44}  # the axis caption wraps within the figure's width


def _finite(*values: Any) -> bool:
    return all(v is not None and math.isfinite(float(v)) for v in values)


def _short(name: str, limit: int) -> str:
    return name if len(name) <= limit else name[: limit - 1] + "…"


def _row_label(row: Mapping[str, Any], limit: int) -> str:
    name = _short(str(row["candidate"]), limit)
    if row.get("rank") is not None:
        return f"{row['rank']}. {name}"
    word = row.get("rank_word") or ("reference" if row.get("role") == BASELINE else "not ranked")
    return f"{name} ({word})"


def board_svg(board: dict[str, Any], layout: str = "wide") -> str:
    """The board's figure as SVG text in ``layout`` (``wide`` or ``narrow``).  The board comes annotated
    (:meth:`grebench.site.Labels.annotate`): each row's ``role``, ``colour`` and ``rank_word``, the board's
    ``metric_label``."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    width, font = LAYOUTS[layout]
    finite = [r for r in board["rows"] if _finite(r["score"])]
    rows = [r for r in finite if r.get("role") != REFERENCE]
    controls = sorted((r for r in finite if r.get("role") == REFERENCE), key=lambda r: float(r["score"]))
    band: Mapping[str, Any] = board.get("human_band") or {}
    has_band = bool(band) and _finite(band.get("low"), band.get("high"))
    low, high = _scale(rows, band if has_band else None)
    margin = max(high - low, 1.0)
    edge_low, edge_high = low - margin, high + margin
    off_scale = any(not edge_low <= float(r["score"]) <= edge_high for r in controls)
    with matplotlib.rc_context({"svg.hashsalt": "grebench", "svg.fonttype": "none", "font.family": "sans-serif",
                                "font.size": font}):
        lanes_guess = 1 if controls else 0
        fig, axes = _figure(plt, width, len(rows), lanes_guess)
        top, strip = axes
        if has_band:
            baseline = next((r for r in board["rows"] if r.get("role") == BASELINE), {"role": BASELINE})
            for ax in (a for a in axes if a is not None):  # the controls are read against the human band too
                ax.axvspan(band["low"], band["high"], color=row_colour(baseline), alpha=0.14, linewidth=0)
        for y, r in enumerate(rows):
            colour = row_colour(r)
            if _finite(r.get("ci95_low"), r.get("ci95_high")):
                top.plot([r["ci95_low"], r["ci95_high"]], [y, y], color=colour, linewidth=1)
            if _finite(r.get("ci90_low"), r.get("ci90_high")):
                top.plot([r["ci90_low"], r["ci90_high"]], [y, y], color=colour, linewidth=3.5, alpha=0.6)
            top.plot([r["score"]], [y], marker="o", color=colour)
        top.set_yticks(range(len(rows)))
        top.set_yticklabels([_row_label(r, NAME_CHARS[layout]) for r in rows])
        top.set_ylim(max(len(rows), 1) - 0.5, -0.5)  # the best at the top
        top.grid(axis="x", alpha=0.3)
        lo = edge_low - 0.05 * margin if off_scale else min(low - 0.08 * margin, *(float(r["score"]) for r in controls))
        hi = edge_high + 0.05 * margin if off_scale else max(high + 0.08 * margin,
                                                             *(float(r["score"]) for r in controls))
        top.set_xlim(lo, hi)
        metric = board.get("metric_label") or board["metric"]
        bottom = strip if strip is not None else top
        bottom.set_xlabel(textwrap.fill(f"{metric}: mean PMI per paper (nats), higher is better",
                                        CAPTION_CHARS[layout]))
        handles: list[Any] = [Line2D([], [], color="#555555", marker="o", linestyle="none", label="score"),
                   Line2D([], [], color="#555555", linewidth=3.5, alpha=0.6, label="90% CI"),
                   Line2D([], [], color="#555555", linewidth=1, label="95% CI")]
        if has_band:
            handles.append(Patch(color=row_colour({"role": BASELINE}), alpha=0.3, label="human baseline 95% CI"))
        if controls:
            handles.append(Line2D([], [], color=row_colour({"role": REFERENCE}), marker="|", markersize=9,
                                  linestyle="none", label="control (not ranked)"))
        fig.legend(handles=handles, loc="outside lower center", ncols=len(handles) if layout == "wide" else 2,
                   frameon=False, fontsize=font - 0.5)
        if strip is not None:
            lanes = _place_controls(fig, strip, controls, edge_low, edge_high, font)
            fig.set_figheight(_height(len(rows), lanes))
            strip.get_gridspec().set_height_ratios([max(len(rows), 1) * ROW_IN, lanes * LANE_IN + 0.12])
            strip.set_ylim(lanes - 0.5, -0.5)
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None})
        plt.close(fig)
    return buf.getvalue()


def _scale(rows: list[dict[str, Any]], band: Mapping[str, Any] | None) -> tuple[float, float]:
    """The score range of the contestants and the human band: a control far outside it does not squeeze them."""
    xs = [float(v) for r in rows for v in (r["score"], r.get("ci95_low"), r.get("ci95_high"))
          if v is not None and _finite(v)]
    if band is not None:
        xs += [float(band["low"]), float(band["high"])]
    return (min(xs), max(xs)) if xs else (0.0, 1.0)


def _height(rows: int, lanes: int) -> float:
    """Figure height (inches): the rows, the control lanes, the axis caption and the legend."""
    return 1.35 + ROW_IN * max(rows, 1) + (LANE_IN * lanes + 0.35 if lanes else 0.0)


def _figure(plt: Any, width: float, rows: int, lanes: int) -> tuple[Any, tuple[Any, Any]]:
    """The figure with the contestants' panel and, when there are controls, the control strip under it."""
    if not lanes:
        fig, top = plt.subplots(figsize=(width, _height(rows, 0)), layout="constrained")
        return fig, (top, None)
    fig, (top, strip) = plt.subplots(2, 1, sharex=True, figsize=(width, _height(rows, lanes)),
                                     height_ratios=[max(rows, 1) * ROW_IN, lanes * LANE_IN + 0.12],
                                     layout="constrained")
    strip.set_yticks([])
    strip.set_ylabel("controls", rotation=0, ha="right", va="center", fontsize="small", color="#555555")
    strip.tick_params(axis="x", direction="in")
    for side in ("left", "right", "top"):
        strip.spines[side].set_visible(False)
    top.tick_params(axis="x", labelbottom=False)
    return fig, (top, strip)


def _place_controls(fig: Any, strip: Any, controls: list[dict[str, Any]], edge_low: float, edge_high: float,
                    font: float) -> int:
    """Draw each control as a tick with its label in the first lane where the label's box touches no other; the
    number of lanes used.  Labels near an edge are aligned to stay inside the panel."""
    fig.canvas.draw()  # the layout is settled: data → pixel transforms are final for x
    renderer = fig.canvas.get_renderer()
    box = strip.get_window_extent(renderer)
    lanes: list[list[Any]] = []
    pad = font * 0.6  # pixels between two labels of a lane
    for r in controls:
        score = float(r["score"])
        x, name = score, str(r["candidate"])
        if score > edge_high or score < edge_low:
            x = edge_high if score > edge_high else edge_low
            name = f"{name} ({score:.0f}) →" if score > edge_high else f"← {name} ({score:.0f})"
        text = strip.text(x, 0, name, ha="center", va="center", fontsize=font - 1, color="#333333", zorder=3,
                          bbox={"boxstyle": "square,pad=0.15", "facecolor": "white", "edgecolor": "#bbbbbb",
                                "linewidth": 0.5})
        text.set_in_layout(False)
        extent = text.get_window_extent(renderer)
        if extent.x1 > box.x1:
            text.set_ha("right")
        elif extent.x0 < box.x0:
            text.set_ha("left")
        extent = text.get_window_extent(renderer)
        lane = next((i for i, placed in enumerate(lanes)
                     if all(extent.x0 > p.x1 + pad or extent.x1 < p.x0 - pad for p in placed)), len(lanes))
        if lane == len(lanes):
            lanes.append([])
        lanes[lane].append(extent)
        text.set_y(lane)
        # the control's tick: from the panel's top edge down to its own label (never through a lane below it)
        strip.plot([x, x], [-0.5, lane], color=row_colour(r), linewidth=1.2, alpha=0.8, zorder=1)
    return max(len(lanes), 1)


def board_alt(board: Mapping[str, Any]) -> str:
    """The figure's alt text: the ranking in words, with each score and its 95% CI, then the controls."""
    metric = board.get("metric_label") or board["metric"]
    parts = []
    for r in board["rows"]:
        if r.get("role") == REFERENCE or not _finite(r["score"]):
            continue
        word = r.get("rank_word") or ("reference" if r.get("role") == BASELINE else "not ranked")
        where = f"{r['rank']}." if r.get("rank") is not None else f"({word})"
        ci = (f" (95% CI {float(r['ci95_low']):.2f} to {float(r['ci95_high']):.2f})"
              if _finite(r.get("ci95_low"), r.get("ci95_high")) else "")
        human = " (human baseline)" if r.get("role") == BASELINE else ""
        parts.append(f"{where} {r['candidate']}{human} {float(r['score']):.2f}{ci}")
    controls = [f"{r['candidate']} {float(r['score']):.2f}" for r in board["rows"]
                if r.get("role") == REFERENCE and _finite(r["score"])]
    text = f"Ranking by {metric}, mean PMI per paper in nats, higher is better: " + ("; ".join(parts) or "no rows")
    if controls:
        text += ". Controls, not ranked: " + "; ".join(controls)
    return text + "."

"""The app's Leaderboard tab: the stored board of one filter choice as table rows, contestants and controls apart.

The app formats, never computes: a board is the scoring stage's stored one (:func:`grebench.site._data.boards`),
read through the shared reader cache.  Columns have readable names and the paired difference with the human
baseline is a number of its own (``Δ vs human``), with its p beside it, and so is the style-controlled view (that
difference at zero style difference, docs/scoring.md), with its CI; the controls come in a second table (the tab
folds it under "Show controls"), so that sorting a column can never put a control among the contestants.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal, cast

from grebench.scoring import (
    CONTAMINATED_NOTE,
    INCOMPLETE_NOTE,
    board_findings,
    format_p,
    provenance,
    rank_word,
    sample_facts,
)
from grebench.settings import Settings
from grebench.site import _data
from grebench.site._history import history_html
from grebench.site._reader import ReaderCache, Snapshot, reader_cache
from grebench.store import BASELINE, REFERENCE

#: The Leaderboard tab's columns: (header, the row field or a derived cell).
COLUMNS: tuple[tuple[str, str], ...] = (
    ("Rank", "rank"), ("Candidate", "candidate"), ("Kind", "kind"), ("Score (nats)", "score"),
    ("95% CI", "ci95"), ("Style-controlled Δ vs human", "style_score"), ("Style-controlled 95% CI", "style_ci95"),
    ("Rank interval (95%)", "rank_interval"), ("Δ vs human", "diff_vs_human"),
    ("p vs human (paired)", "p_vs_human"), ("Papers", "papers"), ("Sealed share", "sealed_share"),
    ("Cost / review (USD)", "cost_usd"), ("Latency / review (s)", "latency_s"),
)
HEADERS = [h for h, _ in COLUMNS]
#: Column widths in pixels, each at least its longest header word (a header wraps between words, never inside one:
#: issue 63 saw "Ra/nk" and "Pape/rs" at 1366 px with widths in per cent); a window narrower than their sum scrolls
#: the table sideways.
WIDTHS: list[str | int] = [60, 120, 60, 75, 95, 110, 110, 85, 70, 90, 75, 75, 75, 80]
#: Gradio's column types: numbers sort as numbers, the rest as text.
DATATYPES: list[Literal["str", "number"]] = ["str", "str", "str", "number", "str", "number", "str", "str", "number",
                                              "str", "number", "number", "number", "number"]


#: The key columns a phone shows (issue 63: at 390 px the full board squeezed 14 columns into 326 px): rank,
#: candidate, score with its 95% CI in one cell, and the difference to the human baseline; the rest is one toggle away
#: ("Show all columns").  Each is (header, the full row's fields it joins).
KEY_COLUMNS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Rank", ("rank",)), ("Candidate", ("candidate",)), ("Score [95% CI]", ("score", "ci95")),
    ("Δ vs human", ("diff_vs_human",)),
)
KEY_HEADERS = [h for h, _ in KEY_COLUMNS]
KEY_DATATYPES: list[Literal["str", "number"]] = ["str", "str", "str", "number"]
KEY_WIDTHS: list[str | int] = ["16%", "34%", "30%", "20%"]


def key_rows(rows: list[list[Any]]) -> list[list[Any]]:
    """The key columns of full board rows (:data:`KEY_COLUMNS`): joined cells read "2.950 [2.10, 3.80]"."""
    index = {field: i for i, (_, field) in enumerate(COLUMNS)}
    out = []
    for row in rows:
        cells = []
        for _, fields in KEY_COLUMNS:
            values = [row[index[f]] for f in fields]
            if len(values) == 1:
                cells.append(values[0])
            else:
                cells.append(" ".join(str(v) for v in values if v not in (None, "")))
        out.append(cells)
    return out


def reader(settings: Settings) -> ReaderCache:
    """The shared reader cache of this data dir's export (one per process and export folder)."""
    return reader_cache(settings.export_path)


def setup_value(board: Mapping[str, Any]) -> str:
    """The exact ids of a board's setup, as the setup dropdown's value."""
    return f"{board['estimator']} / {board['preprocessor']}"


def stored_boards(cache: ReaderCache, snap: Snapshot, sealed_only: bool = False) -> list[dict[str, Any]]:
    """The stored boards of one scope (computed by the scoring stage; the app formats, never computes)."""
    scope = "sealed" if sealed_only else "all"
    return cast("list[dict[str, Any]]", cache.view("boards", scope, lambda store: _data.boards(store, scope),
                                                   snap=snap))


def match(settings: Settings, venue: str | None, metric: str | None, setup: str | None,
          only_sealed: bool) -> dict[str, Any] | None:
    """The board of one filter choice, or None."""
    cache = reader(settings)
    snap = cache.snapshot()
    return next((b for b in stored_boards(cache, snap, bool(only_sealed)) if b["venue_id"] == venue
                 and b["metric"] == metric and setup_value(b) == setup), None)


def _num(value: Any, digits: int = 3) -> Any:
    if isinstance(value, float):
        return None if not math.isfinite(value) else round(value, digits)
    return value


def cell(row: Mapping[str, Any], field: str) -> Any:
    """One cell: an unranked row's rank says why (``contaminated``, ``reference``, ``incomplete``), intervals read
    as the site and the CLI write them (``[1.20, 3.40]``, ``1–3``), p as every page prints it."""
    if field == "rank":
        return str(row["rank"]) if row.get("rank") is not None else (row.get("rank_word") or rank_word(dict(row)))
    if field in ("ci95", "style_ci95"):
        low, high = row.get(f"{field}_low"), row.get(f"{field}_high")
        return "" if low is None or high is None else f"[{float(low):.2f}, {float(high):.2f}]"
    if field == "candidate" and row.get("variants_scored"):  # a submitted model: its submitter's variants
        return f"{row['candidate']} (best of {row['variants_scored']})"
    if field == "rank_interval":
        return row.get("rank_range") or ""
    if field == "p_vs_human":
        return "" if row.get("diff_vs_human") is None else format_p(row.get("p_vs_human"), row.get("papers"))
    if field in ("cost_usd",):
        return _num(row.get(field), 5)
    return _num(row.get(field))


def board_rows(settings: Settings, venue: str | None, metric: str | None, setup: str | None,
               only_sealed: bool) -> tuple[list[list[Any]], list[list[Any]]]:
    """The tab's rows for one filter choice: (contestants, controls), each in the board's order (empty when the
    choice has no scores)."""
    board = match(settings, venue, metric, setup, only_sealed)
    if board is None:
        return [], []
    contestants = [[cell(r, f) for _, f in COLUMNS] for r in board["rows"] if r["role"] != REFERENCE]
    controls = [[cell(r, f) for _, f in COLUMNS] for r in board["rows"] if r["role"] == REFERENCE]
    return contestants, controls


def board_info(settings: Settings, venue: str | None, metric: str | None, setup: str | None,
               only_sealed: bool) -> str:
    """The lines above the table: which board it is, its paper sample, a proxy's label, what the board can tell
    (:func:`grebench.scoring.board_findings`) and why a contaminated row is not ranked."""
    board = match(settings, venue, metric, setup, only_sealed)
    if board is None:
        return "No scores for this choice."
    facts = sample_facts(board)
    parts = [f"**{board.get('venue_label') or board['venue_id']} · {board.get('title') or board['metric']}**",
             f"Sample: **{facts['text']}**. Controls: {facts['controls']}; they are folded under the table."]
    if board.get("proxy"):
        parts.append("Scored by a fast proxy, not by the metric's language model: a quick stand-in, not the "
                     "headline result.")
    style = board.get("style_control")
    if style:
        parts.append(f"Style-controlled: each contestant's difference to the human baseline at zero style difference "
                     f"({', '.join(style['features'])}), one pooled least-squares fit over {style['n_rows']} "
                     "(contestant, paper) rows; the headline score is unchanged.")
    said = board_findings(board["rows"])  # what the board can tell (floor controls, controls above the baseline)
    if said:
        parts.append("**What this board can tell:**\n" + "\n".join(f"- {f}" for f in said))
    words = {r.get("rank_word") or rank_word(r) for r in board["rows"]}
    if "incomplete" in words:
        parts.append(INCOMPLETE_NOTE[0].upper() + INCOMPLETE_NOTE[1:])
    if "contaminated" in words:
        parts.append(CONTAMINATED_NOTE[0].upper() + CONTAMINATED_NOTE[1:])
    parts.append(produced_line(settings, board))
    return "\n\n".join(parts)


def produced_line(settings: Settings, board: Mapping[str, Any]) -> str:
    """One line of the board's provenance (:func:`grebench.scoring.provenance`, as leaderboard.json has it)."""
    cache = reader(settings)
    venue = str(board["venue_id"])
    prov = cache.view("provenance", venue, lambda store: provenance(store, venue))
    code, est = prov["code"], prov["estimators"].get(board["estimator"])
    facts = prov["venues"].get(venue)
    lm = f"`{board['estimator']}`" + (f" (weights {est['weights_sha8']}, {est.get('dtype') or 'dtype not named'})"
                                      if est and est.get("weights_sha8") else "")
    judges = ", ".join(f"{j['judge']} {'passed' if j['passed'] else 'failed'}"
                       for j in (facts and facts["panel"]) or []) or "no exam"
    sample = facts and facts["sample"]
    seed = sample["seed"] if sample else None
    return (f"How this was produced: grebench {code['package_version']}"
            + (f" (commit {code['git_commit'][:12]})" if code["git_commit"] else "")
            + f", scoring code {code['scoring_sha256'][:12]}; evaluation LM {lm}; preprocessor "
            f"`{board['preprocessor']}`" + (f"; sample seed {seed}" if seed is not None else "")
            + f"; judge panel: {judges}. Rebuild: `{prov['rebuild']}`.")


def board_history(settings: Settings, venue: str | None, metric: str | None, setup: str | None,
                  only_sealed: bool) -> str:
    """The board's history plot over its published versions (HTML: the site's figure, or "no history yet")."""
    board = match(settings, venue, metric, setup, only_sealed)
    if board is None:
        return ""
    bid, title = str(board["board_id"]), str(board.get("title") or board["metric"])
    return cast("str", reader(settings).view("history", bid, lambda store: history_html(store, bid, title)))


def controls_label(count: int) -> str:
    """The fold's label: how many controls it holds."""
    return f"Show controls ({count}): reference points of the metric, not ranked" if count else "No controls"


def board_view(settings: Settings, venue: str | None, metric: str | None, setup: str | None,
               only_sealed: bool) -> tuple[list[list[Any]], list[list[Any]], str]:
    """The tab for one filter choice: the contestants' rows, the controls' rows and the lines above them."""
    contestants, controls = board_rows(settings, venue, metric, setup, only_sealed)
    return contestants, controls, board_info(settings, venue, metric, setup, only_sealed)


def first_contestant(board: Mapping[str, Any] | None) -> str | None:
    """The headline board's first contestant (a model, not the human baseline, not a control): where the Model tab
    opens."""
    if board is None:
        return None
    return next((str(r["candidate"]) for r in board["rows"] if r.get("role") not in (REFERENCE, BASELINE)), None)

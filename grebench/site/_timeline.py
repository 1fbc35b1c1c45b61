"""Board history from the dated board versions: one source for ``grebench leaderboard --history``, the site's and
the app's history plots, whatever published the versions (``serve``'s site job, ``grebench run``, ``site build``,
a replay's simulated days, or a snapshot that brought them).

A version holds the boards as published (:mod:`grebench.site._versions`), each ranked row with its score and 95% CI,
rank and 95% rank interval.  A board is followed across versions by what it ranks: its venue-year, metric,
preprocessor and the estimator *spec* its id was scored from (``scored_setups``), so a refit of the same setup (the
offline estimator refitted on the reviews public by then, a model scored again) continues the line instead of
starting a new one.  Versions publish the ``all`` boards only: every series is labelled ``scope: all``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from grebench.store import Store

#: Versions a board needs before its history is drawn (one version is no history yet).
HISTORY_MIN_VERSIONS = 2
#: The row fields a history point keeps (what the plot and ``--history`` show).
POINT_FIELDS = ("candidate", "status", "kind", "rank", "rank_low", "rank_high", "score", "ci95_low", "ci95_high",
                "papers")


def _has(store: Store, table: str) -> bool:
    return bool(store.scalar("SELECT count(*) FROM duckdb_tables() WHERE table_name = ?", [table]))


def _specs(store: Store) -> dict[str, str]:
    """Estimator id -> the spec it was scored from (every recorded setup, imported ones too)."""
    if not _has(store, "scored_setups"):
        return {}
    return {r["estimator_id"]: r["estimator_spec"] for r in store.rows(
        "SELECT estimator_id, any_value(estimator_spec) AS estimator_spec FROM scored_setups GROUP BY 1")}


def series_key(board: Mapping[str, Any], specs: Mapping[str, str]) -> tuple[str, str, str, str]:
    """What a board ranks, across refits: (venue id, metric, estimator spec (else its id), preprocessor)."""
    estimator = str(board["estimator"])
    return str(board["venue_id"]), str(board["metric"]), specs.get(estimator, estimator), str(board["preprocessor"])


def version_history(store: Store, venue_id: str | None = None, metric: str | None = None) -> list[dict[str, Any]]:
    """Every board followed across the stored board versions (oldest first), optionally of one venue-year and
    metric: ``{venue_id, venue, metric, estimator (the latest fit's id), estimator_spec, preprocessor, scope,
    points: [{version_id, published_at, origin, rows: [...]}]}``.  Empty for a store without versions."""
    if not _has(store, "board_versions"):
        return []
    origin = "origin" if "origin" in store.columns("board_versions") else "'site' AS origin"
    specs = _specs(store)
    series: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    for v in store.rows(f"SELECT version_id, published_at, {origin}, leaderboard_json FROM board_versions "
                        "ORDER BY published_at, version_id"):
        for b in json.loads(v["leaderboard_json"]).get("boards", []):
            if venue_id not in (None, b["venue_id"]) or metric not in (None, b["metric"]):
                continue
            key = series_key(b, specs)
            line = series.setdefault(key, {"venue_id": b["venue_id"], "venue": b.get("venue"), "metric": b["metric"],
                                           "estimator_spec": key[2], "preprocessor": b["preprocessor"],
                                           "scope": "all", "points": []})
            line["estimator"] = b["estimator"]
            line["points"].append({"version_id": v["version_id"], "published_at": v["published_at"],
                                   "origin": v["origin"],
                                   "rows": [{f: r.get(f) for f in POINT_FIELDS} for r in b.get("rows", [])]})
    return list(series.values())


def board_histories(store: Store, board_id: str | None = None) -> dict[str, list[dict[str, Any]]]:
    """Each stored ``all`` board's history rows (one per candidate per version, ``day`` = the version's publish
    time), for the boards published in at least :data:`HISTORY_MIN_VERSIONS` versions (of one board if
    ``board_id`` is given): what the site's and the app's history plot draw
    (:func:`grebench.site._plots.history_svg`)."""
    if not _has(store, "boards"):
        return {}
    specs = _specs(store)
    current = {series_key(b, specs): b["board_id"] for b in store.rows(
        "SELECT board_id, venue_id, metric, estimator, preprocessor FROM boards WHERE scope = 'all' ORDER BY 1")
        if board_id in (None, b["board_id"])}
    out: dict[str, list[dict[str, Any]]] = {}
    for line in version_history(store):
        bid = current.get(series_key(line, specs))
        if bid is None or len(line["points"]) < HISTORY_MIN_VERSIONS:
            continue
        out[bid] = [{**r, "day": p["published_at"], "board_id": bid} for p in line["points"] for r in p["rows"]]
    return out

"""What "the same store" means after crashes: row counts and content hashes of every table but run bookkeeping.

Compared: every table of the store except :data:`BOOKKEEPING_TABLES`, every column except
:data:`WALL_CLOCK_COLUMNS` and :data:`RUN_COLUMNS`. Why those are left out:

* ``runs``, ``run_failures``: one row per command run (a killed run leaves an ``interrupted`` row), so a run
  interrupted N times has N more of them by design; ``jobs`` (scheduler state, its counters count runs),
  ``stage_state`` (skip fingerprints whose summaries carry timings), ``migrations`` (applied-at times; the
  migration *set* is checked separately by :func:`migration_ids`), ``snapshots`` (none in these runs),
  ``board_versions`` (one row per publish whose boards changed: a history of publishes, stamped with their time).
* columns holding the wall clock at write time (``*_at`` columns that say when a row was written, not a date of the
  data): they differ between any two runs, crashed or not. Data dates (``submitted_at``, ``reviews_public_at``,
  ``visible_at``, ``modified_at``) are compared.
* ``latency_s``: measured wall time of an LLM call.
* ``run_id`` / ``last_run_id``: which run wrote the row.
* ``validation_reports`` is a per-run log (key ``run_id``): it is compared as the *set* of distinct reports.
* nothing else: ``generations.flags_json`` is compared whole (it once carried ``cached_call``, whether *this* run
  found the call in ``llm_calls``, which made a resumed run's rows differ; the product no longer writes it).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import duckdb

BOOKKEEPING_TABLES = frozenset({"runs", "run_failures", "jobs", "stage_state", "migrations", "snapshots",
                                "board_versions"})
WALL_CLOCK_COLUMNS = frozenset({
    "ingested_at", "updated_at", "first_seen_at", "fetched_at", "extracted_at", "created_at", "generated_at",
    "failed_at", "started_at", "finished_at", "changed_at", "last_started_at", "last_finished_at", "applied_at",
    "computed_at", "checked_at", "scored_at", "linked_at",
})
RUN_COLUMNS = frozenset({"latency_s", "run_id", "last_run_id"})
SET_TABLES = frozenset({"validation_reports"})


def _normalise(table: str, column: str, value: Any) -> Any:
    return value


def compared_columns(con: duckdb.DuckDBPyConnection) -> dict[str, list[str]]:
    """Table -> the columns compared (see the module docstring)."""
    out: dict[str, list[str]] = {}
    for table, column in con.execute(
            "SELECT table_name, column_name FROM duckdb_columns() WHERE schema_name = 'main' "
            "AND NOT internal ORDER BY table_name, column_index").fetchall():
        if table in BOOKKEEPING_TABLES or column in WALL_CLOCK_COLUMNS or column in RUN_COLUMNS:
            continue
        out.setdefault(table, []).append(column)
    views = {r[0] for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
    return {t: cols for t, cols in out.items() if t not in views}


def store_content(db: Path) -> dict[str, dict[str, Any]]:
    """Per compared table: row count and the SHA-256 of its sorted rows (the file is opened read-only)."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        result: dict[str, dict[str, Any]] = {}
        for table, cols in compared_columns(con).items():
            quoted = ", ".join(f'"{c}"' for c in cols)
            distinct = "DISTINCT " if table in SET_TABLES else ""
            rows = con.execute(f'SELECT {distinct}{quoted} FROM "{table}"').fetchall()
            lines = sorted(json.dumps([_normalise(table, c, v) for c, v in zip(cols, row, strict=True)], default=str)
                           for row in rows)
            result[table] = {"rows": len(rows), "sha256": hashlib.sha256("\n".join(lines).encode()).hexdigest()}
        return result
    finally:
        con.close()


def content_diff(got: dict[str, dict[str, Any]], want: dict[str, dict[str, Any]]) -> list[str]:
    """Human-readable differences between two :func:`store_content` results (empty when equal)."""
    out = []
    for table in sorted(set(got) | set(want)):
        if got.get(table) != want.get(table):
            out.append(f"{table}: got {got.get(table)} want {want.get(table)}")
    return out


def migration_ids(db: Path) -> list[Any]:
    """The applied migrations, in order."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        cols = [r[0] for r in con.execute("SELECT column_name FROM duckdb_columns() WHERE table_name = "
                                          "'migrations' ORDER BY column_index").fetchall()]
        return [r[0] for r in con.execute(f'SELECT "{cols[0]}" FROM migrations ORDER BY 1').fetchall()]
    finally:
        con.close()

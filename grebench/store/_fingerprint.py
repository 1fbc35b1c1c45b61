"""One way to say "nothing this stage reads has changed": a fingerprint of tables, queries, values and code.

A stage that may skip its work when its inputs are unchanged computes :func:`fingerprint` over what it reads and
compares it with the one stored in ``stage_state`` by its last complete run (the pipeline runner does this for
every stage that declares inputs).  Columns that only record *when* a row was written are left out of table
digests, so rewriting equal content is no change.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grebench.store._store import ident

if TYPE_CHECKING:
    from grebench.store._store import Store

#: Columns that record when a row was written, not what it says.
BOOKKEEPING_COLUMNS = frozenset({"created_at", "updated_at", "ingested_at", "fetched_at", "first_seen_at",
                                 "extracted_at", "computed_at"})


def table_digests(store: Store, tables: Iterable[str],
                  exclude: frozenset[str] = BOOKKEEPING_COLUMNS) -> dict[str, list[Any]]:
    """(row count, xor of row hashes) of each table that exists, over its columns but the bookkeeping ones."""
    wanted = set(tables)
    columns: dict[str, list[str]] = {}
    for table, column in store.con.execute(
            "SELECT table_name, column_name FROM duckdb_columns() WHERE schema_name = 'main' "
            "AND database_name = current_database() ORDER BY table_name, column_index").fetchall():
        if table in wanted and column not in exclude:
            columns.setdefault(table, []).append(column)
    out: dict[str, list[Any]] = {}
    for table in sorted(columns):
        cols = ", ".join(ident(c) for c in columns[table])
        out[table] = list(store.con.execute(f"SELECT count(*), bit_xor(hash({cols})) FROM {ident(table)}").fetchone()
                          or ())
    return out


def fingerprint(store: Store, *, tables: Iterable[str] = (),
                queries: Mapping[str, tuple[str, Sequence[Any]]] | None = None, values: Any = None,
                code: Iterable[Path] = ()) -> str:
    """SHA-256 over table digests, the one-row results of ``queries``, JSON ``values`` and the bytes of ``code``."""
    parts: dict[str, Any] = {"tables": table_digests(store, tables), "values": values, "queries": {}}
    for name, (sql, params) in (queries or {}).items():
        parts["queries"][name] = list(store.con.execute(sql, list(params)).fetchone() or ())
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode("utf-8"))
    for path in sorted(set(code)):
        if path.is_file():
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def code_files(*roots: Path, suffixes: tuple[str, ...] = (".py", ".txt", ".html", ".css", ".js")) -> list[Path]:
    """Source files under ``roots`` (a file root is itself): the code a stage's results depend on."""
    out: list[Path] = []
    for root in roots:
        out += [root] if root.is_file() else [p for p in sorted(root.rglob("*")) if p.is_file()
                                               and p.suffix in suffixes]
    return out

"""Numbered schema migrations, recorded in the ``migrations`` table.

Each migration is a module ``migrations/mNNNN_name.py`` with a ``SQL`` string
(or an ``up(con)`` function).  They run in number order, each in its own
transaction, and are recorded so that each runs exactly once.  Before any
pending migration is applied to an existing file, the file is copied to
``<db>.bak-<version>`` so a failed upgrade loses nothing.
"""

from __future__ import annotations

import importlib
import pkgutil
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Callable

import duckdb

from grebench.store import migrations as _migrations_pkg


@dataclass(frozen=True)
class Migration:
    """One schema step: its number, name and how to apply it."""

    number: int
    name: str
    apply: Callable[[duckdb.DuckDBPyConnection], None]


def _from_module(module: ModuleType, number: int, name: str) -> Migration:
    if hasattr(module, "up"):
        return Migration(number, name, module.up)
    sql: str = module.SQL

    def apply(con: duckdb.DuckDBPyConnection) -> None:
        for statement in sql.split(";"):
            if statement.strip():
                con.execute(statement)

    return Migration(number, name, apply)


def all_migrations() -> list[Migration]:
    """Every migration shipped with the package, in order."""
    found = []
    for info in pkgutil.iter_modules(_migrations_pkg.__path__):
        if not info.name.startswith("m") or not info.name[1:5].isdigit():
            continue
        module = importlib.import_module(f"{_migrations_pkg.__name__}.{info.name}")
        found.append(_from_module(module, int(info.name[1:5]), info.name[6:]))
    found.sort(key=lambda m: m.number)
    numbers = [m.number for m in found]
    if len(set(numbers)) != len(numbers):
        raise RuntimeError(f"duplicate migration numbers: {numbers}")
    return found


def applied_versions(con: duckdb.DuckDBPyConnection) -> set[int]:
    """Numbers of the migrations already recorded in this database."""
    con.execute(
        "CREATE TABLE IF NOT EXISTS migrations (number INTEGER PRIMARY KEY, name VARCHAR, applied_at TIMESTAMP)"
    )
    return {row[0] for row in con.execute("SELECT number FROM migrations").fetchall()}


def migrate(con: duckdb.DuckDBPyConnection, db_file: Path | None = None) -> list[int]:
    """Apply pending migrations; return the numbers applied."""
    done = applied_versions(con)
    pending = [m for m in all_migrations() if m.number not in done]
    if not pending:
        return []
    if db_file is not None and done and db_file.exists():
        con.execute("CHECKPOINT")
        shutil.copy2(db_file, db_file.with_name(f"{db_file.name}.bak-{max(done):04d}"))
    for migration in pending:
        con.execute("BEGIN TRANSACTION")
        try:
            migration.apply(con)
            con.execute(
                "INSERT INTO migrations VALUES (?, ?, ?)",
                [migration.number, migration.name, datetime.now(UTC).replace(tzinfo=None)],
            )
            con.execute("COMMIT")
        except Exception:
            con.execute("ROLLBACK")
            raise
    return [m.number for m in pending]

"""Is the store whole?  DuckDB's block checksums, row counts against the last board version, the snapshots' hashes.

Why every table is read whole: DuckDB checks a block's checksum only when it reads the block, and ``count(*)``
answers from the row groups' metadata without reading a data block, so a reader that only counts rows (``stats``)
or reads only the board tables (``leaderboard``) never meets a damaged block elsewhere (issue 64: bytes written mid-
file went unnoticed by both, while ``validate`` and ``score``, which read scores and texts, failed).  Hashing each
row (``hash(t)`` over the whole row) makes DuckDB read every column's blocks, overflow strings included.

A store found damaged is noted beside it (``<db file>.damaged``, with the file's identity: size, modification
time, inode): every command then refuses it at once with the remedy, until the file is replaced (a restored
backup is another file, so the note no longer applies) or a check passes.  A verified store is noted too
(``<db file>.verified``): readers verify a file once after it changed, not on every command.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TypedDict, cast

import duckdb

from grebench import stop


def utcnow() -> datetime:
    """The wall clock (naive UTC): a check and a backup happen now, whatever clock a replay installed."""
    return datetime.now(UTC).replace(tzinfo=None)


#: Words of DuckDB's errors for a file that is not what it wrote (a checksum, a short read, a bad header).
_DAMAGE_WORDS = ("corrupt database file", "does not match stored checksum", "could not read enough bytes",
                 "not a valid duckdb database", "the file is not a valid", "invalid block", "checksum")


class StoreDamaged(RuntimeError):
    """The store's file is damaged (``reason``: what DuckDB or the check found); the CLI adds the remedy."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"the store {path} is damaged: {reason}")
        self.path = path
        self.reason = reason


def is_damage(exc: BaseException) -> bool:
    """Whether a DuckDB error says the file is damaged (not a lock, a full disk or a bad query)."""
    text = str(exc).lower()
    return isinstance(exc, duckdb.Error) and any(word in text for word in _DAMAGE_WORDS)


def damage_reason(exc: BaseException) -> str:
    """DuckDB's first line, shortened."""
    return (str(exc).splitlines() or [type(exc).__name__])[0][:300]


# -- what was found, noted beside the file ----------------------------------------------------------------------
def _identity(db_file: Path) -> list[int] | None:
    try:
        st = db_file.stat()
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ino]


def _note(db_file: Path, suffix: str) -> Path:
    return db_file.with_name(db_file.name + suffix)


class _Note(TypedDict, total=False):
    """A note beside the store: the file's identity when written, and why (damaged) or when (verified)."""

    file: list[int] | None
    reason: str
    found_at: str
    checked_at: str


def _write_note(path: Path, payload: _Note) -> None:
    try:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(payload, default=str), encoding="utf-8")
        tmp.replace(path)
    except OSError:  # a read-only data dir: the damage is still said, only not remembered
        pass


def _read_note(path: Path) -> _Note | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return cast(_Note, data) if isinstance(data, dict) else None


def note_damage(db_file: Path, reason: str) -> None:
    """Remember that this file is damaged (until it is replaced or a check passes)."""
    _write_note(_note(db_file, ".damaged"), {"reason": reason, "found_at": utcnow().isoformat(),
                                              "file": _identity(db_file)})
    _note(db_file, ".verified").unlink(missing_ok=True)


def noted_damage(db_file: Path) -> str | None:
    """Why this very file was found damaged, or None (no note, or the note is of a file since replaced)."""
    data = _read_note(_note(db_file, ".damaged"))
    if data is None or data.get("file") != _identity(db_file):
        return None
    return str(data.get("reason") or "damaged")


def note_verified(db_file: Path) -> None:
    """Remember that this file, as it is now, passed the check (the damage note goes)."""
    _write_note(_note(db_file, ".verified"), {"checked_at": utcnow().isoformat(), "file": _identity(db_file)})
    _note(db_file, ".damaged").unlink(missing_ok=True)


def verified(db_file: Path) -> bool:
    """Whether this file passed the check and has not changed since."""
    data = _read_note(_note(db_file, ".verified"))
    return data is not None and data.get("file") == _identity(db_file)


# -- the checks -------------------------------------------------------------------------------------------------
def table_names(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The tables of the open database (not views), by name."""
    return [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() WHERE database_name = "
                                      "current_database() ORDER BY table_name").fetchall()]


def read_every_block(con: duckdb.DuckDBPyConnection) -> tuple[dict[str, int], list[str]]:
    """Read every table whole (DuckDB verifies each block's checksum as it reads it): rows per table, and the
    damage found (``table: DuckDB's error``); a damaged table is counted as None-less (left out)."""
    counts: dict[str, int] = {}
    problems: list[str] = []
    for table in table_names(con):
        stop.check()  # a table is the check's request boundary
        quoted = '"' + table.replace('"', '""') + '"'
        try:
            row = con.execute(f"SELECT count(*), bit_xor(hash(t)) FROM {quoted} AS t").fetchone()
        except duckdb.Error as exc:
            problems.append(f"table {table}: {damage_reason(exc)}")
            continue
        counts[table] = int(row[0]) if row else 0
    return counts, problems


def rows_against_last_version(con: duckdb.DuckDBPyConnection, counts: dict[str, int]) -> list[str]:
    """The last published board version's papers and reviews (its ``basis``) are all in the store: a store that
    lost rows (a table cut short, an older file put back) no longer holds what its published boards stand on."""
    if "board_versions" not in counts or not counts["board_versions"]:
        return []
    try:
        row = con.execute("SELECT version_id, basis_json FROM board_versions ORDER BY published_at DESC, "
                          "version_id DESC LIMIT 1").fetchone()
    except duckdb.Error as exc:
        return [f"board_versions: {damage_reason(exc)}"]
    if row is None or not row[1]:
        return []
    vid, basis = row[0], json.loads(row[1])
    problems = []
    papers = sorted({p for ps in (basis.get("papers") or {}).values() for p in ps})
    reviews = sorted(basis.get("references") or {})
    for table, key, wanted in (("papers", "paper_id", papers), ("reviews", "review_id", reviews)):
        if not wanted or table not in counts:
            continue
        found = con.execute(f"SELECT count(DISTINCT {key}) FROM {table} WHERE {key} IN (SELECT unnest(?::VARCHAR[]))",
                            [wanted]).fetchone()
        have = int(found[0]) if found else 0
        if have < len(wanted):
            problems.append(f"{table}: {have} of the {len(wanted)} rows the last board version ({vid}) stands on "
                            f"(the store has {counts[table]} rows in all)")
    return problems


def snapshot_problems(con: duckdb.DuckDBPyConnection, counts: dict[str, int]) -> tuple[int, list[str]]:
    """Every snapshot the store recorded, checked against its manifest and the manifest's recorded SHA-256: how
    many were checked, and what is wrong."""
    from grebench.store._snapshot import verify_snapshot

    if "snapshots" not in counts:
        return 0, []
    problems = []
    rows = con.execute("SELECT path, manifest_sha256 FROM snapshots ORDER BY path").fetchall()
    for path, digest in rows:
        if not Path(path).is_dir():
            problems.append(f"snapshot {path}: missing")
            continue
        report = verify_snapshot(Path(path), digest)
        problems += [f"snapshot {path}: {p}" for p in report["problems"]]
    return len(rows), problems


def ensure_whole(con: duckdb.DuckDBPyConnection, db_file: Path) -> None:
    """Raise :class:`StoreDamaged` unless every block of the open file reads back with its checksum; once per
    version of the file (a reader pays it once after a writer changed the file, not on every command)."""
    if verified(db_file):
        return
    _counts, damage = read_every_block(con)
    if damage:
        note_damage(db_file, "; ".join(damage)[:500])
        raise StoreDamaged(db_file, "; ".join(damage))
    note_verified(db_file)


class CheckJson(TypedDict):
    """:meth:`CheckReport.as_json`."""

    path: str
    ok: bool
    damaged: bool
    tables: dict[str, int]
    snapshots: int
    problems: list[str]
    checked_at: str


@dataclass
class CheckReport:
    """What :func:`check_file` found: ``ok`` when nothing; ``damaged`` when the file itself is (checksums, a short
    file); ``problems`` in words."""

    path: str
    ok: bool = True
    damaged: bool = False
    tables: dict[str, int] = field(default_factory=dict)
    snapshots: int = 0
    problems: list[str] = field(default_factory=list)
    checked_at: datetime = field(default_factory=utcnow)

    def as_json(self) -> CheckJson:
        """The report as JSON-ready values."""
        return {"path": self.path, "ok": self.ok, "damaged": self.damaged, "tables": self.tables,
                "snapshots": self.snapshots, "problems": self.problems, "checked_at": self.checked_at.isoformat()}


def check_connection(con: duckdb.DuckDBPyConnection, path: Path | str) -> CheckReport:
    """The three checks on an open database (:func:`read_every_block`, :func:`rows_against_last_version`,
    :func:`snapshot_problems`)."""
    report = CheckReport(str(path))
    report.tables, damage = read_every_block(con)
    report.problems += damage
    report.damaged = bool(damage)
    if not damage:  # the other checks read tables that may be the damaged ones
        report.problems += rows_against_last_version(con, report.tables)
        report.snapshots, problems = snapshot_problems(con, report.tables)
        report.problems += problems
    report.ok = not report.problems
    return report


def check_file(db_file: Path) -> CheckReport:
    """Open the file read-only and check it; the result is noted beside it (damaged, or verified)."""
    try:
        con = duckdb.connect(str(db_file), read_only=True)
    except duckdb.Error as exc:
        if not is_damage(exc):
            raise
        report = CheckReport(str(db_file), ok=False, damaged=True, problems=[f"cannot open: {damage_reason(exc)}"])
    else:
        try:
            report = check_connection(con, db_file)
        finally:
            con.close()
    if report.damaged:
        note_damage(db_file, "; ".join(report.problems)[:500])
    elif report.ok:
        note_verified(db_file)
    return report


# -- backups ----------------------------------------------------------------------------------------------------
BACKUP_GLOB = "grebench-*.duckdb"


def backups(folder: Path) -> list[Path]:
    """The backups in ``folder``, oldest first (their names sort by time)."""
    return sorted(folder.glob(BACKUP_GLOB)) if folder.is_dir() else []


def backup_store(con: duckdb.DuckDBPyConnection, db_file: Path, folder: Path, keep: int) -> Path:
    """A copy of the store in ``folder`` (``grebench-YYYYMMDDTHHMMSSZ.duckdb``), made by the writer's own connection
    (``COPY FROM DATABASE`` into an attached file: every committed row, read through DuckDB, so a damaged block
    fails the copy) while no job writes (the caller holds the one worker), read whole again before it counts, and
    the oldest beyond ``keep`` removed.

    Never a copy of the file by the writer process: opening and closing the store's file in the process that holds
    it drops DuckDB's lock on it (POSIX record locks belong to the process and go with any of its descriptors), and
    a second writer could then open the store."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"grebench-{utcnow().strftime('%Y%m%dT%H%M%S')}Z.duckdb"
    tmp = folder / f".{target.name}.tmp"
    tmp.unlink(missing_ok=True)
    name = con.execute("SELECT current_database()").fetchone()
    quoted = str(tmp).replace("'", "''")
    con.execute(f"ATTACH '{quoted}' AS grebench_backup")
    try:
        try:
            con.execute(f'COPY FROM DATABASE "{name[0] if name else "main"}" TO grebench_backup')
        except duckdb.Error as exc:
            if is_damage(exc):
                raise StoreDamaged(db_file, damage_reason(exc)) from None
            raise
        finally:
            con.execute("DETACH grebench_backup")
        copy = duckdb.connect(str(tmp), read_only=True)
        try:
            _counts, damage = read_every_block(copy)
        finally:
            copy.close()
    except BaseException:  # a stop, a full disk: no half backup is left
        tmp.unlink(missing_ok=True)
        raise
    if damage:
        tmp.unlink(missing_ok=True)
        raise StoreDamaged(db_file, "; ".join(damage))
    os.replace(tmp, target)
    for old in backups(folder)[:-keep] if keep > 0 else []:
        old.unlink(missing_ok=True)
    return target

"""The store object: a DuckDB connection plus the queries every stage shares."""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import secrets
import shutil
import uuid
from collections.abc import Callable, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence, TypedDict, cast

import duckdb

from grebench import stop
from grebench.store._failures import naming_path, removed_on_failure
from grebench.store._integrity import StoreDamaged, damage_reason, is_damage, note_damage, noted_damage
from grebench.store._migrate import migrate
from grebench.store._records import PaperRecord, PdfExtraction, utcnow

log = logging.getLogger(__name__)

_ARROW_TYPES = {"VARCHAR": "string", "DOUBLE": "float64", "FLOAT": "float32", "INTEGER": "int32", "BIGINT": "int64",
                "BOOLEAN": "bool_", "TIMESTAMP": "timestamp", "DATE": "date32"}


def _arrow_type(name: str | None) -> Any:
    import pyarrow as pa

    if name is None:
        return None
    return pa.timestamp("us") if name == "timestamp" else getattr(pa, name)()


#: Columns that carry personal data (submitters' contact addresses): kept in the private store, never exported or
#: put in a snapshot as they are; exports and snapshots carry a salted SHA-256 (16 hex digits) instead, so the same
#: submitter is recognisable across rows of one data dir without the address being published.
PRIVATE_COLUMNS: dict[str, tuple[str, ...]] = {"candidates": ("submitter",), "submissions": ("submitter", "contact")}
#: Columns that hold a submitted endpoint (its URL, its sealed key): never exported or put in a snapshot (NULL there);
#: the public submissions log identifies an endpoint by a fingerprint instead (issue 63).  Column -> the SQL kept.
REDACTED_COLUMNS: dict[str, dict[str, str]] = {
    "submissions": {"base_url": "NULL", "normalised_url": "NULL", "key_ciphertext": "NULL"},
    "candidates": {"api_base": "CASE WHEN kind = 'submitted' THEN NULL ELSE api_base END"},
}
#: Any column whose name says it holds a contact is private too, in every table (a table added later included).
_PRIVATE_NAME = re.compile(r"(^|_)(submitter|contact|e?mail|email_address)(_|$)")
_IDENT = re.compile(r"^[a-z_][a-z0-9_]*$")


def private_columns(table: str, columns: Sequence[str]) -> list[str]:
    """The columns of ``table`` (its ``columns``, from the catalogue) that carry personal data."""
    listed = PRIVATE_COLUMNS.get(table, ())
    return [c for c in columns if c in listed or _PRIVATE_NAME.search(c)]


def ident(name: str) -> str:
    """A quoted SQL identifier from the store's own schema: only ``[a-z_][a-z0-9_]*`` is accepted (a name read from
    a file, a path or any other data is refused, never quoted into SQL)."""
    if not _IDENT.match(name):
        raise ValueError(f"not a store identifier: {name[:60]!r}")
    return f'"{name}"'


def public_select(store: Store, table: str, sql: str | None = None) -> tuple[str, dict[str, str]]:
    """``SELECT`` of a table (or of ``sql``, a query over it) fit to publish: private columns hashed with the data
    dir's salt, bound as a parameter.  Returns ``(sql, params)``."""
    base = sql if sql is not None else f"SELECT * FROM {ident(table)}"
    columns = store.columns(table)
    redacted = [f"CAST({expr} AS VARCHAR) AS {ident(c)}" for c, expr in REDACTED_COLUMNS.get(table, {}).items()
                if c in columns]
    if redacted:
        base = f"SELECT * REPLACE ({', '.join(redacted)}) FROM ({base})"
    private = private_columns(table, columns)
    if not private:
        return base, {}
    hashed = ", ".join(f"CASE WHEN {ident(c)} IS NULL THEN NULL "
                       f"ELSE substr(sha256($grebench_salt || {ident(c)}), 1, 16) END AS {ident(c)}" for c in private)
    return f"SELECT * REPLACE ({hashed}) FROM ({base})", {"grebench_salt": store.salt()}


def write_parquet(result: duckdb.DuckDBPyConnection, target: Path) -> int:
    """Write a query's result to ``target`` through pyarrow (no path is ever pasted into SQL); returns its rows."""
    import pyarrow.parquet as pq

    table = result.to_arrow_table()
    with naming_path(target):  # pyarrow's file errors name no file
        pq.write_table(table, target)
    return int(table.num_rows)


_PAPER_COLUMNS = ("paper_id", "venue_id", "venue", "venue_year", "title", "abstract", "authors", "keywords", "decision",
                  "withdrawn", "source", "submitted_at", "reviews_public_at", "content_sha256", "ingested_at",
                  "updated_at")
_REVIEW_COLUMNS = ("review_id", "paper_id", "kind", "signature", "visible_at", "first_seen_at", "latest_version")
_VERSION_COLUMNS = ("review_id", "version", "modified_at", "content_sha256", "title", "rating", "confidence", "text",
                    "sections_json", "content_json", "judgments_json", "judgments_preprocessor", "fetched_at")


@dataclass(frozen=True)
class PaperWrite:
    """What one paper upsert changed."""

    paper_added: bool
    paper_updated: bool
    reviews_added: int
    versions_added: int


class RunFailure(TypedDict):
    """A failure recorded for a run (:meth:`Store.run_failures`): its stage, the item and why."""

    stage: str
    item: str | None
    reason: str


class Store:
    """Queries over a DuckDB connection handed in by the caller.

    The store never opens files itself (see :func:`open_store`), so tests hand
    it an in-memory connection and production code hands it the writer's file.
    """

    def __init__(self, con: duckdb.DuckDBPyConnection, path: Path | None = None) -> None:
        self.con = con
        self.path = path
        self._salt: str | None = None

    def columns(self, table: str) -> list[str]:
        """The columns of one of the store's tables, in order (from DuckDB's catalogue, the name bound)."""
        return [r[0] for r in self.con.execute(
            "SELECT column_name FROM duckdb_columns() WHERE database_name = current_database() AND table_name = ? "
            "ORDER BY column_index", [table]).fetchall()]

    def salt(self) -> str:
        """The data dir's private salt for hashing personal data in exports (``<db file>.salt``, made once, never
        exported); an in-memory store gets a random one per process."""
        if self._salt is None:
            file = None if self.path is None else self.path.with_name(self.path.name + ".salt")
            if file is not None and file.is_file():
                self._salt = file.read_text(encoding="utf-8").strip()
            if not self._salt:
                self._salt = secrets.token_hex(16)
                if file is not None:
                    file.write_text(self._salt + "\n", encoding="utf-8")
                    file.chmod(0o600)
        return self._salt

    # -- transactions ------------------------------------------------------
    @contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """Run a block atomically: everything in it lands, or nothing does."""
        self.con.execute("BEGIN TRANSACTION")
        try:
            yield self.con
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        self.con.execute("COMMIT")

    def checkpoint(self) -> None:
        """Fold the write-ahead log into the database file; where another of this process's connections has a write
        transaction open (a cursor of the app or the service's check), the fold is left to the next checkpoint: the
        write-ahead log is as durable as the file, and DuckDB refuses a CHECKPOINT then rather than wait."""
        if self.path is not None:
            try:
                self.con.execute("CHECKPOINT")
            except duckdb.TransactionException as exc:
                if "other write transactions" not in str(exc):
                    raise
                log.debug("checkpoint left for later: %s", exc)

    def close(self) -> None:
        """Checkpoint and close the connection."""
        try:
            self.checkpoint()
        finally:
            self.con.close()

    # -- generic helpers ---------------------------------------------------
    def rows(self, sql: str, params: list[Any] | dict[str, object] | None = None) -> list[dict[str, Any]]:
        """Run a query and return its rows as dicts (``params``: positional, or named for ``$name``)."""
        cur = self.con.execute(sql, params or [])
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    def scalar(self, sql: str, params: list[Any] | None = None) -> Any:
        """Run a query returning one value."""
        row = self.con.execute(sql, params or []).fetchone()
        return None if row is None else row[0]

    def insert_rows(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> int:
        """Insert many rows at once (an Arrow table scanned by DuckDB); returns the number inserted.

        ``executemany`` costs DuckDB a statement per row (seconds for a few thousand rows); this is one statement.
        Column types come from the target table, so ``None`` and mixed ints/floats land as they would one by one.
        """
        if not rows:
            return 0
        import pyarrow as pa

        types = {name: _ARROW_TYPES.get(kind) for name, kind in self.con.execute(
            "SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = ? AND schema_name = 'main' "
            "AND database_name = current_database()", [table]).fetchall()}
        arrays = [pa.array([row[i] for row in rows], type=_arrow_type(types.get(name)))
                  for i, name in enumerate(columns)]
        view = f"_insert_{uuid.uuid4().hex[:12]}"
        self.con.register(view, pa.Table.from_arrays(arrays, names=list(columns)))
        try:
            names = ", ".join(ident(c) for c in columns)
            self.con.execute(f"INSERT INTO {ident(table)} ({names}) SELECT {names} FROM {view}")
        finally:
            self.con.unregister(view)
        return len(rows)

    # -- stage state (skip unchanged work) -----------------------------------
    def stage_state(self, stage: str, scope: str) -> tuple[str, dict[str, Any] | None] | None:
        """(fingerprint, summary) a stage stored for a scope, or None when it never finished there."""
        row = self.con.execute("SELECT fingerprint, summary_json FROM stage_state WHERE stage = ? AND scope = ?",
                               [stage, scope]).fetchone()
        if row is None:
            return None
        return row[0], None if row[1] is None else json.loads(row[1])

    def set_stage_state(self, stage: str, scope: str, fingerprint: str, summary: Mapping[str, Any] | None) -> None:
        """Record that a stage finished a scope from inputs with this fingerprint (and what it reported)."""
        self.con.execute("DELETE FROM stage_state WHERE stage = ? AND scope = ?", [stage, scope])
        self.con.execute("INSERT INTO stage_state VALUES (?, ?, ?, ?, ?)",
                         [stage, scope, fingerprint, None if summary is None else json.dumps(summary, default=str),
                          utcnow()])

    def clear_stage_state(self, stage: str, scope: str | None = None) -> None:
        """Forget a stage's fingerprints (all scopes when ``scope`` is None): its next run does the work again."""
        if scope is None:
            self.con.execute("DELETE FROM stage_state WHERE stage = ?", [stage])
        else:
            self.con.execute("DELETE FROM stage_state WHERE stage = ? AND scope = ?", [stage, scope])

    # -- runs --------------------------------------------------------------
    def start_run(self, command: str, args: dict[str, Any]) -> str:
        """Record the start of a command and return its run id (live until :meth:`finish_run`)."""
        run_id = uuid.uuid4().hex[:16]
        self.con.execute(
            "INSERT INTO runs VALUES (?, ?, ?, ?, NULL, 'running', NULL)",
            [run_id, command, json.dumps(args, default=str), utcnow()],
        )
        _LIVE_RUNS[run_id] = self
        return run_id

    def note_failure(self, reason: str) -> None:
        """Keep why this process's live runs could not be finished when the store itself cannot be written (a full
        disk invalidates the connection): in the data dir's failure note (:func:`_failure_note`), which the next
        writer reads when it marks them (:meth:`mark_stale_runs`).  Best effort: never raises."""
        runs = [run_id for run_id, store in _LIVE_RUNS.items() if store is self]
        if self.path is not None and runs:
            _write_failure_note(_failure_note(self.path), {"runs": runs, "reason": reason[:1000]})

    def mark_stale_runs(self) -> list[str]:
        """Runs still ``running`` that no live command of this process owns: their writer is gone (the caller
        holds the writer lock), so they are marked ``interrupted``; a run whose writer left a failure note (the
        store could not be written: :meth:`note_failure`) is marked ``failed`` with that reason instead.  Returns
        their ids."""
        stale = [r[0] for r in self.con.execute("SELECT run_id FROM runs WHERE status = 'running'").fetchall()
                 if r[0] not in _LIVE_RUNS]
        note = _read_failure_note(_failure_note(self.path)) if self.path is not None else {}
        noted = [run_id for run_id in stale if run_id in note.get("runs", [])]
        for run_id in noted:
            self.record_failure(run_id, "store", None, str(note["reason"]))
            self.con.execute("UPDATE runs SET status = 'failed', finished_at = ?, summary_json = ? WHERE run_id = ?",
                             [utcnow(), json.dumps({"error": note["reason"]}), run_id])
        stale = [run_id for run_id in stale if run_id not in noted]
        if note and self.path is not None:
            _write_failure_note(_failure_note(self.path), {})  # read: cleared in place (its blocks stay allocated)
        if stale:
            self.con.execute(
                "UPDATE runs SET status = 'interrupted', finished_at = ?, summary_json = coalesce(summary_json, ?) "
                "WHERE run_id IN (SELECT unnest(?::VARCHAR[]))",
                [utcnow(), json.dumps({"interrupted": STALE_REASON}), stale])
        return stale

    def record_failure(self, run_id: str, stage: str, item: str | None, reason: str) -> None:
        """Record one failed item of a run, with its reason."""
        self.con.execute(
            "INSERT INTO run_failures VALUES (?, ?, ?, ?, ?)", [run_id, stage, item, reason[:4000], utcnow()]
        )

    def finish_run(self, run_id: str, summary: dict[str, Any], status: str | None = None) -> str:
        """Close a run record: status ok, or failed when anything failed (or the ``status`` given:
        ``interrupted`` for a run stopped by a signal)."""
        if status is None:
            failures = self.scalar("SELECT count(*) FROM run_failures WHERE run_id = ?", [run_id])
            status = "failed" if failures else "ok"
        self.con.execute(
            "UPDATE runs SET finished_at = ?, status = ?, summary_json = ? WHERE run_id = ?",
            [utcnow(), status, json.dumps(summary, default=str), run_id],
        )
        _LIVE_RUNS.pop(run_id, None)
        return status

    def run_failures(self, run_id: str) -> list[RunFailure]:
        """The failures recorded for one run."""
        return cast(list[RunFailure], self.rows(
            "SELECT stage, item, reason FROM run_failures WHERE run_id = ? ORDER BY failed_at", [run_id]))

    # -- papers and reviews ------------------------------------------------
    def upsert_paper(self, paper: PaperRecord) -> PaperWrite:
        """Insert or update a paper and its reviews; a changed review becomes a new version.

        Call inside :meth:`transaction` so that a paper lands whole or not at all.
        """
        return self.upsert_papers([paper])[0]

    def upsert_papers(self, papers: Sequence[PaperRecord]) -> list[PaperWrite]:
        """:meth:`upsert_paper` for several papers with a few statements in all (same result as one by one).

        Stored hashes are read in one query per table; new rows go in with one bulk insert per table.  Call inside
        :meth:`transaction` so that the batch lands whole or not at all.
        """
        if not papers:
            return []
        now = utcnow()
        known: dict[str, str] = dict(self.con.execute(
            "SELECT paper_id, content_sha256 FROM papers WHERE paper_id IN (SELECT unnest(?::VARCHAR[]))",
            [[p.paper_id for p in papers]]).fetchall())
        latest: dict[str, tuple[int, str]] = {row[0]: (row[1], row[2]) for row in self.con.execute(
            """SELECT r.review_id, r.latest_version, v.content_sha256 FROM reviews r
               JOIN review_versions v ON v.review_id = r.review_id AND v.version = r.latest_version
               WHERE r.review_id IN (SELECT unnest(?::VARCHAR[]))""",
            [[r.review_id for p in papers for r in p.reviews]]).fetchall()}
        new_papers: list[list[Any]] = []
        changed_papers: list[list[Any]] = []
        versions: list[list[Any]] = []
        new_reviews: list[list[Any]] = []
        bumped: list[list[Any]] = []
        out = []
        for paper in papers:
            values = [paper.venue_id, paper.venue, paper.venue_year, paper.title, paper.abstract, paper.authors,
                      paper.keywords, paper.decision, paper.withdrawn, paper.source, paper.submitted_at,
                      paper.reviews_public_at, paper.content_sha256]
            existing = known.get(paper.paper_id)
            if existing is None:
                new_papers.append([paper.paper_id, *values, now, now])
            elif existing != paper.content_sha256:
                changed_papers.append([*values, now, paper.paper_id])
            known[paper.paper_id] = paper.content_sha256
            reviews_added = versions_added = 0
            for review in paper.reviews:
                digest = review.content_sha256
                old = latest.get(review.review_id)
                if old is not None and old[1] == digest:
                    continue
                version = 1 if old is None else old[0] + 1
                latest[review.review_id] = (version, digest)
                versions.append([review.review_id, version, review.modified_at, digest, review.title, review.rating,
                                 review.confidence, review.text, json.dumps(review.sections, ensure_ascii=False),
                                 json.dumps(review.content, ensure_ascii=False, sort_keys=True),
                                 None if review.judgments is None else json.dumps(review.judgments,
                                                                                  ensure_ascii=False),
                                 review.judgments_preprocessor, now])
                if old is None:
                    new_reviews.append([review.review_id, review.paper_id, review.kind, review.signature,
                                        review.visible_at, now, version])
                    reviews_added += 1
                else:
                    bumped.append([version, review.review_id])
                versions_added += 1
            out.append(PaperWrite(existing is None, existing not in (None, paper.content_sha256), reviews_added,
                                  versions_added))
        self.insert_rows("papers", _PAPER_COLUMNS, new_papers)
        if changed_papers:
            self.con.executemany(
                """UPDATE papers SET venue_id=?, venue=?, venue_year=?, title=?, abstract=?, authors=?, keywords=?,
                   decision=?, withdrawn=?, source=?, submitted_at=?, reviews_public_at=?, content_sha256=?,
                   updated_at=? WHERE paper_id=?""", changed_papers)
        self.insert_rows("reviews", _REVIEW_COLUMNS, new_reviews)
        self.insert_rows("review_versions", _VERSION_COLUMNS, versions)
        if bumped:
            self.con.executemany("UPDATE reviews SET latest_version = ? WHERE review_id = ?", bumped)
        return out

    def content_hashes(self) -> tuple[dict[str, str], dict[str, str], set[tuple[str, str]]]:
        """(paper -> content hash, review -> latest version's hash, {(paper, pdf_ref) extracted}), read at once.

        Lets ingest skip an unchanged paper without touching the store for it.
        """
        papers = dict(self.con.execute("SELECT paper_id, content_sha256 FROM papers").fetchall())
        reviews = dict(self.con.execute(
            """SELECT r.review_id, v.content_sha256 FROM reviews r
               JOIN review_versions v ON v.review_id = r.review_id AND v.version = r.latest_version""").fetchall())
        texts = {(r[0], r[1]) for r in self.con.execute("SELECT paper_id, pdf_ref FROM paper_texts").fetchall()}
        return papers, reviews, texts

    def has_paper_text(self, paper_id: str, pdf_ref: str) -> bool:
        """Whether the PDF with this ref was already extracted (or failed for good) for the paper."""
        return bool(self.scalar(
            "SELECT count(*) FROM paper_texts WHERE paper_id = ? AND pdf_ref = ?", [paper_id, pdf_ref]))

    def put_paper_text(self, paper_id: str, pdf_ref: str, result: PdfExtraction) -> None:
        """Store the outcome of one PDF extraction (ok or failed, with its reason)."""
        self.con.execute("DELETE FROM paper_texts WHERE paper_id = ?", [paper_id])
        self.con.execute(
            "INSERT INTO paper_texts VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [paper_id, pdf_ref, result.get("pdf_sha256"), result.get("pages"), result.get("text"),
             json.dumps(result.get("hidden", []), ensure_ascii=False),
             json.dumps(result.get("flags", []), ensure_ascii=False),
             "ok" if result.get("error") is None else "failed", result.get("error"), utcnow()],
        )

    # -- overview ----------------------------------------------------------
    def counts(self) -> dict[str, int]:
        """Row counts of every table."""
        tables = [r[0] for r in self.con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() ORDER BY table_name"
        ).fetchall()]
        return {t: int(self.scalar(f"SELECT count(*) FROM {ident(t)}")) for t in tables}

    def export_parquet(self, out_dir: Path) -> dict[str, Path]:
        """Write every table as Parquet (how readers get data without touching the live file)."""
        return self.stage_parquet(out_dir)()

    def stage_parquet(self, out_dir: Path) -> Callable[[], dict[str, Path]]:
        """The first half of :meth:`export_parquet`: every table written beside its file (``.parquet.tmp``); the
        function returned puts them all in place (renames: no space needed) and returns them.  A table that cannot
        be written (a full disk) removes what was staged and leaves the previous export whole."""
        out_dir.mkdir(parents=True, exist_ok=True)
        staged: dict[str, tuple[Path, Path]] = {}
        try:
            for table in self.counts():
                target = out_dir / f"{table}.parquet"
                tmp = target.with_suffix(".parquet.tmp")
                staged[table] = (tmp, target)
                sql, params = public_select(self, table)
                write_parquet(self.con.execute(sql, params), tmp)
        except BaseException:
            for tmp, _ in staged.values():
                tmp.unlink(missing_ok=True)
            raise

        def put_in_place() -> dict[str, Path]:
            for tmp, target in staged.values():
                tmp.replace(target)
            return {table: target for table, (_, target) in staged.items()}

        return put_in_place

    def copy_to(self, target: Path) -> Path:
        """A consistent read-only copy of the database file for readers."""
        if self.path is None:
            raise ValueError("an in-memory store has no file to copy")
        self.con.execute("CHECKPOINT")
        with removed_on_failure(target.with_suffix(".tmp")) as tmp:
            shutil.copy2(self.path, tmp)
        tmp.replace(target)
        return target


#: Bytes of the failure note (``<db file>.failure``): made at this size when the store opens and only ever
#: overwritten in place, so writing it when the disk is full needs no new block.
FAILURE_NOTE_BYTES = 4096


def _failure_note(db_file: Path) -> Path:
    return db_file.with_name(db_file.name + ".failure")


class _FailureNote(TypedDict, total=False):
    """The failure note's JSON (:meth:`Store.note_failure`): the live runs and why the store could not be written;
    empty once read."""

    runs: list[str]
    reason: str


def _write_failure_note(path: Path, note: _FailureNote) -> None:
    """Overwrite the note in place, padded to :data:`FAILURE_NOTE_BYTES` (no truncation: a full disk cannot give
    back a block freed and asked for again); a note that cannot be written is lost, not raised."""
    blob = json.dumps(note).encode()[:FAILURE_NOTE_BYTES]
    try:
        with path.open("r+b") as fh:
            fh.write(blob.ljust(FAILURE_NOTE_BYTES, b" "))
            fh.flush()
            os.fsync(fh.fileno())
    except OSError:
        pass


def _read_failure_note(path: Path) -> _FailureNote:
    try:
        text = path.read_bytes().strip(b" \0")
        note = json.loads(text) if text else {}
    except (OSError, ValueError):
        return {}
    ok = isinstance(note, dict) and isinstance(note.get("runs"), list) and note.get("reason")
    return cast(_FailureNote, note) if ok else {}


def _reserve_failure_note(db_file: Path) -> None:
    """Make the note at its full size while there is room (once per data dir)."""
    path = _failure_note(db_file)
    if not path.exists():
        try:
            path.write_bytes(b" " * FAILURE_NOTE_BYTES)
        except OSError:
            pass


#: What a stale run's summary says (its process ended without recording how: killed, or a power cut).
STALE_REASON = "the process ended during this run (killed, or stopped before it could record how)"
#: Runs started by this process and not finished yet (a stale-run sweep never touches them).
_LIVE_RUNS: dict[str, Store] = {}


def _mark_live_runs_interrupted() -> None:
    """At a forced exit (the watchdog thread): mark this process's live runs interrupted through a cursor of their
    store (a connection of its own: the thread stuck in the job keeps its own)."""
    for run_id, store in list(_LIVE_RUNS.items()):
        cur = store.con.cursor()
        try:
            cur.execute("UPDATE runs SET status = 'interrupted', finished_at = ?, summary_json = ? WHERE run_id = ? "
                        "AND status = 'running'",
                        [utcnow(), json.dumps({"interrupted": f"{stop.reason_text()}; no request boundary was "
                                               "reached within stop_grace_s"}), run_id])
            cur.execute("CHECKPOINT")
        finally:
            cur.close()


stop.at_forced_exit(_mark_live_runs_interrupted)


@functools.cache
def schema_tables() -> frozenset[str]:
    """Names of the tables (and views) the store's migrations create: the allow-list for names read from files."""
    con = duckdb.connect(":memory:")
    try:
        migrate(con)
        rows = con.execute("SELECT table_name FROM duckdb_tables() UNION "
                           "SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()
        return frozenset(r[0] for r in rows)
    finally:
        con.close()


class StoreLocked(RuntimeError):
    """Another process holds the store's file for writing (DuckDB allows one writer process, and no reader
    beside it); ``pid`` is that process's id when DuckDB names it."""

    def __init__(self, db_file: Path, message: str) -> None:
        self.db_file = db_file
        found = re.search(r"\(PID (\d+)\)", message)
        self.pid = int(found.group(1)) if found else None
        self.detail = message.splitlines()[0][:300] if message else ""  # DuckDB's own words, for the debug log
        holder = "another process" if self.pid is None else f"another process (PID {self.pid})"
        super().__init__(f"cannot open {db_file} for writing: {holder} holds it. Only one grebench writer may run "
                         "at a time; readers use `grebench export` Parquet files.")


def _raise_if_damaged(db_file: Path, exc: BaseException) -> None:
    """:class:`StoreDamaged` (noted beside the file) when DuckDB's error says the file is damaged."""
    if is_damage(exc):
        note_damage(db_file, damage_reason(exc))
        raise StoreDamaged(db_file, damage_reason(exc)) from None


def open_store(path: str | Path | None, read_only: bool = False) -> Store:
    """Open (and migrate, unless read-only) the store at ``path``; ``None`` means in memory.  A file found damaged
    (now, or noted so before: :mod:`grebench.store._integrity`) raises :class:`StoreDamaged`."""
    if path is None or str(path) == ":memory:":
        con = duckdb.connect(":memory:")
        migrate(con)
        return Store(con)
    db_file = Path(path)
    damage = noted_damage(db_file)  # found damaged before (a check, a command): refused at once, with the remedy
    if damage is not None:
        raise StoreDamaged(db_file, damage)
    if read_only:
        if not db_file.exists():
            raise FileNotFoundError(f"no store at {db_file}: run `grebench ingest` first")
        try:
            return Store(duckdb.connect(str(db_file), read_only=True), db_file)
        except duckdb.Error as exc:
            _raise_if_damaged(db_file, exc)
            raise
    db_file.parent.mkdir(parents=True, exist_ok=True)
    try:
        con = duckdb.connect(str(db_file))
    except duckdb.IOException as exc:
        _raise_if_damaged(db_file, exc)
        if "lock" not in str(exc).lower():  # permissions, a full disk: not another writer
            raise RuntimeError(f"cannot open {db_file} for writing: {str(exc).splitlines()[0][:300]}") from None
        raise StoreLocked(db_file, str(exc)) from None
    except duckdb.Error as exc:
        _raise_if_damaged(db_file, exc)
        raise
    try:
        migrate(con, db_file)
    except duckdb.Error as exc:
        con.close()
        _raise_if_damaged(db_file, exc)
        raise
    store = Store(con, db_file)
    _reserve_failure_note(db_file)
    store.mark_stale_runs()  # we hold the writer lock: a run still 'running' belongs to a writer that is gone
    return store

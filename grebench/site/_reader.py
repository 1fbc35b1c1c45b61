"""The app's read side: one in-memory DuckDB per export fingerprint, shared by every request, and its view cache.

The app never opens the writer's live DuckDB file: it reads ``DATA_DIR/export/*.parquet``.  Loading those files and
recomputing the boards (bootstrap) on every page load made the app time out under 50 concurrent readers, so:

* :class:`ReaderCache` keeps one in-memory database, built from the tables the app shows (:data:`APP_TABLES`), for as
  long as the export's *fingerprint* (name, size, mtime, inode of each of those files: the export replaces each file
  by a rename, so a new export always means a new inode) is unchanged.  When the fingerprint
  changes, the files' SHA-256 digest decides whether anything really changed (``grebench export`` rewrites identical
  files byte for byte, so a re-export of unchanged data rebuilds nothing).  Each request reads through its own
  ``cursor()`` (DuckDB connections are not thread-safe; cursors are, one per thread).
* The request that notices a new export rebuilds; requests that arrive during that rebuild are answered from the
  previous data instead of queueing behind it (the very first build is waited for).
* :meth:`ReaderCache.view` caches computed views (a board, a model page, a paper page) per content digest in a
  bounded LRU; concurrent requests for the same missing view compute it once.
* :class:`StampCache` does the same for things outside the export (the queue file, the snapshots folder).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import duckdb
import pyarrow.parquet as pq

from grebench.site._versions import version
from grebench.store import Store, ident, schema_tables

T = TypeVar("T")

# every table a query of the app reads (``_data``: boards, board_rows, candidates, model_page, paper_pages;
# ``_timeline.board_histories``: board_versions, scored_setups; the Submissions tab: submissions, submission_log and
# board_changes, the holds);
# the big bookkeeping tables (llm_calls, logprob_cache, runs, ...) are not loaded
APP_TABLES = ("papers", "reviews", "review_versions", "paper_texts", "candidates", "generations", "scores",
              "judgments", "panel_rankings", "panel_verdicts", "panel_votes", "boards", "board_rows", "labels",
              "paper_links", "paper_link_flags", "scored_setups", "judges", "judge_exams", "board_versions",
              "line_attribution", "submissions", "submission_log", "board_changes")
MAX_VIEWS = 256

Fingerprint = tuple[tuple[str, int, int, int], ...]


def export_fingerprint(export_dir: Path, tables: tuple[str, ...] = APP_TABLES) -> Fingerprint:
    """(name, size, mtime_ns, inode) of each exported file of ``tables`` that exists: cheap enough for every request."""
    out = []
    for table in tables:
        try:
            st = (export_dir / f"{table}.parquet").stat()
        except OSError:
            continue
        out.append((table, st.st_size, st.st_mtime_ns, st.st_ino))
    return tuple(out)


def export_digest(export_dir: Path, fingerprint: Fingerprint) -> str:
    """SHA-256 over the names and bytes of the fingerprinted files (identical re-exports give the same digest)."""
    digest = hashlib.sha256()
    for table, *_stat in fingerprint:
        digest.update(table.encode() + b"\0")
        try:
            with (export_dir / f"{table}.parquet").open("rb") as fh:
                digest.update(hashlib.file_digest(fh, "sha256").digest())
        except OSError:
            digest.update(b"missing")
    return digest.hexdigest()


def build_reader(export_dir: Path, tables: tuple[str, ...] | None = APP_TABLES) -> Store:
    """An in-memory store loaded from the export (``tables=None``: every file); the schema alone when none."""
    from grebench.site._data import has_table
    from grebench.store.migrations import m0019_paper_links, m0032_link_evidence

    con = duckdb.connect(":memory:")
    paths = sorted(export_dir.glob("*.parquet")) if export_dir.is_dir() else []
    for path in paths:
        # a file name is data: only names of the store's own tables are loaded, identifiers from that allow-list
        if (tables is None or path.stem in tables) and path.stem in schema_tables() and not path.is_symlink():
            con.register("grebench_export_src", pq.read_table(path))
            try:
                con.execute(f"CREATE TABLE {ident(path.stem)} AS SELECT * FROM grebench_export_src")
            finally:
                con.unregister("grebench_export_src")
    store = Store(con)
    if not has_table(store, "papers"):  # nothing exported yet: the schema alone, so every page works
        from grebench.store import migrate

        migrate(con)
    else:
        # the one public-since date (linked versions of a paper's work) and the clean pairs built on it, as in the store
        con.execute(m0019_paper_links.LINKS_TABLE)
        con.execute(m0032_link_evidence.FLAGS_TABLE)  # possible links count as links until decided (issue 62)
        con.execute(m0032_link_evidence.VERSIONS_VIEW)
        con.execute(m0019_paper_links.PUBLIC_SINCE_VIEW)
        if not has_table(store, "clean_pairs") and all(has_table(store, t) for t in ("generations", "candidates")):
            con.execute(m0019_paper_links.CLEAN_PAIRS_VIEW)
    return store


@dataclass(frozen=True)
class Snapshot:
    """One build of the reader database: what it was built from and when."""

    fingerprint: Fingerprint
    digest: str
    con: duckdb.DuckDBPyConnection
    built_at: float


class ReaderCache:
    """The shared reader database of one export folder and the views computed from it (see the module doc)."""

    def __init__(self, export_dir: Path, tables: tuple[str, ...] = APP_TABLES, max_views: int = MAX_VIEWS) -> None:
        self.export_dir = Path(export_dir)
        self.tables = tables
        self.max_views = max_views
        self.builds = 0  # how many times the database was (re)built: tests and the load benchmark read it
        self.view_computes = 0
        self._snap: Snapshot | None = None
        self._build_lock = threading.Lock()
        self._lock = threading.Lock()
        self._views: OrderedDict[tuple[str, str, Hashable], Any] = OrderedDict()
        self._inflight: dict[Hashable, threading.Event] = {}

    def snapshot(self) -> Snapshot:
        """The current data: rebuilt here when the export changed (or the previous one while another rebuilds)."""
        fp = export_fingerprint(self.export_dir, self.tables)
        snap = self._snap
        if snap is not None and snap.fingerprint == fp:
            return snap
        if not self._build_lock.acquire(blocking=snap is None):
            assert snap is not None
            return snap  # another request is rebuilding: answer from the previous export meanwhile
        try:
            snap = self._snap
            fp = export_fingerprint(self.export_dir, self.tables)
            if snap is not None and snap.fingerprint == fp:
                return snap
            digest = export_digest(self.export_dir, fp)
            if snap is not None and snap.digest == digest:  # rewritten with the same bytes: keep everything
                snap = replace(snap, fingerprint=fp)
            else:
                store = build_reader(self.export_dir, self.tables)
                snap = Snapshot(fp, digest, store.con, time.time())
                self.builds += 1
                with self._lock:
                    for key in [k for k in self._views if k[0] != digest]:
                        del self._views[key]
            self._snap = snap
            return snap
        finally:
            self._build_lock.release()

    @contextmanager
    def reader(self, snap: Snapshot | None = None) -> Iterator[Store]:
        """A store on a fresh cursor of the shared database (one per request: cursors may run in parallel)."""
        snap = snap or self.snapshot()
        cur = snap.con.cursor()
        try:
            yield Store(cur)
        finally:
            cur.close()

    def view(self, name: str, args: Hashable, compute: Callable[[Store], T], snap: Snapshot | None = None) -> T:
        """``compute(store)`` cached per (export digest, name, args); treat the result as read-only.

        Pass ``snap`` to compute several views from the same data (a model page and the boards it quotes).
        """
        snap = snap or self.snapshot()
        key = (snap.digest, name, args)
        while True:
            with self._lock:
                if key in self._views:
                    self._views.move_to_end(key)
                    return self._views[key]  # type: ignore[no-any-return]
                waiting = self._inflight.get(key)
                if waiting is None:
                    self._inflight[key] = threading.Event()
                    break
            waiting.wait(timeout=120)  # another request computes it; if that one failed, compute it here
        try:
            with self.reader(snap) as store:
                value = compute(store)
            with self._lock:
                self.view_computes += 1
                if self._snap is None or self._snap.digest == snap.digest:
                    self._views[key] = value
                    while len(self._views) > self.max_views:
                        self._views.popitem(last=False)
            return value
        finally:
            with self._lock:
                self._inflight.pop(key).set()


class StampCache:
    """One value recomputed only when ``stamp()`` changes (or after ``max_age_s``); ``clear()`` forces it."""

    def __init__(self, stamp: Callable[[], Hashable], compute: Callable[[], T], max_age_s: float | None = None) -> None:
        self._stamp, self._compute, self._max_age = stamp, compute, max_age_s
        self._lock = threading.Lock()
        self._entry: tuple[Hashable, float, Any] | None = None

    def get(self) -> Any:
        """The cached value, or a fresh one (computed once even when many requests ask at the same moment)."""
        with self._lock:
            stamp, now = self._stamp(), time.monotonic()
            entry = self._entry
            if entry is not None and entry[0] == stamp and (self._max_age is None or now - entry[1] < self._max_age):
                return entry[2]
            value = self._compute()
            self._entry = (stamp, now, value)
            return value

    def clear(self) -> None:
        """Forget the value (after the app's own write)."""
        with self._lock:
            self._entry = None


def file_stamp(*paths: Path) -> tuple[tuple[str, int, int] | None, ...]:
    """(path, size, mtime_ns) per path (None when absent): the stamp of a file such as the queue and its WAL."""
    out: list[tuple[str, int, int] | None] = []
    for path in paths:
        try:
            st = path.stat()
        except OSError:
            out.append(None)
            continue
        out.append((str(path), st.st_size, st.st_mtime_ns))
    return tuple(out)


def tree_stamp(root: Path) -> tuple[tuple[str, int, int], ...]:
    """(relative path, size, mtime_ns) of every file under ``root`` (empty when absent)."""
    if not root.is_dir():
        return ()
    out = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        try:
            st = path.stat()
        except OSError:  # removed while listing: the next request sees the new state
            continue
        out.append((path.relative_to(root).as_posix(), st.st_size, st.st_mtime_ns))
    return tuple(out)


_CACHES: dict[Path, ReaderCache] = {}
_CACHES_LOCK = threading.Lock()


def reader_cache(export_dir: Path) -> ReaderCache:
    """The process-wide :class:`ReaderCache` of one export folder (every app on that data dir shares it)."""
    key = Path(export_dir).resolve()
    with _CACHES_LOCK:
        if key not in _CACHES:
            _CACHES[key] = ReaderCache(key)
        return _CACHES[key]


@dataclass(frozen=True)
class PublishedState:
    """The last published state, for a reader while a writer holds the store: an in-memory store of the export's
    tables, the row count of every exported table, and the board version the export carries."""

    store: Store
    counts: dict[str, int]
    version_id: str | None
    published_at: Any
    source: Path

    def describe(self) -> str:
        """``board version V published T (from DIR)``: what a reader says it shows."""
        when = f"{self.published_at:%Y-%m-%d %H:%M:%S}" if hasattr(self.published_at, "strftime") \
            else str(self.published_at)  # to the second, as the CLI prints every time
        what = f"board version {self.version_id} published {when} UTC" if self.version_id else "the last export"
        return f"{what} (from {self.source})"


def published_state(export_dir: Path, tables: tuple[str, ...] | None = None) -> PublishedState | None:
    """What the writer last published (``DATA_DIR/export``: the site stage writes it with every publish), loaded
    read-only into memory (``tables``: only those, plus ``board_versions``); None when nothing was published."""
    export_dir = Path(export_dir)
    if not (export_dir / "papers.parquet").is_file():
        return None
    counts = {}
    for path in sorted(export_dir.glob("*.parquet")):
        if path.stem in schema_tables() and not path.is_symlink():
            counts[path.stem] = int(pq.ParquetFile(path).metadata.num_rows)
    store = build_reader(export_dir, None if tables is None else (*tables, "board_versions"))
    latest = version(store)
    return PublishedState(store, counts, None if latest is None else latest["version_id"],
                          None if latest is None else latest["published_at"], export_dir)

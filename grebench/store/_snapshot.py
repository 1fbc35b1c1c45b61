"""Frozen per-venue-year snapshots: Parquet files + ``manifest.json`` (row counts, SHA-256) + a README.

A snapshot holds everything needed to show the venue-year's board and to re-score it with another evaluation-LM
(papers, reviews with every version, the human-baseline splits, candidates, generations, judgment lines,
synopses, scores, the panel's exam, votes and verdicts, the validation reports).  It is written into a temporary
directory and renamed into place, so a crash never leaves a half snapshot under ``DATA_DIR/snapshots``.

A snapshot from elsewhere is hostile input.  Verify and import never build SQL from it: a member's file name must be
exactly ``<table>.parquet`` for a table of :data:`TABLES` (the store's own schema), a plain file in the folder (no
symlink, nothing that resolves outside it); rows are counted from the Parquet footer by pyarrow; import reads each
file with pyarrow, refuses a column the store's table does not have, registers the Arrow table under a fixed name and
inserts with identifiers taken from the store's catalogue.  Personal data (submitters' contacts) never leaves the
store: :data:`PRIVATE_COLUMNS` are replaced by a salted hash in snapshots and exports.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, NotRequired, TypedDict, cast

from grebench import stop
from grebench.store._provenance import Provenance
from grebench.store._records import utcnow
from grebench.store._store import Store, ident, public_select, write_parquet

FORMAT = "grebench-snapshot/1"
#: Import decodes each member this many rows at a time (small: the byte bound is checked before each is kept) ...
BATCH_ROWS = 256
#: ... and inserts the checked batches into the store in groups of at most this many rows or bytes.
INSERT_ROWS = 8192
INSERT_BYTES = 16 * 1024 ** 2
#: The importer's own bound on what a whole snapshot may decode to (Arrow bytes, every member together):
#: ``max_expansion`` times the bytes of its Parquet files, at least :data:`MIN_DECODED_BYTES`, never more than
#: ``max_decoded_bytes`` (settings ``snapshot_import_max_expansion`` and ``snapshot_import_max_mb``).  The
#: manifest's ``decoded_bytes`` may only lower it: the manifest is the snapshot's, not the importer's word.
MAX_EXPANSION = 50
MAX_DECODED_BYTES = 2 * 1024 ** 3
MIN_DECODED_BYTES = 16 * 1024 ** 2
MAX_MANIFEST_BYTES = 1024 ** 2
MAX_MANIFEST_DEPTH = 8
MANIFEST = "manifest.json"
README = "README.md"
_P = "(SELECT paper_id FROM papers WHERE venue_id = $venue)"
_TEXTS = (f"(SELECT sha256(v.text) FROM review_versions v JOIN reviews r USING (review_id) WHERE r.paper_id IN {_P} "
          f"UNION ALL SELECT sha256(text) FROM generations WHERE paper_id IN {_P} AND text IS NOT NULL)")
# table -> rows of the venue-year ($venue is its venue id); tables missing from the store are left out
TABLES: dict[str, str] = {
    "papers": "SELECT * FROM papers WHERE venue_id = $venue",
    "paper_texts": f"SELECT * FROM paper_texts WHERE paper_id IN {_P}",
    "reviews": f"SELECT * FROM reviews WHERE paper_id IN {_P}",
    "review_versions": f"SELECT * FROM review_versions WHERE review_id IN (SELECT review_id FROM reviews "
                       f"WHERE paper_id IN {_P})",
    "baseline_splits": f"SELECT * FROM baseline_splits WHERE paper_id IN {_P}",
    "candidates": f"SELECT * FROM candidates WHERE name IN (SELECT candidate FROM generations WHERE paper_id IN {_P})",
    "generations": f"SELECT * FROM generations WHERE paper_id IN {_P}",
    "llm_calls": f"SELECT * FROM llm_calls WHERE request_key IN (SELECT request_key FROM generations "
                 f"WHERE paper_id IN {_P})",
    "judgments": f"SELECT * FROM judgments WHERE text_sha256 IN {_TEXTS}",
    "synopses": f"SELECT * FROM synopses WHERE paper_id IN {_P}",
    "scores": f"SELECT * FROM scores WHERE paper_id IN {_P}",
    "line_attribution": f"SELECT * FROM line_attribution WHERE paper_id IN {_P}",
    "scored_setups": f"SELECT * FROM scored_setups WHERE estimator_id IN (SELECT estimator FROM scores "
                     f"WHERE paper_id IN {_P})",
    "validation_reports": "SELECT * FROM validation_reports",
    "judges": "SELECT * FROM judges",
    "judge_exams": "SELECT * FROM judge_exams WHERE venue_id = $venue",
    "panel_votes": "SELECT * FROM panel_votes WHERE venue_id = $venue",
    "panel_verdicts": "SELECT * FROM panel_verdicts WHERE venue_id = $venue",
    "debates": f"SELECT * FROM debates WHERE paper_id IN {_P}",
    "panel_rankings": "SELECT * FROM panel_rankings WHERE venue_id = $venue",
    "panel_agreement": "SELECT * FROM panel_agreement WHERE venue_id = $venue",
    "machine_metrics": f"SELECT * FROM machine_metrics WHERE paper_id IN {_P}",
    "paper_samples": "SELECT * FROM paper_samples WHERE venue_id = $venue AND origin = 'run'",
    "boards": "SELECT * FROM boards WHERE venue_id = $venue",
    "board_rows": "SELECT * FROM board_rows WHERE board_id IN (SELECT board_id FROM boards WHERE venue_id = $venue)",
    # the history of the venue-year's boards: every published version that holds one of them (verbatim, as readers
    # saw it: a version published several venue-years together holds theirs too), the replay days (store-wide,
    # like the validation reports) and the replayed rows of its boards
    "board_versions": "SELECT * FROM board_versions WHERE list_contains(json_extract_string(leaderboard_json, "
                      "'$.boards[*].venue_id'), $venue)",
    "replay_days": "SELECT * FROM replay_days",
    # the public submissions log, store-wide (every try: issue 63); its columns hold no key, URL or contact
    "submission_log": "SELECT * FROM submission_log",
    "replay_history": "SELECT * FROM replay_history WHERE board_id IN (SELECT board_id FROM boards "
                      "WHERE venue_id = $venue)",
}

#: Columns whose imported value is fixed by the importer, whatever the snapshot holds: a call recorded elsewhere is
#: kept for the record, in a namespace no request of this install has (``grebench.llm._scope``), so it never serves
#: a call here (its time would date another candidate's review).
FORCED: dict[str, dict[str, str]] = {"llm_calls": {"cache_scope": "snapshot"},
                                     # an imported scored setup never becomes this store's default one (what
                                     # validate, exam and judge read unless a spec or id is named): only by name
                                     "scored_setups": {"role": "snapshot"},
                                     # a snapshot's sample is its own: never what this store's numbers claim
                                     "paper_samples": {"origin": "snapshot"},
                                     # versions it brings are read by --as-of and --history, never chained to
                                     "board_versions": {"origin": "snapshot"},
                                     # its replayed days were not run here: a replay of the same season here
                                     # runs them (only `done` days are skipped)
                                     "replay_days": {"status": "imported"}}


class SnapshotError(ValueError):
    """A snapshot cannot be written, verified or imported; the message says why."""


_MEMBER = re.compile(r"^[a-z][a-z0-9_]*\.parquet$")


def _member(root: Path, name: object, info: object) -> tuple[Path | None, str | None]:
    """The path of a manifest member, or why it is refused: the name must be ``<table>.parquet`` for a snapshot
    table, its ``table`` must match, and the file must be a regular file directly inside ``root`` (no symlink)."""
    if not isinstance(name, str) or not _MEMBER.match(name) or name.removesuffix(".parquet") not in TABLES:
        return None, f"{str(name)[:60]!r}: not a snapshot member (expected <table>.parquet for a known table)"
    if not isinstance(info, dict) or info.get("table") != name.removesuffix(".parquet"):
        return None, f"{name}: its table entry does not match its file name"
    path = root / name
    if path.is_symlink():
        return None, f"{name}: is a symbolic link (refused)"
    if not path.is_file():
        return None, f"{name}: missing"
    if path.resolve().parent != root:
        return None, f"{name}: resolves outside the snapshot folder (refused)"
    return path, None


def file_sha256(path: Path) -> str:
    """SHA-256 of a file, read in blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _tables(store: Store) -> set[str]:
    return {r[0] for r in store.con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database()").fetchall()}


def slug(venue: str) -> str:
    """Directory name of a venue-year (``ICLR 2020`` → ``ICLR-2020``)."""
    return re.sub(r"[^A-Za-z0-9]+", "-", venue).strip("-") or "venue"


class VenueYear(TypedDict):
    """A venue-year of the store (:func:`venue_years`)."""

    venue_id: str
    venue: str | None
    venue_year: int | None
    papers: int
    slug: str


class SnapshotFile(TypedDict):
    """A member of a snapshot, as its manifest lists it."""

    table: str
    rows: int
    bytes: int
    decoded_bytes: int
    sha256: str


class PromptVersions(TypedDict):
    """The prompt versions a snapshot's generations and scores were made with."""

    generations: list[str]
    scores: list[str]


class _SnapshotFacts(TypedDict):
    prompt_versions: PromptVersions
    estimators: list[str]
    preprocessors: list[str]
    dates: dict[str, str | None]


class SnapshotManifest(_SnapshotFacts):
    """A snapshot's ``manifest.json`` as :func:`export_snapshot` writes it (its README's hash added once the README
    is written); the returned one also says its own SHA-256 and folder."""

    format: str
    venue_id: str
    venue: str | None
    venue_year: int | None
    slug: str
    product_version: str
    created_at: str
    files: dict[str, SnapshotFile]
    provenance: Provenance | None
    readme_sha256: NotRequired[str]
    manifest_sha256: NotRequired[str]
    path: NotRequired[str]


class SnapshotReport(TypedDict):
    """What :func:`verify_snapshot` found; ``venue_id`` and ``product_version`` are the manifest's, as it has them
    (checked to be strings only when ``ok``)."""

    path: str
    authenticated: bool
    ok: bool
    problems: list[str]
    files: int
    manifest_sha256: NotRequired[str]
    venue_id: NotRequired[object]
    product_version: NotRequired[object]


def venue_years(store: Store) -> list[VenueYear]:
    """Every venue-year in the store: venue id, display name, year, slug, papers."""
    rows = store.rows("SELECT venue_id, any_value(venue) AS venue, any_value(venue_year) AS venue_year, "
                      "count(*) AS papers FROM papers GROUP BY venue_id ORDER BY venue_id")
    return [VenueYear(venue_id=r["venue_id"], venue=r["venue"], venue_year=r["venue_year"], papers=r["papers"],
                      slug=slug(r["venue"] or r["venue_id"])) for r in rows]


def find_venue(store: Store, wanted: str) -> VenueYear:
    """The venue-year named by its venue id, display name or slug (case-insensitive)."""
    key = wanted.strip().lower()
    for v in venue_years(store):
        if key in {str(v["venue_id"]).lower(), str(v["venue"] or "").lower(), v["slug"].lower()}:
            return v
    known = ", ".join(f"{v['slug']} ({v['venue_id']})" for v in venue_years(store)) or "none: ingest first"
    raise SnapshotError(f"no venue-year {wanted!r} in the store (known: {known})")


def _distinct(store: Store, sql: str, venue_id: str) -> list[str]:
    return sorted({r[0] for r in store.con.execute(sql, {"venue": venue_id}).fetchall() if r[0] is not None},
                  key=str)


def _provenance(store: Store, venue_id: str) -> _SnapshotFacts:
    dates = store.rows("SELECT min(submitted_at) AS submitted_from, max(submitted_at) AS submitted_to, "
                       "min(reviews_public_at) AS reviews_public_from, max(reviews_public_at) AS reviews_public_to "
                       "FROM papers WHERE venue_id = $venue", {"venue": venue_id})
    return {
        "prompt_versions": {
            "generations": _distinct(store, f"SELECT prompt_version FROM generations WHERE paper_id IN {_P}", venue_id),
            "scores": _distinct(store, f"SELECT prompt_version FROM scores WHERE paper_id IN {_P}", venue_id)},
        "estimators": _distinct(store, f"SELECT estimator FROM scores WHERE paper_id IN {_P}", venue_id),
        "preprocessors": _distinct(store, f"SELECT preprocessor FROM scores WHERE paper_id IN {_P}", venue_id),
        "dates": {k: None if v is None else str(v) for k, v in dates[0].items()},
    }


def _readme(manifest: SnapshotManifest) -> str:
    lines = [f"# GRE-bench snapshot: {manifest['venue']} ({manifest['venue_id']})", "",
             f"Cut {manifest['created_at']} by grebench {manifest['product_version']} (format {FORMAT}).",
             "Frozen: check it with `grebench snapshot verify DIR`; load it with `grebench snapshot import DIR`, then",
             "re-score it with another evaluation-LM: `grebench score --estimator vllm:http://HOST:8000`.",
             "Rebuild its published numbers with the recorded setup (the manifest's `provenance`) and compare:",
             "`grebench snapshot rebuild DIR`.", "",
             "| file | rows |", "|---|---|"]
    lines += [f"| `{name}` | {info['rows']} |" for name, info in manifest["files"].items()]
    lines += ["", "`validation_reports` and `judges` are store-wide (not filtered to this venue-year).",
              "Estimators used: " + (", ".join(manifest["estimators"]) or "none") + ".", ""]
    return "\n".join(lines)


#: What a snapshot says produced its numbers, given the store and the venue id (the scoring stage's
#: :func:`grebench.scoring.provenance`, handed down by the caller: the store stands below scoring).
Describe = Callable[[Store, str], Provenance]


def export_snapshot(store: Store, venue: str, out_dir: Path, *, replace: bool = False,
                    describe: Describe | None = None) -> SnapshotManifest:
    """Write the snapshot of one venue-year into ``out_dir``; return its manifest (with ``manifest_sha256``).
    ``describe`` fills the manifest's ``provenance`` (None: the manifest has none)."""
    import grebench

    info = find_venue(store, venue)
    venue_id = info["venue_id"]
    out_dir = Path(out_dir)
    if out_dir.exists() and not replace:
        raise SnapshotError(f"{out_dir} exists: snapshots are frozen (pass replace to cut it again)")
    tmp = out_dir.parent / f".{out_dir.name}.tmp-{uuid.uuid4().hex[:8]}"
    tmp.mkdir(parents=True)
    try:
        files: dict[str, SnapshotFile] = {}
        present = _tables(store)
        for table, sql in TABLES.items():
            stop.check()  # a member boundary: the temporary folder is removed below, nothing half-cut is kept
            if table not in present:
                continue
            target = tmp / f"{table}.parquet"
            params: dict[str, str] = {"venue": venue_id} if "$venue" in sql else {}
            query, extra = public_select(store, table, sql)
            rows = write_parquet(store.con.execute(query, {**params, **extra}), target)
            files[target.name] = {"table": table, "rows": rows, "bytes": target.stat().st_size,
                                  "decoded_bytes": decoded_bytes(target), "sha256": file_sha256(target)}
        manifest: SnapshotManifest = {
            "format": FORMAT, "venue_id": venue_id, "venue": info["venue"], "venue_year": info["venue_year"],
            "slug": info["slug"], "product_version": grebench.__version__, "created_at": utcnow().isoformat(),
            **_provenance(store, venue_id), "files": files,
            "provenance": None if describe is None else describe(store, venue_id),
        }
        (tmp / README).write_text(_readme(manifest), encoding="utf-8")
        manifest["readme_sha256"] = file_sha256(tmp / README)
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        if out_dir.exists():
            shutil.rmtree(out_dir)
        tmp.rename(out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    manifest["manifest_sha256"] = file_sha256(out_dir / MANIFEST)
    manifest["path"] = str(out_dir)
    return manifest


def decoded_bytes(path: Path) -> int:
    """What a Parquet file decodes to, in Arrow bytes, counted the way import counts it (dictionaries expanded)."""
    import pyarrow.parquet as pq

    return sum(_dense_nbytes(batch) for batch in pq.ParquetFile(path).iter_batches(batch_size=INSERT_ROWS))


def decoded_bound(info: dict[str, Any]) -> int | None:
    """What a member's manifest lets it decode to: its declared ``decoded_bytes`` with a little slack for another
    pyarrow's buffers; None when it declares none.  Only ever a further limit below :func:`import_bound`."""
    declared = info.get("decoded_bytes")
    if isinstance(declared, int) and not isinstance(declared, bool) and declared >= 0:
        return int(declared + declared // 10 + 1024 ** 2)
    return None


def import_bound(file_bytes: int, max_expansion: int = MAX_EXPANSION,
                 max_decoded_bytes: int = MAX_DECODED_BYTES) -> int:
    """The most a whole snapshot whose Parquet files hold ``file_bytes`` may decode to, by the importer's own rule
    (the files' sizes as measured here and the settings, never the manifest)."""
    return min(max_decoded_bytes, max(MIN_DECODED_BYTES, max_expansion * file_bytes))


def _dense_nbytes(batch: Any) -> int:
    """Bytes a record batch takes once every dictionary-encoded column is expanded (what the store will hold),
    computed from the value lengths without expanding anything."""
    import pyarrow as pa
    import pyarrow.compute as pc

    total = 0
    for column in batch.columns:
        if pa.types.is_dictionary(column.type):
            values = column.dictionary
            if pa.types.is_binary(values.type) or pa.types.is_string(values.type) \
                    or pa.types.is_large_binary(values.type) or pa.types.is_large_string(values.type):
                lengths = pc.fill_null(pc.binary_length(values), 0)
                per_row = pc.fill_null(pc.take(lengths, column.indices), 0)
                total += int(pc.sum(per_row).as_py() or 0) + 8 * len(column)
            else:
                total += values.type.bit_width // 8 * len(column) if hasattr(values.type, "bit_width") \
                    else column.nbytes
        else:
            total += column.nbytes
    return total


def _footer_bytes(parquet: Any) -> int:
    """Uncompressed bytes of every column chunk, from the Parquet footer (before any page is read)."""
    meta = parquet.metadata
    return sum(meta.row_group(g).column(c).total_uncompressed_size
               for g in range(meta.num_row_groups) for c in range(meta.num_columns))


def _depth(value: Any, limit: int) -> int:
    """Nesting depth of a parsed JSON value, counted up to ``limit + 1`` (no recursion)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return deepest


def _manifest_bytes(root: Path) -> tuple[bytes, str]:
    """The manifest's bytes and their SHA-256, read once (the hash and the parsed manifest are of the same bytes)."""
    path = root / MANIFEST
    if path.is_symlink():
        raise SnapshotError(f"{MANIFEST}: is a symbolic link (refused)")
    if not path.is_file() or path.resolve().parent != root:
        raise SnapshotError(f"{MANIFEST}: missing or not a plain file in the snapshot folder")
    if path.stat().st_size > MAX_MANIFEST_BYTES:
        raise SnapshotError(f"{MANIFEST}: larger than {MAX_MANIFEST_BYTES:,} bytes (refused)")
    raw = path.read_bytes()
    return raw, hashlib.sha256(raw).hexdigest()


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise SnapshotError(f"{MANIFEST}: duplicate key {key[:60]!r}")
        out[key] = value
    return out


def _parse_manifest(raw: bytes) -> dict[str, Any]:
    """The manifest as an object; :class:`SnapshotError` (one line) for anything else: bad UTF-8 or JSON, a
    duplicate key, nesting deeper than :data:`MAX_MANIFEST_DEPTH`, a top level that is not an object."""
    try:
        manifest = json.loads(raw.decode("utf-8"), object_pairs_hook=_unique)
    except SnapshotError:
        raise
    except RecursionError:
        raise SnapshotError(f"{MANIFEST}: nested too deeply (refused)") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise SnapshotError(f"{MANIFEST}: not valid UTF-8 JSON: {str(exc).splitlines()[0][:120]}") from None
    if not isinstance(manifest, dict):
        raise SnapshotError(f"{MANIFEST}: not a JSON object")
    if _depth(manifest, MAX_MANIFEST_DEPTH) > MAX_MANIFEST_DEPTH:
        raise SnapshotError(f"{MANIFEST}: nested deeper than {MAX_MANIFEST_DEPTH} levels (refused)")
    return manifest


def _anchor(manifest_sha256: str | None) -> str | None:
    """The published manifest hash, normalised; a malformed one is refused (never silently ignored)."""
    if manifest_sha256 is None:
        return None
    if not re.fullmatch(r"[0-9a-fA-F]{64}", manifest_sha256.strip()):
        raise SnapshotError("--manifest-sha256 must be 64 hexadecimal digits")
    return manifest_sha256.strip().lower()


def verify_snapshot(snapshot_dir: Path, manifest_sha256: str | None = None, *, max_expansion: int = MAX_EXPANSION,
                    max_decoded_bytes: int = MAX_DECODED_BYTES, workdir: Path | None = None) -> SnapshotReport:
    """Check every file against the manifest: ``{"ok": bool, "problems": [...], "files": n, "authenticated"}``.

    ``manifest_sha256`` (the hash published on the site's downloads page) anchors the manifest; without it the
    files are checked against the manifest, but nothing says the manifest itself is the published one.
    ``snapshot_dir`` may also be the snapshot's archive (``FOLDER.tar.gz`` from the Downloads page): it is unpacked
    under the importer's bounds into a temporary folder in ``workdir`` (:func:`grebench.store._archive.unpacked`);
    an archive that cannot be unpacked is reported as a problem.
    """
    if Path(snapshot_dir).is_file():
        from grebench.store._archive import unpacked

        try:
            with unpacked(Path(snapshot_dir), max_expansion=max_expansion, max_decoded_bytes=max_decoded_bytes,
                          workdir=workdir) as folder:
                report = _verify(folder, manifest_sha256)
        except SnapshotError as exc:
            return {"path": str(snapshot_dir), "authenticated": False, "ok": False, "problems": [str(exc)],
                    "files": 0}
        report["path"] = str(snapshot_dir)
        return report
    return _verify(Path(snapshot_dir), manifest_sha256)


def _verify(snapshot_dir: Path, manifest_sha256: str | None) -> SnapshotReport:
    import pyarrow.parquet as pq

    root = Path(snapshot_dir).resolve()
    problems: list[str] = []
    path_text = str(root)
    try:
        anchor = _anchor(manifest_sha256)
    except SnapshotError as exc:
        return {"path": path_text, "authenticated": False, "ok": False, "problems": [str(exc)], "files": 0}
    try:
        raw, digest = _manifest_bytes(root)
        if anchor is not None and digest != anchor:
            # checked before anything is parsed or any member looked at: nothing of an unpublished snapshot is read
            return {"path": path_text, "authenticated": False, "ok": False, "files": 0, "manifest_sha256": digest,
                    "problems": [f"{MANIFEST}: SHA-256 differs from the published one (not the published snapshot)"]}
        manifest = _parse_manifest(raw)
    except (OSError, ValueError) as exc:
        return {"path": path_text, "authenticated": False, "ok": False,
                "problems": [f"{MANIFEST}: cannot read: {str(exc)[:200]}"], "files": 0}
    if manifest.get("format") != FORMAT:
        problems.append(f"{MANIFEST}: unknown format {str(manifest.get('format'))[:60]!r}")
    files = manifest.get("files")
    if not isinstance(files, dict):
        problems.append(f"{MANIFEST}: 'files' is not an object")
        files = {}
    for name, info in files.items():
        path, why = _member(root, name, info)
        if path is None:
            problems.append(str(why))
            continue
        assert isinstance(info, dict)
        if file_sha256(path) != info.get("sha256"):
            problems.append(f"{name}: SHA-256 mismatch (file changed)")
            continue
        try:
            rows = pq.ParquetFile(path).metadata.num_rows
        except Exception as exc:  # pyarrow raises several types for a bad file
            problems.append(f"{name}: not a readable Parquet file ({type(exc).__name__})")
            continue
        declared_rows = info.get("rows")
        if isinstance(declared_rows, bool) or rows != declared_rows:
            problems.append(f"{name}: {rows} rows, manifest says {str(declared_rows)[:40]}")
    readme = root / README
    if readme.is_symlink() or not readme.is_file() or file_sha256(readme) != manifest.get("readme_sha256"):
        problems.append(f"{README}: missing or changed" + (" (a symbolic link)" if readme.is_symlink() else ""))
    extra = sorted(p.name for p in root.iterdir() if p.name not in files and p.name not in (MANIFEST, README))
    problems += [f"{name[:60]}: not in the manifest" for name in extra]
    for key in ("venue_id", "product_version"):
        if not isinstance(manifest.get(key), str):
            problems.append(f"{MANIFEST}: {key!r} is missing or not a string")
    ok = not problems
    return {"path": path_text, "authenticated": ok and anchor is not None, "ok": ok, "problems": problems,
            "files": len(files), "manifest_sha256": digest,
            "venue_id": manifest.get("venue_id"), "product_version": manifest.get("product_version")}


def _columns(store: Store, table: str) -> list[str]:
    return [r[0] for r in store.con.execute(
        "SELECT column_name FROM duckdb_columns() WHERE database_name = current_database() AND table_name = ? "
        "ORDER BY column_index", [table]).fetchall()]


def _primary_key(store: Store, table: str) -> list[str]:
    for kind, cols in store.con.execute(
            "SELECT constraint_type, constraint_column_names FROM duckdb_constraints() WHERE table_name = ?",
            [table]).fetchall():
        if kind == "PRIMARY KEY":
            return list(cols)
    return []


def import_snapshot(store: Store, snapshot_dir: Path, manifest_sha256: str | None = None, *,
                    max_expansion: int = MAX_EXPANSION, max_decoded_bytes: int = MAX_DECODED_BYTES,
                    workdir: Path | None = None) -> dict[str, Any]:
    """Load a verified snapshot into the store; rows already there are kept, so importing twice adds nothing.

    ``snapshot_dir`` is the snapshot's folder or its archive (``FOLDER.tar.gz`` as the Downloads page offers it),
    unpacked under the same bounds into a temporary folder in ``workdir`` (default: beside the store's file, else
    the system temp dir) and removed after (:func:`grebench.store._archive.unpacked`).

    With ``manifest_sha256`` the manifest must be the published one; the report says ``authenticated``.  The whole
    snapshot may decode to :func:`import_bound` of its files' total size (and each member to its manifest's
    ``decoded_bytes``, :func:`decoded_bound`, where it declares one).  Members are decoded :data:`BATCH_ROWS` rows
    at a time with dictionary-encoded text kept as dictionaries, and each batch's expanded size is added *before*
    the batch is kept, so a refusal comes at most one small batch past the bound, and a member holding more rows
    than its manifest says is refused too.  The whole import is one transaction: a refusal writes nothing.  Every
    refusal is one :class:`SnapshotError` line.
    """
    if Path(snapshot_dir).is_file():
        from grebench.store._archive import unpacked

        archive = Path(snapshot_dir)
        if workdir is None and store.path is not None:
            workdir = store.path.parent
        with unpacked(archive, max_expansion=max_expansion, max_decoded_bytes=max_decoded_bytes,
                      workdir=workdir) as folder:
            try:
                report = import_snapshot(store, folder, manifest_sha256, max_expansion=max_expansion,
                                         max_decoded_bytes=max_decoded_bytes)
            except SnapshotError as exc:  # said of the archive, not of a temporary folder that is gone
                raise SnapshotError(str(exc).replace(str(folder.resolve()), str(archive))
                                    .replace(str(folder), str(archive))) from None
        return {**report, "path": str(archive)}
    import duckdb
    import pyarrow as pa

    try:
        return _import(store, snapshot_dir, manifest_sha256, max_expansion, max_decoded_bytes)
    except SnapshotError:
        raise
    except (pa.ArrowException, duckdb.Error, OSError, ValueError, TypeError, KeyError, RecursionError,
            MemoryError) as exc:
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        raise SnapshotError(f"{snapshot_dir}: refused, nothing imported: {type(exc).__name__}: {first}") from None


def _text_columns(schema: Any) -> list[str]:
    """Columns pyarrow can hand over as dictionaries (text and binary): read so, a repeated value is decoded once."""
    import pyarrow as pa

    kinds = (pa.types.is_string, pa.types.is_large_string, pa.types.is_binary, pa.types.is_large_binary)
    return [f.name for f in schema if any(kind(f.type) for kind in kinds)]


def _insert(con: Any, table: str, cols: str, values: str, keyed: bool, batches: list[Any]) -> None:
    """Insert checked record batches into ``table`` (keyed: rows whose key is there are kept; else set difference);
    ``values`` selects ``cols`` from the batches, with ``?`` for the :data:`FORCED` columns."""
    import pyarrow as pa

    forced = list(FORCED.get(table, {}).values())
    con.register("grebench_snapshot_src", pa.Table.from_batches(batches))
    try:
        if keyed:
            con.execute(f"INSERT OR IGNORE INTO {ident(table)} ({cols}) SELECT {values} FROM grebench_snapshot_src",
                        forced)
        else:  # no key: add only rows not already present (set difference on every column)
            con.execute(f"INSERT INTO {ident(table)} ({cols}) SELECT {values} FROM grebench_snapshot_src "
                        f"EXCEPT SELECT {cols} FROM {ident(table)}", forced)
    finally:
        con.unregister("grebench_snapshot_src")


#: The tables whose rows say which papers, reviews and boards a snapshot holds (imported first): every other row
#: of the snapshot must name only those, and its venue-year (see :func:`_outside`).
DEFINES: dict[str, str] = {"papers": "paper_id", "reviews": "review_id", "boards": "board_id"}


def _outside(table: str, batch: Any, own: dict[str, set[str]]) -> str | None:
    """Why a batch names something outside the snapshot's own venue-year (None: it does not).  A snapshot speaks
    only of the venue-year its manifest names: a row about another venue, or about a paper, review or board the
    snapshot does not hold itself, would add to or change what this store says about its own papers (an extra
    score, split, sample or vote for a paper it ingested itself).  ``own`` grows as the defining tables are read."""
    defined = DEFINES.get(table)
    for column in batch.schema.names:
        if column not in own or column == defined:
            continue
        values = {v for v in batch.column(column).unique().to_pylist() if v is not None}
        stray = sorted(str(v) for v in values - own[column])
        if stray:
            return (f"a row names {column} {stray[0][:80]!r}, which is not this snapshot's own (a snapshot of "
                    f"{next(iter(own['venue_id']))[:80]} speaks only of its venue-year's papers, reviews and boards)")
    if defined is not None:
        own[defined].update(str(v) for v in batch.column(defined).unique().to_pylist() if v is not None)
    return None


def _refusal(name: str, size: int, rows: int, why: str) -> SnapshotError:
    """One refusal line: the member, why, and how far import had got (all rolled back)."""
    return SnapshotError(f"{name}: {why}; refused after {size:,} bytes, {rows:,} rows: nothing imported")


def _import(store: Store, snapshot_dir: Path, manifest_sha256: str | None, max_expansion: int,
            max_decoded_bytes: int) -> dict[str, Any]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    report = verify_snapshot(snapshot_dir, manifest_sha256)
    if not report["ok"]:
        problems = report["problems"]
        shown = "; ".join(problems[:10]) + (f"; ... and {len(problems) - 10} more" if len(problems) > 10 else "")
        raise SnapshotError(f"{snapshot_dir}: verification failed: {shown}")
    root = Path(snapshot_dir).resolve()
    raw, digest = _manifest_bytes(root)
    if digest != report["manifest_sha256"]:
        raise SnapshotError(f"{MANIFEST}: changed while it was being imported (refused)")
    manifest = _parse_manifest(raw)
    present = _tables(store)
    members: list[tuple[str, dict[str, Any], Path]] = []
    for name, info in manifest["files"].items():
        path, why = _member(root, name, info)
        if path is None:
            raise SnapshotError(str(why))
        members.append((name, info, path))
    # the importer's bound: from the files' sizes as measured here, over all members together
    total_bound = import_bound(sum(path.stat().st_size for _, _, path in members), max_expansion, max_decoded_bytes)
    total = 0
    added: dict[str, int] = {}
    decoded: dict[str, int] = {}
    members.sort(key=lambda m: (m[0].removesuffix(".parquet") not in DEFINES, m[0]))  # what rows may name, first
    own: dict[str, set[str]] = {"venue_id": {str(manifest["venue_id"])}, **{c: set() for c in DEFINES.values()}}
    with store.transaction() as con:
        for name, info, path in members:
            table = name.removesuffix(".parquet")
            if table not in present:
                raise SnapshotError(f"{name}: this store has no table {table!r} (upgrade grebench)")
            blob = path.read_bytes()  # hashed and parsed from the same bytes: a file swapped after verify is refused
            if hashlib.sha256(blob).hexdigest() != info.get("sha256"):
                raise SnapshotError(f"{name}: changed while it was being imported (refused)")
            declared = decoded_bound(info)
            parquet = pq.ParquetFile(pa.BufferReader(blob))
            schema = parquet.schema_arrow
            names = list(schema.names)
            doubled = sorted({c for c in names if names.count(c) > 1})
            if doubled:
                raise SnapshotError(f"{name}: duplicate column name(s) {', '.join(repr(c[:40]) for c in doubled[:5])}")
            known = _columns(store, table)
            unknown = [c for c in names if c not in known]
            if unknown:
                raise SnapshotError(f"{name}: column(s) not in table {table}: "
                                    f"{', '.join(repr(c[:40]) for c in unknown[:5])}")
            cols = ", ".join(ident(c) for c in known if c in names)
            values = cols
            if table in FORCED:  # columns a snapshot never sets: another install's call never serves this one
                kept = [c for c in known if c in names and c not in FORCED[table]]
                cols = ", ".join([*(ident(c) for c in kept), *(ident(c) for c in FORCED[table])])
                values = ", ".join([*(ident(c) for c in kept), *("?" for _ in FORCED[table])])
            keyed = bool(_primary_key(store, table))
            most_rows = int(info["rows"])
            if any(pa.types.is_nested(t) for t in schema.types):
                raise SnapshotError(f"{name}: nested column types are not part of a snapshot (refused)")

            limit = total_bound - total if declared is None else min(total_bound - total, declared)
            why = (f"the snapshot decodes to more than the importer's bound of {total_bound:,} bytes"
                   if declared is None or total_bound - total <= declared
                   else f"decodes to more than {declared:,} bytes (its manifest's decoded_bytes)")
            stored = _footer_bytes(parquet)
            if stored > limit:
                raise _refusal(name, total, 0, f"{why} (its pages alone hold {stored:,})")
            before = int(cast("tuple[Any, ...]", con.execute(f"SELECT count(*) FROM {ident(table)}").fetchone())[0])
            rows = size = 0
            pending: list[Any] = []
            pending_rows = pending_size = 0
            parquet = pq.ParquetFile(pa.BufferReader(blob), read_dictionary=_text_columns(schema))
            for batch in parquet.iter_batches(batch_size=BATCH_ROWS):
                grown = _dense_nbytes(batch)  # counted before the batch is kept: the bound holds inside a member
                if rows + batch.num_rows > most_rows:
                    raise _refusal(name, total + size, rows,
                                 f"holds more than the {most_rows:,} rows its manifest says")
                if size + grown > limit:
                    raise _refusal(name, total + size, rows, why)
                stray = _outside(table, batch, own)
                if stray:
                    raise _refusal(name, total + size, rows, stray)
                rows, size = rows + batch.num_rows, size + grown
                pending.append(batch)
                pending_rows, pending_size = pending_rows + batch.num_rows, pending_size + grown
                if pending_rows >= INSERT_ROWS or pending_size >= INSERT_BYTES:
                    _insert(con, table, cols, values, keyed, pending)
                    pending, pending_rows, pending_size = [], 0, 0
            if pending:
                _insert(con, table, cols, values, keyed, pending)
            after = int(cast("tuple[Any, ...]", con.execute(f"SELECT count(*) FROM {ident(table)}").fetchone())[0])
            added[table] = after - before
            decoded[table] = size
            total += size
    store.checkpoint()
    return {"venue_id": manifest["venue_id"], "path": str(root), "rows_added": added, "decoded_bytes": decoded,
            "decoded_bound": total_bound, "product_version": manifest["product_version"],
            "authenticated": report["authenticated"], "manifest_sha256": digest}


def record_snapshot(store: Store, manifest: SnapshotManifest, reason: str) -> None:
    """Register a cut snapshot (the scheduler cuts each venue-year once, on ``snapshot_date``)."""
    total = sum(f["rows"] for f in manifest["files"].values())
    with store.transaction() as con:
        con.execute("DELETE FROM snapshots WHERE path = ?", [manifest["path"]])
        con.execute("INSERT INTO snapshots VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [manifest["venue_id"], manifest["venue_year"], manifest["slug"], manifest["path"],
                     manifest["manifest_sha256"], len(manifest["files"]), total, reason, utcnow()])

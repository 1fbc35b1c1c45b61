"""Board versions: every publish of the boards is kept, dated and immutable (the ``board_versions`` table).

A version id is the publish time (UTC) and the first 8 hex digits of the boards' SHA-256:
``20261126T193005Z-1a2b3c4d``.  A publish whose boards equal the latest version's adds nothing: the latest version
stays (a site rebuilt for another reason, or the same board computed again, is not a new version; a return to an
older content after a change is a new version, since readers saw the change).  A version's ``leaderboard.json``
and page are rendered once, stored with it and written verbatim by every later build, so a refresh never rewrites
what a reader saw at a version's URL.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta
from typing import Any, NotRequired, TypedDict, cast

import jinja2

from grebench.site._changes import VersionChanges, board_key, changes_text, version_changes
from grebench.store import REFERENCE, Store, naive_utc

#: Where the versions live in the site (``versions/<id>/index.html`` and ``versions/<id>/leaderboard.json``).
VERSIONS_DIR = "versions"


class VersionListing(TypedDict):
    """A published version without its texts (:func:`versions`)."""

    version_id: str
    published_at: datetime
    content_sha256: str
    previous_id: str | None


class BoardVersion(TypedDict):
    """A ``board_versions`` row with its texts, and its ``changes_json`` decoded as ``changes`` (:func:`version`);
    ``origin`` is absent from a store older than that column."""

    version_id: str
    published_at: datetime
    content_sha256: str
    previous_id: str | None
    leaderboard_json: str
    basis_json: str
    changes_json: str | None
    page_html: str
    origin: NotRequired[str | None]
    changes: VersionChanges | None


class ReviewVersion(TypedDict):
    """A reference review's paper and latest version (:func:`board_basis`'s ``references``)."""

    paper_id: str
    version: int


class BoardBasis(TypedDict):
    """What the stored ``all`` boards stand on (:func:`board_basis`)."""

    papers: dict[str, list[str]]
    references: dict[str, ReviewVersion]
    settings: dict[str, str]


def content_sha256(leaderboard: dict[str, Any]) -> str:
    """SHA-256 of what a version publishes: ``leaderboard.json``'s schema version and boards (not its stamps)."""
    blob = json.dumps({"schema_version": leaderboard["schema_version"], "boards": leaderboard["boards"]},
                      sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def version_id(published_at: datetime, digest: str) -> str:
    """``20261126T193005Z-1a2b3c4d``: sortable by time, file-name safe, distinct for distinct content."""
    return f"{published_at:%Y%m%dT%H%M%SZ}-{digest[:8]}"


def version_href(vid: str, name: str = "leaderboard.json") -> str:
    """A version's file, relative to the site root."""
    return f"{VERSIONS_DIR}/{vid}/{name}"


def has_versions(store: Store) -> bool:
    """Whether the store (or an export) has the versions table."""
    return bool(store.scalar("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'board_versions'"))


def board_basis(store: Store) -> BoardBasis:
    """What the stored ``all`` boards stand on, for explaining the next change: ``papers`` (venue -> the papers
    with scores on its boards), ``references`` (review id -> its paper and latest version, for those papers) and
    ``settings`` (board key -> bootstrap samples and seed)."""
    papers: dict[str, list[str]] = {}
    for r in store.rows("""SELECT DISTINCT b.venue_id, s.paper_id FROM boards b
                           JOIN papers p ON p.venue_id = b.venue_id
                           JOIN scores s ON s.paper_id = p.paper_id AND s.metric = b.metric
                                        AND s.estimator = b.estimator
                           WHERE b.scope = 'all' ORDER BY b.venue_id, s.paper_id"""):
        papers.setdefault(r["venue_id"], []).append(r["paper_id"])
    ids = [p for ps in papers.values() for p in ps]
    refs = store.rows("""SELECT review_id, paper_id, latest_version AS version FROM reviews
                         WHERE paper_id IN (SELECT unnest(?::VARCHAR[])) ORDER BY review_id""", [ids]) if ids else []
    settings = {board_key(b): f"{b['bootstrap_samples']} samples, seed {b['seed']}" for b in store.rows(
        "SELECT venue_id, metric, estimator, preprocessor, bootstrap_samples, seed FROM boards WHERE scope = 'all'")}
    return {"papers": papers, "references": {r["review_id"]: {"paper_id": r["paper_id"], "version": r["version"]}
                                             for r in refs}, "settings": settings}


def versions(store: Store) -> list[VersionListing]:
    """Every published version, newest first: id, time, content hash, previous id (not the stored texts)."""
    if not has_versions(store):
        return []
    return cast(list[VersionListing], store.rows("""SELECT version_id, published_at, content_sha256, previous_id
                                                    FROM board_versions ORDER BY published_at DESC, version_id DESC"""))


def _origin_column(store: Store) -> bool:
    return "origin" in store.columns("board_versions")


def version(store: Store, vid: str | None = None, as_of: datetime | None = None,
            own: bool = False) -> BoardVersion | None:
    """One version with its texts: ``vid``, else the last published at or before ``as_of`` (UTC; an aware time is
    converted), else the latest.  ``own``: only versions this store published (not those a snapshot brought)."""
    if not has_versions(store):
        return None
    mine = " AND origin = 'site'" if own and _origin_column(store) else ""
    if vid is not None:
        rows = store.rows("SELECT * FROM board_versions WHERE version_id = ?", [vid])
    else:
        rows = store.rows(f"SELECT * FROM board_versions WHERE published_at <= coalesce(?, published_at){mine} "
                          "ORDER BY published_at DESC, version_id DESC LIMIT 1",
                          [None if as_of is None else naive_utc(as_of)])
    if not rows:
        return None
    row = rows[0]
    row["changes"] = json.loads(row["changes_json"]) if row.get("changes_json") else None
    return cast(BoardVersion, row)  # every column of board_versions, then changes


def publish_version(store: Store, leaderboard: dict[str, Any], published_at: datetime,
                    env: jinja2.Environment) -> BoardVersion | None:
    """Record the boards of ``leaderboard`` (see :func:`grebench.site.leaderboard_json`) as a new version, or keep
    the latest one when its boards are the same; return the version (:func:`version`; None when there is none).
    Never rewrites a row.  No boards is no version: a store with nothing scored yet (a replay's first days, a
    first ``serve`` cycle) publishes nothing, so ``--as-of`` never lands on an empty board.
    The version keeps the ``provenance`` it was first published with: what produced its numbers (a later build
    with other code but the same boards is no new version, see :func:`content_sha256`).  It follows the latest
    version this store published itself (one a snapshot brought is never its ``previous``)."""
    digest = content_sha256(leaderboard)
    latest = version(store, own=True)
    if not leaderboard["boards"] or (latest is not None and latest["content_sha256"] == digest):
        return latest
    # the same boards as the latest version of any origin (one a snapshot brought, this store's own included): no
    # new version either; a second build once published a copy of it, whose changes read "the first published
    # version" (issue 64)
    newest = version(store)
    if newest is not None and newest["content_sha256"] == digest:
        return newest
    if latest is not None and published_at <= latest["published_at"]:  # a clock stepped back: keep the order
        published_at = latest["published_at"] + timedelta(microseconds=1)
    vid = version_id(published_at, digest)
    basis = board_basis(store)
    previous = None if latest is None else {"id": latest["version_id"], "href": version_href(latest["version_id"]),
                                            "published_at": latest["published_at"].isoformat()}
    changes = version_changes(
        None if latest is None else {"version_id": latest["version_id"], "basis": json.loads(latest["basis_json"]),
                                     "boards": json.loads(latest["leaderboard_json"])["boards"]},
        {"version_id": vid, "basis": basis, "boards": leaderboard["boards"]})
    payload = {"schema_version": leaderboard["schema_version"], "generated_at": published_at.isoformat(),
               "version": {"id": vid, "published_at": published_at.isoformat(), "content_sha256": digest,
                           "href": version_href(vid), "page": version_href(vid, "index.html"), "previous": previous},
               "boards": leaderboard["boards"], "provenance": leaderboard.get("provenance")}
    text = json.dumps(payload, indent=2, ensure_ascii=False, default=str)
    html = env.get_template("version.html").render(
        root="../../", built_at=published_at.isoformat() + "Z", v=payload["version"], boards=payload["boards"],
        changes=changes, changes_text=changes_text(changes), prov=payload["provenance"])
    store.con.execute("INSERT INTO board_versions (version_id, published_at, content_sha256, previous_id, "
                      "leaderboard_json, basis_json, changes_json, page_html) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                      [vid, published_at, digest, None if latest is None else latest["version_id"], text,
                       json.dumps(basis, sort_keys=True), json.dumps(changes, default=str), html])
    found = version(store, vid)
    assert found is not None
    return found


def withdraw_since(store: Store, before: BoardVersion | None) -> int:
    """Delete the versions this store published after ``before`` (None: all of its own), how many: a build that
    recorded a version and then stopped or failed never put it on the site, so no one has seen it (the writer
    lock rules out anyone else publishing meanwhile)."""
    if not has_versions(store):
        return 0
    mine = " AND origin = 'site'" if _origin_column(store) else ""
    after = [] if before is None else [before["published_at"]]
    where = ("published_at > ?" if before is not None else "TRUE") + mine
    count = int(store.scalar(f"SELECT count(*) FROM board_versions WHERE {where}", after) or 0)
    if count:
        store.con.execute(f"DELETE FROM board_versions WHERE {where}", after)
    return count


def version_boards(ver: BoardVersion) -> list[dict[str, Any]]:
    """A version's boards as :func:`grebench.scoring.stored_boards` gives them (for :func:`board_text`): the row
    fields of ``leaderboard.json``, a reference row's role, the sample's facts (in headline order, as published)."""
    out = []
    for b in json.loads(ver["leaderboard_json"])["boards"]:
        sample = b.get("sample") or {}
        rows = [{**r, "estimator": b["estimator"], "preprocessor": b["preprocessor"], "metric": b["metric"],
                 **({"role": REFERENCE} if r.get("status") == "reference" else {})} for r in b["rows"]]
        band = b.get("human_band")
        out.append({**{k: b[k] for k in ("venue_id", "venue", "metric", "estimator", "preprocessor")},
                    "rows": rows, "papers": sample.get("papers") or 0, "papers_eligible": sample.get("eligible"),
                    "seed": sample.get("seed"), "sample": {} if sample.get("sampled") else None,
                    "human_score": None if band is None else band.get("score"),
                    "human_band": band, "proxy": b.get("proxy", False)})
    return out

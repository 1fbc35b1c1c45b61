"""Linked versions of a paper (the same work at another venue or year) and the one "public since" date.

The contamination window, sealing and the copy check all ask the same question of a paper: since when could anyone
have read reviews of this work?  :func:`public_since` is the one answer (the ``paper_public_since`` view: the earliest
``reviews_public_at`` of the paper and every version linked to it, directly or through others).  Links are written by
:func:`put_links` (computed ones replaced, explicit ones kept) and read by :func:`linked_versions`.

A pair whose evidence reaches only the "possible" bar is a :class:`LinkFlag` (issue 62): written by
:func:`put_flags`, listed by :func:`link_flags` with its reason, and decided by the operator (:func:`decide_link`).
Until decided ``distinct`` it counts as a link wherever versions count (the ``paper_versions`` view, migration
m0032): a possible resubmission's generations are not sealed, and the copy check reads the other paper's reviews.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from grebench.store._records import utcnow

if TYPE_CHECKING:
    from grebench.store._store import Store

EXPLICIT = "explicit"  # the source named the other version (archive ``previous_versions``, an OpenReview field)
#: SQL for a paper's public-since date, to join on ``paper_id``: every contamination query reads this, not
#: ``papers.reviews_public_at``.
PUBLIC_SINCE_VIEW = "paper_public_since"


@dataclass(frozen=True)
class Link:
    """Two papers found to be versions of the same work; how, and how similar (None for explicit links)."""

    paper_id: str
    linked_id: str
    method: str
    title_similarity: float | None = None
    abstract_similarity: float | None = None

    def ordered(self) -> Link:
        """The same link with the smaller id first (one row per pair)."""
        if self.paper_id <= self.linked_id:
            return self
        return Link(self.linked_id, self.paper_id, self.method, self.title_similarity, self.abstract_similarity)


def public_since(store: Store, paper_ids: Collection[str] | None = None) -> dict[str, datetime | None]:
    """paper id → the earliest date the reviews of this work (the paper or any linked version) were public."""
    sql = f"SELECT paper_id, public_since FROM {PUBLIC_SINCE_VIEW}"
    params: list[object] = []
    if paper_ids is not None:
        sql += " WHERE paper_id IN (SELECT unnest(?::VARCHAR[]))"
        params.append(sorted(set(paper_ids)))
    return {r["paper_id"]: r["public_since"] for r in store.rows(sql, params)}


def linked_versions(store: Store, paper_ids: Collection[str]) -> dict[str, list[str]]:
    """paper id → the ids of its other stored or named versions (transitively linked), sorted."""
    out: dict[str, list[str]] = {}
    for r in store.rows("SELECT paper_id, version_id FROM paper_versions WHERE paper_id IN "
                        "(SELECT unnest(?::VARCHAR[])) ORDER BY paper_id, version_id", [sorted(set(paper_ids))]):
        out.setdefault(r["paper_id"], []).append(r["version_id"])
    return out


def put_links(store: Store, links: Iterable[Link], replace_computed_of: Collection[str] = (),
              now: datetime | None = None) -> int:
    """Store links in the caller's transaction; the number of new rows.

    The computed (non-explicit) links touching ``replace_computed_of`` are deleted first, so recomputing them
    replaces the old answer; explicit links are never removed by a recomputation, and a computed link does not
    overwrite an explicit one.  Generations that were sealed before the earliest public date of their paper's work
    are unsealed (:func:`unseal_linked`).
    """
    now = now or utcnow()
    if replace_computed_of:
        store.con.execute(f"DELETE FROM paper_links WHERE method <> '{EXPLICIT}' AND (paper_id IN "
                          "(SELECT unnest(?::VARCHAR[])) OR linked_id IN (SELECT unnest(?::VARCHAR[])))",
                          [sorted(replace_computed_of)] * 2)
    distinct = _decided(store, "distinct")
    rows = {}
    for link in (x.ordered() for x in links if x.paper_id != x.linked_id):
        if link.method != EXPLICIT and (link.paper_id, link.linked_id) in distinct:
            continue  # the operator decided these are different works
        key = (link.paper_id, link.linked_id)
        if key not in rows or link.method == EXPLICIT:
            rows[key] = link
    written = 0
    for link in rows.values():
        stored = store.scalar("SELECT method FROM paper_links WHERE paper_id = ? AND linked_id = ?",
                              [link.paper_id, link.linked_id])
        if stored == EXPLICIT or (stored is not None and link.method != EXPLICIT):
            continue  # already linked: an explicit link is never replaced, and a rerun writes nothing
        if stored is not None:
            store.con.execute("DELETE FROM paper_links WHERE paper_id = ? AND linked_id = ?",
                              [link.paper_id, link.linked_id])
        written += 1
        store.con.execute("INSERT INTO paper_links VALUES (?, ?, ?, ?, ?, ?)",
                          [link.paper_id, link.linked_id, link.method, link.title_similarity,
                           link.abstract_similarity, now])
    unseal_linked(store)
    return written


def unseal_linked(store: Store) -> int:
    """Unseal generations made on or after their paper's public-since date; how many changed.

    A generation is sealed when it was made before the paper's reviews were public.  A link found later can move
    that date back (an earlier version's reviews were public first): the generation was then never sealed.
    """
    before = int(store.scalar("SELECT count(*) FROM generations WHERE sealed") or 0)
    store.con.execute(f"UPDATE generations SET sealed = false FROM {PUBLIC_SINCE_VIEW} ps "
                      "WHERE ps.paper_id = generations.paper_id AND generations.sealed "
                      "AND ps.public_since IS NOT NULL AND generations.generated_at >= ps.public_since")
    return before - int(store.scalar("SELECT count(*) FROM generations WHERE sealed") or 0)


SAME, DISTINCT = "same", "distinct"  # the operator's decisions on a flagged pair


@dataclass(frozen=True)
class LinkFlag:
    """Two papers that may be versions of one work: evidence above the "possible" bar, not enough to link.

    ``reason`` is what the operator reads (which evidence, how strong, against which bars); ``evidence`` the
    similarities behind it.
    """

    paper_id: str
    linked_id: str
    reason: str
    evidence: dict[str, float | int | None] = field(default_factory=dict)

    def ordered(self) -> LinkFlag:
        """The same flag with the smaller id first (one row per pair)."""
        if self.paper_id <= self.linked_id:
            return self
        return LinkFlag(self.linked_id, self.paper_id, self.reason, self.evidence)


def _decided(store: Store, decision: str) -> set[tuple[str, str]]:
    return {(r["paper_id"], r["linked_id"]) for r in store.rows(
        "SELECT paper_id, linked_id FROM paper_link_flags WHERE decision = ?", [decision])}


def put_flags(store: Store, flags: Iterable[LinkFlag], replace_of: Collection[str] = (),
              now: datetime | None = None) -> int:
    """Store possible links in the caller's transaction; the number of new rows.

    Undecided flags touching ``replace_of`` are recomputed (deleted first); a decided pair keeps its decision and is
    not flagged again; a pair already linked is not flagged.  Generations the new flags show may not be sealed are
    unsealed (:func:`unseal_linked`).
    """
    now = now or utcnow()
    if replace_of:
        store.con.execute("DELETE FROM paper_link_flags WHERE decision IS NULL AND (paper_id IN "
                          "(SELECT unnest(?::VARCHAR[])) OR linked_id IN (SELECT unnest(?::VARCHAR[])))",
                          [sorted(replace_of)] * 2)
    known = {(r["paper_id"], r["linked_id"]) for r in store.rows(
        "SELECT paper_id, linked_id FROM paper_link_flags UNION SELECT paper_id, linked_id FROM paper_links")}
    rows: dict[tuple[str, str], LinkFlag] = {}
    for flag in (x.ordered() for x in flags if x.paper_id != x.linked_id):
        if (flag.paper_id, flag.linked_id) not in known:
            rows.setdefault((flag.paper_id, flag.linked_id), flag)
    for flag in rows.values():
        store.con.execute("INSERT INTO paper_link_flags VALUES (?, ?, ?, ?, ?, NULL, NULL, NULL)",
                          [flag.paper_id, flag.linked_id, flag.reason, json.dumps(flag.evidence, sort_keys=True),
                           now])
    unseal_linked(store)
    return len(rows)


def link_flags(store: Store, paper_ids: Collection[str] | None = None,
               undecided_only: bool = False) -> list[dict[str, object]]:
    """The flagged pairs (touching these papers; all when None), with titles, reason and decision."""
    sql = ("SELECT f.paper_id, a.venue AS paper_venue, a.title AS paper_title, f.linked_id, b.venue AS linked_venue, "
           "b.title AS linked_title, f.reason, f.evidence_json, f.flagged_at, f.decision, f.decided_at, "
           "f.decision_note FROM paper_link_flags f LEFT JOIN papers a ON a.paper_id = f.paper_id "
           "LEFT JOIN papers b ON b.paper_id = f.linked_id WHERE true")
    params: list[object] = []
    if paper_ids is not None:
        sql += " AND (f.paper_id IN (SELECT unnest(?::VARCHAR[])) OR f.linked_id IN (SELECT unnest(?::VARCHAR[])))"
        params += [sorted(paper_ids)] * 2
    if undecided_only:
        sql += " AND f.decision IS NULL"
    return store.rows(sql + " ORDER BY f.paper_id, f.linked_id", params)


def held_reasons(store: Store, paper_ids: Collection[str]) -> dict[str, list[str]]:
    """paper id → why its reviews may not count as sealed: each undecided possible link, "possible earlier version
    OTHER (VENUE): REASON"."""
    out: dict[str, list[str]] = {}
    for r in link_flags(store, paper_ids, undecided_only=True):
        for own, other, venue in ((r["paper_id"], r["linked_id"], r["linked_venue"]),
                                  (r["linked_id"], r["paper_id"], r["paper_venue"])):
            if own in paper_ids:
                out.setdefault(str(own), []).append(f"possible other version {other} ({venue}), undecided: "
                                                    f"{r['reason']}")
    return out


def decide_link(store: Store, paper_id: str, linked_id: str, decision: str, note: str | None = None,
                now: datetime | None = None) -> bool:
    """Record the operator's decision on a pair (``same`` or ``distinct``), flagged or not; whether anything changed.

    ``same`` keeps the pair linked for good; ``distinct`` sets aside the pair's flag and its link: a computed link
    is deleted (and never computed again), an explicit one from the source is kept as a row but no longer counts
    in ``paper_versions`` (a later ``same`` counts it again).  The caller reseals what a ``distinct`` frees
    (``grebench.bench.reseal``); a ``same`` unseals here.
    """
    if decision not in (SAME, DISTINCT):
        raise ValueError(f"decision must be {SAME!r} or {DISTINCT!r}, got {decision!r}")
    a, b = sorted((paper_id, linked_id))
    now = now or utcnow()
    row = store.rows("SELECT decision FROM paper_link_flags WHERE paper_id = ? AND linked_id = ?", [a, b])
    if row and row[0]["decision"] == decision:
        return False
    if row:
        store.con.execute("UPDATE paper_link_flags SET decision = ?, decided_at = ?, decision_note = ? "
                          "WHERE paper_id = ? AND linked_id = ?", [decision, now, note, a, b])
    else:
        store.con.execute("INSERT INTO paper_link_flags VALUES (?, ?, ?, '{}', ?, ?, ?, ?)",
                          [a, b, "decided by the operator", now, decision, now, note])
    if decision == DISTINCT:
        store.con.execute(f"DELETE FROM paper_links WHERE paper_id = ? AND linked_id = ? AND method <> '{EXPLICIT}'",
                          [a, b])
    unseal_linked(store)
    return True

"""Linked versions of a paper (the same work at another venue or year) and the one "public since" date.

The contamination window, sealing and the copy check all ask the same question of a paper: since when could anyone
have read reviews of this work?  :func:`public_since` is the one answer (the ``paper_public_since`` view: the earliest
``reviews_public_at`` of the paper and every version linked to it, directly or through others).  Links are written by
:func:`put_links` (computed ones replaced, explicit ones kept) and read by :func:`linked_versions`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
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
    rows = {}
    for link in (x.ordered() for x in links if x.paper_id != x.linked_id):
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

"""The near-paper copy check of a submitted candidate (issue 62, item 3): a review that carries the public reviews of
another paper, one of its paper's nearest, is held like a copy.

A disguised resubmission that the links miss (its title and abstract rewritten, no PDF) counts its reviews as sealed
although its earlier version's reviews are public; the copy check (:mod:`grebench.submissions._copycheck`) reads only
the paper's own and its linked versions' reviews.  Here each review of the candidate (sealed or not: it costs the
same) is read by :class:`grebench.scoring.NearCopyCheck` against the public reviews of the K papers nearest to its
paper whose reviews were public before the review was made:

* **near papers**: the linking code's rare-word index (:func:`grebench.ingest.near_papers`: the
  :data:`NEAR_POOL` papers with public reviews sharing the most rare words), ranked by the linking LM's view of the
  two abstracts (:class:`grebench.scoring.LMAbstractReader` under ``settings.ingest.link_estimator``; empty: the
  rare-word order), the best :data:`NEAR_PAPERS` kept; the paper itself and its linked or flagged versions are left
  out (the copy check reads those).
* **bar**: calibrated on the public reviews of :data:`NEAR_COPY_SAMPLE` papers of the store, each against its own
  paper's near papers picked the same way, to flag at most 0.5 % of honest reviews.

A flag is a finding of the copy check (``CopyCheck.near_copies``): evaluation refuses the candidate and approval
is refused, held for the operator, with the evidence naming the other paper, its venue and since when its reviews
were public.  No possible link is written: one model's review is evidence about the model, and writing a link from it
would let a submitter unseal any paper for every model by copying another paper's reviews into its review; the
operator, reading the evidence, links the pair (``grebench links --decide P Y same``) where it is one work.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING

from grebench.store import Store, linked_versions
from grebench.submissions._copycheck import CopiedReview, CopyCheck

if TYPE_CHECKING:
    from grebench.scoring import EstimatorHandle, NearCopyEvidence

#: Near papers read per review.
NEAR_PAPERS = 5
#: Papers sharing rare words with a paper that the LM view of the abstracts ranks (the best NEAR_PAPERS are read).
NEAR_POOL = 20
#: Papers of the store whose public reviews, each against its paper's near papers, calibrate the bar: about 200
#: honest reviews, the fewest that place a 99.5 % quantile.
NEAR_COPY_SAMPLE = 60


def with_near_copies(store: Store, check: CopyCheck, handle: EstimatorHandle,
                     links: EstimatorHandle | None) -> CopyCheck:
    """``check`` with the near-paper check's findings on every review of its candidate, read by the evaluation LM of
    ``handle`` (``settings.submissions.near_copy_estimator``), the near papers ranked by ``links`` (the linking LM,
    ``settings.ingest.link_estimator``; None: the rare-word order); both closed here."""
    rows = store.rows("SELECT g.paper_id, g.text, g.generated_at, g.sealed FROM generations g "
                      "WHERE g.candidate = ? AND g.text IS NOT NULL AND trim(g.text) <> '' "
                      "ORDER BY g.paper_id, g.generation_id", [check.candidate])
    try:
        found = near_copy_findings(store, handle, [(r["paper_id"], r["text"], r["generated_at"]) for r in rows],
                                   links) if rows else []
    finally:  # the LMs built for the check are released here
        handle.close()
        if links is not None:
            links.close()
    dates = {r["paper_id"]: (r["venue"], r["reviews_public_at"]) for r in store.rows(
        "SELECT paper_id, venue, reviews_public_at FROM papers WHERE paper_id IN (SELECT unnest(?::VARCHAR[]))",
        [sorted({e.near_id for e in found if e is not None and e.near_id is not None})])}
    near = tuple(CopiedReview(r["paper_id"], e.statistic, e.reference, _detail(e, dates, bool(r["sealed"])))
                 for r, e in zip(rows, found, strict=True) if e is not None and e.copied)
    return replace(check, near_copies=near, near_estimator=handle.spec)


def _detail(e: NearCopyEvidence, dates: dict[str, tuple[str | None, datetime | None]], sealed: bool) -> str:
    venue, since = dates.get(e.near_id or "", (None, None))
    when = f", public since {since:%Y-%m-%d}" if since is not None else ""
    counted = "; its review counted as sealed" if sealed else ""
    return (f"(carries the reviews of paper {e.near_id} ({venue or 'unknown venue'}{when}) beyond what honest "
            f"reviews do: {e.statistic:.2f}x as much as an honest review of that paper, bar {e.bar:.2f}x; possibly "
            f"an earlier version of this paper{counted})")


def near_copy_findings(store: Store, handle: EstimatorHandle, items: Sequence[tuple[str, str, datetime]],
                       links: EstimatorHandle | None = None) -> list[NearCopyEvidence | None]:
    """The near-paper check (:class:`grebench.scoring.NearCopyCheck`) of each (paper id, review text, when it was
    made) with the evaluation LM of ``handle`` (built and closed by the caller); None for a review whose paper has
    no near paper with public reviews from before it was made."""
    from grebench.scoring import NearCopyCheck, PaperReviews, rules_judgment_lines

    texts: dict[str, dict[str, str]] = {}
    for r in store.rows("SELECT r.paper_id, r.review_id, arg_max(v.text, v.version) AS text FROM reviews r "
                        "JOIN review_versions v USING (review_id) JOIN papers p USING (paper_id) WHERE "
                        "p.reviews_public_at IS NOT NULL AND v.text IS NOT NULL GROUP BY ALL ORDER BY r.review_id"):
        texts.setdefault(r["paper_id"], {})[r["review_id"]] = r["text"]  # the latest version: one honest reviewer
    readable = {pid for pid, reviews in texts.items() if len(reviews) >= 2}
    checked = sorted({pid for pid, _, _ in items})
    sample = [r["paper_id"] for r in store.rows(
        "SELECT paper_id FROM papers WHERE paper_id IN (SELECT unnest(?::VARCHAR[])) AND paper_id NOT IN "
        "(SELECT unnest(?::VARCHAR[])) ORDER BY hash(paper_id) LIMIT ?", [sorted(readable), checked,
                                                                           NEAR_COPY_SAMPLE])]
    ranked = ranked_near_papers(store, [*checked, *sample], readable, links)
    public = {r["paper_id"]: r["reviews_public_at"] for r in store.rows(
        "SELECT paper_id, reviews_public_at FROM papers WHERE reviews_public_at IS NOT NULL")}
    chosen = [[n for n in ranked.get(pid, []) if public[n] < made][:NEAR_PAPERS] for pid, _, made in items]
    honest = [(pid, rules_judgment_lines(text), ranked.get(pid, [])[:NEAR_PAPERS])
              for pid in sample for text in texts[pid].values()]
    read = sorted({n for nears in chosen for n in nears} | {n for _, _, nears in honest for n in nears})
    abstracts = {r["paper_id"]: r["abstract"] for r in store.rows(
        "SELECT paper_id, abstract FROM papers WHERE paper_id IN (SELECT unnest(?::VARCHAR[]))", [read])}
    papers = {pid: PaperReviews(pid, abstracts.get(pid), {rid: rules_judgment_lines(t)
                                                          for rid, t in texts[pid].items()}) for pid in read}
    corpus = ({pid: ["\n".join(lines) for lines in p.reviews.values() if lines] for pid, p in papers.items()}
              if handle.info.needs_corpus else None)
    check = NearCopyCheck(handle.get(corpus), papers)
    check.calibrate(honest)
    todo = [(pid, rules_judgment_lines(text), nears) for (pid, text, _), nears in zip(items, chosen, strict=True)
            if nears]
    found = iter(check.check(todo)) if todo else iter(())
    return [next(found) if nears else None for nears in chosen]


def ranked_near_papers(store: Store, paper_ids: Sequence[str], among: set[str], links: EstimatorHandle | None
                       ) -> dict[str, list[str]]:
    """paper id -> the papers ``among`` these nearest to it, best first, its own versions (linked or flagged) left
    out: the rare-word index's :data:`NEAR_POOL`, ranked by the view of the abstracts of the LM of ``links`` (None:
    the rare-word order; the handle is left open for the caller)."""
    from grebench.ingest import PaperText, near_papers

    pool = near_papers(store, paper_ids, among, NEAR_POOL + 5)
    versions = linked_versions(store, paper_ids)
    pool = {pid: [n for n in nears if n != pid and n not in versions.get(pid, [])][:NEAR_POOL]
            for pid, nears in pool.items()}
    if links is None:
        return pool
    from grebench.scoring import LMAbstractReader

    ids = sorted({x for pid, nears in pool.items() for x in [pid, *nears]})
    meta = {r["paper_id"]: PaperText(r["paper_id"], r["title"], r["abstract"]) for r in store.rows(
        "SELECT paper_id, title, abstract FROM papers WHERE paper_id IN (SELECT unnest(?::VARCHAR[]))", [ids])}
    pairs = [(pid, n) for pid, nears in pool.items() for n in nears]
    values = LMAbstractReader(store, links).information(
        [(meta[a], meta[b]) for a, b in pairs])
    score = dict(zip(pairs, values, strict=True))
    return {pid: sorted(nears, key=lambda n: -score[(pid, n)]) for pid, nears in pool.items()}

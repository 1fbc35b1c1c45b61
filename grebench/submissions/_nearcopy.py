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

A flag does not refuse the candidate: it says the review may have been written with public reviews in view, which is
what an unsealed review is.  :func:`unseal_near_copies` marks each flagged review so (``generations.sealed`` false,
``flags_json.near_copy`` the evidence, which :func:`grebench.bench.reseal` respects: it never seals that review again)
and writes the evidence to the public change log.  Such a review then counts only once the operator vouches for the
model's declared cutoff, and it sits on the public side of the sealed-gap test
(:func:`grebench.scoring.sealed_gap`) that approval runs: a model whose flagged reviews know more than its sealed
ones is held there like any copier.  An honest review flagged by chance (about 0.5 % of honest reviews, by the bar)
costs its model only that this review waits for approval.  No possible link is written: one model's review is
evidence about the model, and writing a link from it would let a submitter unseal any paper for every model by
copying another paper's reviews into its review; the operator, reading the evidence, links the pair
(``grebench links --decide P Y same``) where it is one work.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING

from grebench.store import PUBLIC_SINCE_VIEW, Store, linked_versions, utcnow
from grebench.submissions._copycheck import CopiedReview, CopyCheck

if TYPE_CHECKING:
    from grebench.bench import ImportSummary
    from grebench.scoring import EstimatorHandle, NearCopyEvidence

log = logging.getLogger(__name__)

#: Near papers read per review.
NEAR_PAPERS = 5
#: Papers sharing rare words with a paper that the LM view of the abstracts ranks (the best NEAR_PAPERS are read).
NEAR_POOL = 20
#: How an estimator reads in a check that could not run (:func:`near_copies_of_import`): its reviews are unsealed.
UNCHECKED = "(failed)"
#: The key of ``generations.flags_json`` that marks a review the near-paper check flagged: never sealed again.
NEAR_COPY_FLAG = "near_copy"
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


def unseal_near_copies(store: Store, check: CopyCheck) -> list[str]:
    """Mark every review of ``check.candidate`` that the near-paper check flagged as written with public reviews in
    view: unsealed, its evidence under ``flags_json.near_copy`` (so :func:`grebench.bench.reseal` never seals it
    again), and one line in the public change log naming them.  Returns the papers of the reviews newly marked that
    had counted as sealed (a review marked before is left as it is, and no line is written when none is new)."""
    flagged = {c.paper_id: c for c in check.near_copies}
    if not flagged:
        return []
    rows = store.rows("SELECT generation_id, paper_id, sealed, flags_json FROM generations WHERE candidate = ? AND "
                      "paper_id IN (SELECT unnest(?::VARCHAR[])) ORDER BY generation_id",
                      [check.candidate, sorted(flagged)])
    new = [r for r in rows if NEAR_COPY_FLAG not in json.loads(r["flags_json"] or "{}")]
    if not new:
        return []
    was_sealed = sum(bool(r["sealed"]) for r in new)
    papers = sorted({r["paper_id"] for r in new})
    why = (f"the near-paper copy check under {check.near_estimator.removeprefix(UNCHECKED).strip()} could not read "
           "them" if check.near_estimator.startswith(UNCHECKED) else
           f"the near-paper copy check under {check.near_estimator} found they carry another paper's public reviews")
    line = (f"{len(new)} review(s) of {check.candidate} count as written with public reviews in view "
            f"({was_sealed} had counted as sealed): {why}; they count only once the operator vouches for the "
            "model's cutoff, on the public side of its sealed-gap test: "
            + "; ".join(f"{pid} {flagged[pid].detail}" for pid in papers[:5])
            + (f"; and {len(papers) - 5} more" if len(papers) > 5 else ""))
    with store.transaction() as con:
        for r in new:
            flags = json.loads(r["flags_json"] or "{}")
            flags[NEAR_COPY_FLAG] = {"estimator": check.near_estimator, "statistic": flagged[r["paper_id"]].share,
                                     "evidence": flagged[r["paper_id"]].detail[:1000]}
            con.execute("UPDATE generations SET sealed = false, flags_json = ? WHERE generation_id = ?",
                        [json.dumps(flags, sort_keys=True, default=str), r["generation_id"]])
        con.execute("INSERT INTO board_changes VALUES (?, 'submission', ?, ?)",
                    [utcnow(), check.candidate, line[:4000]])
    return sorted(r["paper_id"] for r in new if r["sealed"])


def near_copies_of_import(store: Store, summary: ImportSummary, estimator: str,
                          run: Callable[[], CopyCheck]) -> ImportSummary:
    """The near-paper check on every review of an imported candidate (``grebench bench import``, a web upload), run
    after :func:`grebench.bench.import_reviews` wrote them: flagged reviews are unsealed
    (:func:`unseal_near_copies`), and ``summary``'s counts and warnings say so (a review that had counted as sealed
    is clean now only by a trusted cutoff).  A changed file writes its changed reviews afresh, so this runs after
    every import.  ``estimator``: ``settings.submissions.near_copy_estimator`` (empty: off, ``summary`` unchanged);
    ``run``: the check (``check_copies(store, name, settings, near_only=True)``).  ``summary`` unchanged too when
    nothing is flagged."""
    from grebench.bench import IMPORTED_KIND, is_clean

    if not estimator:
        return summary
    try:
        check = run()
    except Exception as exc:  # the check's LM failed: no review of the file counts as sealed unchecked
        log.warning("near-paper copy check of %s failed: %s: %s", summary["candidate"], type(exc).__name__, exc)
        rows = store.rows("SELECT DISTINCT paper_id FROM generations WHERE candidate = ? AND sealed ORDER BY 1",
                          [summary["candidate"]])
        why = f"not read: the check failed ({type(exc).__name__}: {str(exc)[:300]})"
        check = CopyCheck(summary["candidate"], summary["reviews"], (),
                          near_copies=tuple(CopiedReview(r["paper_id"], 0.0, None, why) for r in rows),
                          near_estimator=f"{UNCHECKED} {estimator}")
    if not check.near_copies:
        return summary
    unseal_near_copies(store, check)
    # every marked review the import counted as sealed (marked now or by an earlier import of the same reviews)
    marked = store.rows(f"SELECT g.paper_id, p.public_since FROM generations g JOIN {PUBLIC_SINCE_VIEW} p USING "
                        "(paper_id) WHERE g.candidate = ? AND json_extract(g.flags_json, '$.near_copy') IS NOT NULL "
                        "AND p.public_since IS NOT NULL AND g.generated_at < p.public_since", [summary["candidate"]])
    unsealed = [r["paper_id"] for r in marked]
    cutoff = summary["cutoff"] if summary["cutoff_trusted"] else None
    lost = sum(not is_clean(cutoff, r["public_since"], IMPORTED_KIND) for r in marked)
    found = (f"the near-paper copy check failed, so no review of the file counts as sealed unchecked: "
             f"{check.near_copies[0].detail}" if check.near_estimator.startswith(UNCHECKED) else
             f"{len(check.near_copies)} review(s) carry the public reviews of another, nearby paper: "
             f"{check.near_summary()}")
    warning = (f"{len(unsealed)} review(s) no longer count as sealed (written with public reviews in view)"
               f"{f', {lost} now contaminated' if lost else ''}; {found}")
    return {**summary, "sealed": summary["sealed"] - len(unsealed), "clean": summary["clean"] - lost,
            "contaminated": summary["contaminated"] + lost, "warnings": [*summary["warnings"], warning[:2000]]}


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

    # papers with two public reviews or more (an honest review of one has another to be measured against); only the
    # texts of the papers read below are loaded, so a check costs the same memory in a store of any size
    readable = {r["paper_id"] for r in store.rows(
        "SELECT r.paper_id FROM reviews r JOIN papers p USING (paper_id) WHERE p.reviews_public_at IS NOT NULL AND "
        "EXISTS (SELECT 1 FROM review_versions v WHERE v.review_id = r.review_id AND v.text IS NOT NULL) "
        "GROUP BY r.paper_id HAVING count(*) >= 2")}
    checked = sorted({pid for pid, _, _ in items})
    sample = [r["paper_id"] for r in store.rows(
        "SELECT paper_id FROM papers WHERE paper_id IN (SELECT unnest(?::VARCHAR[])) AND paper_id NOT IN "
        "(SELECT unnest(?::VARCHAR[])) ORDER BY hash(paper_id) LIMIT ?", [sorted(readable), checked,
                                                                           NEAR_COPY_SAMPLE])]
    ranked = ranked_near_papers(store, [*checked, *sample], readable, links)
    public = {r["paper_id"]: r["reviews_public_at"] for r in store.rows(
        "SELECT paper_id, reviews_public_at FROM papers WHERE reviews_public_at IS NOT NULL")}
    chosen = [[n for n in ranked.get(pid, []) if public[n] < made][:NEAR_PAPERS] for pid, _, made in items]
    calibration = [(pid, ranked.get(pid, [])[:NEAR_PAPERS]) for pid in sample]
    read = sorted({n for nears in chosen for n in nears} | {n for _, nears in calibration for n in nears})
    texts: dict[str, dict[str, str]] = {}
    for r in store.rows("SELECT r.paper_id, r.review_id, arg_max(v.text, v.version) AS text FROM reviews r "
                        "JOIN review_versions v USING (review_id) WHERE r.paper_id IN (SELECT unnest(?::VARCHAR[])) "
                        "AND v.text IS NOT NULL GROUP BY ALL ORDER BY r.review_id", [sorted({*read, *sample})]):
        texts.setdefault(r["paper_id"], {})[r["review_id"]] = r["text"]  # the latest version: one honest reviewer
    honest = [(pid, rules_judgment_lines(text), nears) for pid, nears in calibration
              for text in texts.get(pid, {}).values()]
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

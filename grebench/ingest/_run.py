"""The ingest stage: pull papers from a source into the store, a small batch of papers per transaction.

A paper whose stored hashes (paper, every review, extracted PDF) match what the source reports is skipped without
touching the store, so a rerun on an unchanged source writes nothing.  Changed and new papers are written
:data:`BATCH` at a time, each batch in one transaction: a kill loses at most one batch, which the next run writes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable, TypedDict

from grebench import stop
from grebench.ingest._abstract_view import AbstractReader
from grebench.ingest._extractions import PdfExtractions
from grebench.ingest._links import LinkCounts, link_papers, unchecked_paper_ids
from grebench.ingest._source import PaperSource, SourceFailure
from grebench.settings import Settings
from grebench.store import PaperRecord, PdfExtraction, Store

log = logging.getLogger(__name__)


class IngestJson(TypedDict):
    """One ingest run's counts and the store's totals, as ``grebench ingest --json`` prints them."""

    source: str
    papers_seen: int
    papers_added: int
    papers_updated: int
    reviews_added: int
    versions_added: int
    pdfs_extracted: int
    links: LinkCounts
    failures: list[dict[str, str]]  # {item, reason}
    papers_total: int
    reviews_total: int
    versions_total: int


@dataclass
class IngestSummary:
    """Counts of one ingest run (the CLI prints this; ``--json`` fields are stable)."""

    source: str
    papers_seen: int = 0
    papers_added: int = 0
    papers_updated: int = 0
    reviews_added: int = 0
    versions_added: int = 0
    pdfs_extracted: int = 0
    links: LinkCounts = field(default_factory=lambda: LinkCounts())  # none linked: no key
    failures: list[dict[str, str]] = field(default_factory=list)

    def as_json(self, store: Store) -> IngestJson:
        """The summary plus store totals, as the CLI's JSON object."""
        return {
            "source": self.source,
            "papers_seen": self.papers_seen,
            "papers_added": self.papers_added,
            "papers_updated": self.papers_updated,
            "reviews_added": self.reviews_added,
            "versions_added": self.versions_added,
            "pdfs_extracted": self.pdfs_extracted,
            "links": self.links,
            "failures": self.failures,
            "papers_total": int(store.scalar("SELECT count(*) FROM papers")),
            "reviews_total": int(store.scalar("SELECT count(*) FROM reviews")),
            "versions_total": int(store.scalar("SELECT count(*) FROM review_versions")),
        }


BATCH = 25


def run_ingest(
    source: PaperSource,
    store: Store,
    settings: Settings,
    run_id: str,
    limit: int | None = None,
    on_item: Callable[[str], None] | None = None,
    abstracts: AbstractReader | None = None,
) -> IngestSummary:
    """Ingest every paper the source yields; failures are recorded and the rest goes on.  The new and changed
    papers are then linked to their other versions (``abstracts``: the evaluation LM's view of the abstracts that
    linking reads, handed in by the caller; None: not read)."""
    summary = IngestSummary(source=source.name)

    def fail(item: str, reason: str) -> None:
        summary.failures.append({"item": item, "reason": reason})
        store.record_failure(run_id, "ingest", item, reason)
        log.warning("ingest: %s: %s", item, reason)

    papers_known, reviews_known, texts_done = store.content_hashes()
    # a review id names one review of one paper: a record that reuses another paper's is refused, never merged
    owners = {r["review_id"]: r["paper_id"] for r in store.rows("SELECT review_id, paper_id FROM reviews")}
    batch: list[tuple[PaperRecord, PdfExtraction | None]] = []
    written: set[str] = set()  # papers added or changed: linked against every stored paper at the end
    named: list[tuple[str, str]] = []  # (paper, earlier version) the source names

    def flush() -> None:
        if not batch:
            return
        with store.transaction():
            writes = store.upsert_papers([paper for paper, _ in batch])
            for paper, extraction in batch:
                # A failed download is retried next run; a PDF that fails to parse is recorded for good.
                if extraction is not None and not extraction.get("transient") and paper.pdf_ref is not None:
                    store.put_paper_text(paper.paper_id, paper.pdf_ref, extraction)
        for (paper, extraction), write in zip(batch, writes, strict=True):
            if extraction is not None:
                if error := extraction.get("error"):
                    fail(f"{paper.paper_id} (pdf)", error)
                else:
                    summary.pdfs_extracted += 1
            summary.papers_added += write.paper_added
            summary.papers_updated += write.paper_updated
            summary.reviews_added += write.reviews_added
            summary.versions_added += write.versions_added
            if write.paper_added or write.paper_updated:
                written.add(paper.paper_id)
            if on_item is not None:
                on_item(paper.paper_id)
        batch.clear()

    def take(item: PaperRecord, extraction: PdfExtraction | None) -> None:
        if extraction is None and papers_known.get(item.paper_id) == item.content_sha256 and all(
                reviews_known.get(r.review_id) == r.content_sha256 for r in item.reviews):
            if on_item is not None:
                on_item(item.paper_id)
            return  # unchanged: nothing to write
        if any(p.paper_id == item.paper_id for p, _ in batch):
            flush()  # the same paper twice in one source: write the first before comparing the second
        batch.append((item, extraction))
        if len(batch) >= BATCH:
            flush()

    # PDFs extracted here or on Ray workers (executor); the papers come back in source order
    with PdfExtractions(settings.limits, settings.run) as extractions:
        for item in source.fetch(limit=limit):
            if stop.stopping():  # a request boundary: what was read so far is written, nothing more is read
                for done in extractions.drain():
                    take(*done)
                flush()
                store.checkpoint()
                stop.check()
            if isinstance(item, SourceFailure):
                fail(item.item, item.reason)
                continue
            summary.papers_seen += 1
            taken = [(r.review_id, owners[r.review_id]) for r in item.reviews
                     if owners.get(r.review_id, item.paper_id) != item.paper_id]
            if taken:
                fail(item.paper_id, f"review id {taken[0][0]!r} already belongs to paper {taken[0][1]!r}: paper "
                                    "refused (a review id names one review of one paper)")
                continue
            owners.update((r.review_id, item.paper_id) for r in item.reviews)
            named.extend((item.paper_id, earlier) for earlier in item.previous_versions)
            extractions.submit(item, texts_done)
            for done in extractions.ready():
                take(*done)
        for done in extractions.drain():
            take(*done)
    flush()
    pending = written | unchecked_paper_ids(store)  # a run stopped before this point left some unlinked
    if pending or named:
        # versions of the same work: the contamination window and the copy check read every linked version
        summary.links = link_papers(store, pending, named, abstracts)
    store.checkpoint()
    return summary

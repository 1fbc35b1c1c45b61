"""Records that ingest sources produce and the store keeps."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, ClassVar, NotRequired, TypedDict

from grebench.store._clock import clock

#: What a kind of candidate is on a board (``board_rows.role``, ``labels.role`` of a candidate kind): a *contestant*
#: is ranked and counts only on papers it cannot have seen reviewed; the *baseline* (the human review) is ranked and
#: counts on every paper; a *reference* (a control) is a yardstick of the metric: counted on every paper, shown,
#: never ranked.  The registries say which kind has which role; readers read the stored word.
CONTESTANT, BASELINE, REFERENCE = "contestant", "baseline", "reference"
#: What an estimator is (``labels.role`` of an estimator id): a language model, or a fast proxy for one.
MODEL_ROLE, PROXY_ROLE = "model", "proxy"


def utcnow() -> datetime:
    """The installed clock's time as a naive UTC datetime (DuckDB TIMESTAMP convention here): the wall clock, or a
    replay's simulated one (:func:`grebench.store.use_clock`)."""
    return clock().now()


def sha256_json(obj: Any) -> str:
    """Stable hash of a JSON-serialisable object."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


class HiddenText(TypedDict):
    """A run of hidden glyphs of a PDF page (``paper_texts.hidden_json``): its text, why it is hidden, its page."""

    text: str
    reason: str
    page: int


class InjectionFlag(TypedDict):
    """A phrase aimed at an LLM reviewer found in a PDF (``paper_texts.flags_json``), on a page, hidden or not."""

    phrase: str
    page: int
    hidden: bool


class PdfExtraction(TypedDict):
    """The outcome of one PDF extraction (``grebench.ingest.extract_pdf``), as :meth:`Store.put_paper_text` stores it:
    ``text`` None and an ``error`` when it failed.  A download that failed (``transient``: tried again next run) has
    only its ``error``; ``pdf_sha256`` is added once the bytes are known, ``warnings`` when pages were skipped."""

    text: NotRequired[str | None]
    pages: NotRequired[int | None]
    hidden: NotRequired[list[HiddenText]]
    flags: NotRequired[list[InjectionFlag]]
    error: str | None
    warnings: NotRequired[list[str]]
    pdf_sha256: NotRequired[str]
    transient: NotRequired[bool]


@dataclass
class ReviewRecord:
    """One human review (or meta-review) as a source reports it now.  ``kind`` is :attr:`OFFICIAL` (a reviewer's
    review: scored, split into the baseline and the references) or :attr:`META` (the area chair's; stored, never
    scored): every module names the kinds through these, never as bare strings."""

    OFFICIAL: ClassVar[str] = "official_review"
    META: ClassVar[str] = "meta_review"

    review_id: str
    paper_id: str
    kind: str
    text: str
    sections: list[tuple[str, str]]
    content: dict[str, Any]
    title: str | None = None
    rating: str | None = None
    confidence: str | None = None
    signature: str | None = None
    visible_at: datetime | None = None
    modified_at: datetime | None = None
    judgments: list[str] | None = None
    judgments_preprocessor: str | None = None

    @property
    def content_sha256(self) -> str:
        """Hash of what makes a new version: the content and any imported judgments."""
        return sha256_json({"content": self.content, "judgments": self.judgments})


@dataclass
class PaperRecord:
    """One paper with its reviews, and a way to load its PDF when the source has one.

    ``pdf_ref`` identifies the PDF's content (OpenReview's hash-named path or a
    SHA-256); the PDF is downloaded and extracted only when the store has no
    text for that ref yet, so reruns do not fetch PDFs again.
    """

    paper_id: str
    venue_id: str
    title: str
    source: str
    abstract: str | None = None
    venue: str | None = None
    venue_year: int | None = None
    authors: str | None = None
    keywords: str | None = None
    decision: str | None = None
    withdrawn: bool = False
    submitted_at: datetime | None = None
    reviews_public_at: datetime | None = None
    reviews: list[ReviewRecord] = field(default_factory=list)
    pdf_ref: str | None = None
    previous_versions: tuple[str, ...] = ()  # ids of earlier versions of this work the source names (paper_links)
    pdf_loader: Callable[[], bytes] | None = field(default=None, repr=False, compare=False)

    @property
    def content_sha256(self) -> str:
        """Hash of the paper's metadata (not its reviews or PDF)."""
        return sha256_json(
            [self.venue_id, self.venue, self.venue_year, self.title, self.abstract, self.authors,
             self.keywords, self.decision, self.withdrawn,
             self.submitted_at and self.submitted_at.isoformat(),
             self.reviews_public_at and self.reviews_public_at.isoformat()]
        )

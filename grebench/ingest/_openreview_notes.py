"""Turn OpenReview notes (API v1 or v2, as openreview-py returns them) into paper and review records.

A submission note comes with its replies (v1 ``details.directReplies``, v2
``details.replies``); replies are classified by the suffix of their invitation
(v1 ``invitation`` string, v2 ``invitations`` list): ``Official_Review`` and
``Meta_Review`` become reviews, ``Decision`` sets the decision,
``Withdrawal``/``Withdrawn_Submission`` marks the paper withdrawn.

Dates: OpenReview gives epoch milliseconds.  ``submitted_at`` is the note's
``cdate`` (else ``tcdate``); a review's ``visible_at`` is its ``pdate`` or
``odate`` when the API sets one, else its ``cdate``/``tcdate``.  An anonymous
client only sees public reviews, but the creation date can precede the
release, so ``visible_at`` (and the paper's ``reviews_public_at``, the
earliest ``visible_at`` of its reviews) errs early: a candidate review made
before that time was certainly made before the human reviews were public.
``modified_at`` is ``tmdate`` (else ``mdate``).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from grebench.ingest._content import CONFIDENCE_FIELDS, RATING_FIELDS, field_value, first_str, review_text, venue_year
from grebench.ingest._source import SourceFailure
from grebench.store import PaperRecord, ReviewRecord

REVIEW_KINDS = {"Official_Review": ReviewRecord.OFFICIAL, "Meta_Review": ReviewRecord.META}
WITHDRAWN_SUFFIXES = ("Withdrawal", "Withdrawn_Submission")
DESK_REJECT_SUFFIXES = ("Desk_Rejection", "Desk_Rejected_Submission")
# Submission fields naming an earlier version: TMLR's form has ``previous_TMLR_submission_url``; ICLR's and
# NeurIPS's forms have no such field (nothing in the API links a resubmission to its earlier venue's note).
_PREVIOUS_FIELD = re.compile(r"previous.*submission|resubmission.*(url|link|id)", re.IGNORECASE)
_FORUM_ID = re.compile(r"(?:forum|pdf)\?(?:[^#\s]*&)?id=([A-Za-z0-9_-]{1,100})")


def note_dict(note: Any) -> dict[str, Any]:
    """An openreview-py ``Note`` (v1 or v2) or a raw reply dict, as a plain dict."""
    return note if isinstance(note, dict) else dict(vars(note))


def suffixes(note: dict[str, Any]) -> list[str]:
    """The last segment (``Official_Review``, ``Decision``, ...) of each invitation of a v1 or v2 note.

    The last segment, not the part after ``/-/``: older v1 venues name invitations
    ``VENUE/-/Paper49/Official_Review``, newer ones ``VENUE/Paper49/-/Official_Review``.
    """
    invitations = note.get("invitations")
    if not isinstance(invitations, list):
        invitations = [note.get("invitation")]
    return [inv.rsplit("/", 1)[-1] for inv in invitations if isinstance(inv, str)]


def ms_time(value: Any, what: str) -> datetime | None:
    """Epoch milliseconds as naive UTC; ValueError for anything that is not a number."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{what} must be epoch milliseconds, got {type(value).__name__}")
    return datetime.fromtimestamp(value / 1000, UTC).replace(tzinfo=None)


def _first_time(note: dict[str, Any], keys: tuple[str, ...], what: str) -> datetime | None:
    for key in keys:
        value = ms_time(note.get(key), f"{what}: {key}")
        if value is not None:
            return value
    return None


def latest_change(note: dict[str, Any]) -> datetime | None:
    """The newest modification time of a submission or any of its replies (for ``fetch(since=...)``)."""
    times = []
    for item in [note, *replies_of(note)]:
        try:
            stamp = _first_time(item, ("tmdate", "mdate", "tcdate", "cdate"), "note")
        except ValueError:
            continue
        if stamp is not None:
            times.append(stamp)
    return max(times) if times else None


def replies_of(note: dict[str, Any]) -> list[dict[str, Any]]:
    """The replies openreview-py put in ``details`` (``directReplies`` in v1, ``replies`` in v2)."""
    details = note.get("details")
    if not isinstance(details, dict):
        return []
    replies = details.get("replies", details.get("directReplies"))
    return [r for r in replies if isinstance(r, dict)] if isinstance(replies, list) else []


def display_venue(venue_id: str) -> str:
    """``ICLR.cc/2024/Conference`` -> ``ICLR 2024`` (the venue's display name in tables)."""
    head = venue_id.split("/", 1)[0]
    head = re.sub(r"\.(cc|org|net|com)$", "", head)
    year = venue_year(venue_id)
    return f"{head} {year}" if year else head


def _joined(value: Any, sep: str) -> str | None:
    if isinstance(value, list):
        return sep.join(str(v) for v in value) if value else None
    return value if isinstance(value, str) else None


def parse_review(reply: dict[str, Any], kind: str, paper_id: str) -> ReviewRecord:
    """One review or meta-review reply; ValueError if it is malformed."""
    review_id = reply.get("id")
    if not isinstance(review_id, str) or not review_id:
        raise ValueError("review without an id")
    content = reply.get("content")
    if not isinstance(content, dict):
        raise ValueError(f"review {review_id}: content missing or not an object")
    text, sections = review_text(content)
    signatures = reply.get("signatures")
    title = field_value(content, "title")
    return ReviewRecord(
        review_id=review_id,
        paper_id=paper_id,
        kind=kind,
        text=text,
        sections=sections,
        content=content,
        title=title if isinstance(title, str) else None,
        rating=first_str(content, RATING_FIELDS),
        confidence=first_str(content, CONFIDENCE_FIELDS),
        signature=signatures[0] if isinstance(signatures, list) and signatures and isinstance(signatures[0], str)
        else None,
        visible_at=_first_time(reply, ("pdate", "odate", "cdate", "tcdate"), f"review {review_id}"),
        modified_at=_first_time(reply, ("tmdate", "mdate"), f"review {review_id}"),
    )


def parse_submission(note: dict[str, Any], venue_id: str, source: str) -> tuple[PaperRecord, list[SourceFailure]]:
    """A submission with its replies; ValueError when the submission itself is unusable.

    A malformed reply becomes a :class:`SourceFailure` and the paper is kept without it.
    """
    paper_id = note.get("id")
    if not isinstance(paper_id, str) or not paper_id:
        raise ValueError("submission without an id")
    content = note.get("content")
    if not isinstance(content, dict):
        raise ValueError(f"submission {paper_id}: content missing or not an object")
    title = field_value(content, "title")
    if not isinstance(title, str) or not title.strip():
        raise ValueError(f"submission {paper_id}: title missing or not a string")
    abstract = field_value(content, "abstract")
    if abstract is not None and not isinstance(abstract, str):
        raise ValueError(f"submission {paper_id}: abstract must be a string, got {type(abstract).__name__}")
    venueid = field_value(content, "venueid")
    venueid = venueid if isinstance(venueid, str) else ""
    own = suffixes(note)
    withdrawn = any(s in WITHDRAWN_SUFFIXES for s in own) or venueid.endswith("/Withdrawn_Submission")
    desk_rejected = any(s in DESK_REJECT_SUFFIXES for s in own) or venueid.endswith("/Desk_Rejected_Submission")
    decision: str | None = None
    reviews: list[ReviewRecord] = []
    failures: list[SourceFailure] = []
    for reply in replies_of(note):
        kinds = suffixes(reply)
        item = f"{paper_id}/{reply.get('id')}"
        if any(s in WITHDRAWN_SUFFIXES for s in kinds):
            withdrawn = True
        elif any(s in DESK_REJECT_SUFFIXES for s in kinds):
            desk_rejected = True
        elif "Decision" in kinds:
            value = field_value(reply.get("content") or {}, "decision") if isinstance(reply.get("content"), dict) \
                else None
            if isinstance(value, str):
                decision = value
            else:
                failures.append(SourceFailure(item, "decision note without a string 'decision' field"))
        else:
            kind = next((REVIEW_KINDS[s] for s in kinds if s in REVIEW_KINDS), None)
            if kind is None:
                continue  # comments, rebuttals, revisions: not reviews
            try:
                reviews.append(parse_review(reply, kind, paper_id))
            except ValueError as exc:
                failures.append(SourceFailure(item, str(exc)))
    if decision is None and desk_rejected:
        decision = "Desk Reject"
    visible = [r.visible_at for r in reviews if r.visible_at is not None]
    pdf = field_value(content, "pdf")
    previous = previous_versions(content, paper_id)
    paper = PaperRecord(
        paper_id=paper_id,
        venue_id=venue_id,
        venue=display_venue(venue_id),
        venue_year=venue_year(venue_id),
        title=title.strip(),
        abstract=abstract,
        authors=_joined(field_value(content, "authors"), "|"),
        keywords=_joined(field_value(content, "keywords"), ";"),
        decision=decision,
        withdrawn=withdrawn,
        submitted_at=_first_time(note, ("cdate", "tcdate"), f"submission {paper_id}"),
        reviews_public_at=min(visible) if visible else None,
        source=source,
        reviews=reviews,
        pdf_ref=pdf if isinstance(pdf, str) and pdf else None,
        previous_versions=previous,
    )
    return paper, failures


def previous_versions(content: dict[str, Any], paper_id: str) -> tuple[str, ...]:
    """Forum ids of earlier versions a submission names in a field like TMLR's ``previous_TMLR_submission_url``."""
    found: list[str] = []
    for key in content:
        if isinstance(key, str) and _PREVIOUS_FIELD.search(key):
            value = field_value(content, key)
            for text in value if isinstance(value, list) else [value]:
                if isinstance(text, str):
                    found += [m for m in _FORUM_ID.findall(text) if m != paper_id]
    return tuple(dict.fromkeys(found))

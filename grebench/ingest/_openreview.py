"""The OpenReview paper source, through openreview-py (API v1 for older venues, v2 for ICLR 2024 on).

Listing: API v1 pages through ``VENUE/-/Blind_Submission`` (or ``/-/Submission``
for venues without blind copies), then ``/-/Withdrawn_Submission`` and
``/-/Desk_Rejected_Submission``, each with ``details='directReplies'``; API v2
pages through ``VENUE/-/Submission`` with ``details='replies'`` (withdrawn
papers keep that invitation and get ``venueid .../Withdrawn_Submission``).
Paging is openreview-py's own ``efficient_iterget`` (``after=<last id>``,
``count`` in the first answer), consumed lazily so that papers are stored as
they arrive.  What a note turns into is in :mod:`._openreview_notes`; the HTTP
policy (bounded retries and waits, error messages) in :mod:`._openreview_http`.

Anonymous by default; ``OPENREVIEW_USERNAME``/``OPENREVIEW_PASSWORD`` from the
environment log in (openreview-py's own login request, made before our retry
policy is mounted).  Credentials are never logged.

Every request (login, each page, the venue group, each PDF) runs through
:func:`grebench.stop.call`: a stop signal is honoured at once even while a
request hangs or openreview-py's own login retries sleep, and the ingest is
recorded ``interrupted``.
"""

from __future__ import annotations

import logging
import os
import re
from datetime import datetime
from typing import Any, Callable, Iterator

from grebench import stop
from grebench.ingest._archive import IngestLimits
from grebench.ingest._content import venue_year
from grebench.ingest._openreview_http import WaitBudget, describe_error, mount_policy, request_errors
from grebench.ingest._openreview_notes import latest_change, note_dict, parse_submission
from grebench.ingest._source import SOURCES, SourceError, SourceFailure
from grebench.settings import Settings
from grebench.store import PaperRecord

log = logging.getLogger(__name__)

V2_FROM_YEAR = 2024

#: One path segment of an OpenReview group id (``ICLR.cc``, ``2024``, ``Conference``, ``Datasets_and_Benchmarks``,
#: ``ES-FoMo-II``): letters, digits and ``._-+~@``, not starting with a dot (no ``.`` or ``..``).  A venue id is
#: such segments joined by single slashes; whitespace, quotes and shell or URL metacharacters never occur in one.
_SEGMENT = r"[A-Za-z0-9_][A-Za-z0-9_.+~@-]*"
_VENUE_ID = re.compile(rf"{_SEGMENT}(?:/{_SEGMENT})*")
_VENUE_ID_MAX = 200


def choose_api(venue_id: str, setting: str) -> str:
    """``v1`` or ``v2`` for a venue: explicit setting, else by year (2024 on, or no year: v2)."""
    setting = setting.strip().lower()
    if setting in ("v1", "v2"):
        return setting
    if setting != "auto":
        raise SourceError(f"openreview_api must be auto, v1 or v2, got {setting!r}")
    year = venue_year(venue_id)
    return "v2" if year is None or year >= V2_FROM_YEAR else "v1"


class OpenReviewSource:
    """Papers of one OpenReview venue with their public reviews, decision and PDF."""

    def __init__(self, venue_id: str, settings: Settings, *, page_size: int = 1000,
                 sleep: Callable[[float], None] = stop.sleep) -> None:
        venue_id = check_venue_id(venue_id)
        self.venue_id = venue_id
        self.name = f"openreview:{venue_id}"
        self.settings = settings
        self.api = choose_api(venue_id, settings.ingest.openreview_api)
        ingest = settings.ingest
        self.baseurl = ingest.openreview_baseurl_v2 if self.api == "v2" else ingest.openreview_baseurl_v1
        self.page_size = page_size
        self.budget = WaitBudget(max_wait_s=settings.ingest.openreview_max_wait_s, sleep=sleep)

    # -- client ----------------------------------------------------------
    def _client(self) -> Any:
        import openreview

        username = os.environ.get("OPENREVIEW_USERNAME") or None
        password = os.environ.get("OPENREVIEW_PASSWORD") or None
        factory = openreview.api.OpenReviewClient if self.api == "v2" else openreview.Client
        try:
            client = stop.call(lambda: factory(baseurl=self.baseurl, username=username, password=password))
        except request_errors() as exc:
            what = "OpenReview login (OPENREVIEW_USERNAME)" if username or password else "OpenReview client"
            raise SourceError(describe_error(exc, self.budget, what)) from None
        mount_policy(client.session, self.budget, self.settings.ingest.openreview_max_retries,
                     self.settings.ingest.openreview_timeout_s)
        return client

    def _pages(self, client: Any, invitation: str, details: str) -> Iterator[Any]:
        """Notes of one invitation, page by page; a failed page ends the listing with a SourceError."""
        from openreview import tools

        what = f"listing {invitation} at {self.baseurl}"
        try:
            pages = stop.call(lambda: tools.efficient_iterget(
                client.get_notes, desc=f"OpenReview {invitation}", invitation=invitation, details=details,
                limit=self.page_size))
        except request_errors() as exc:
            raise SourceError(describe_error(exc, self.budget, what)) from None
        while True:
            try:
                note = stop.call(lambda: next(pages))
            except StopIteration:
                return
            except request_errors() as exc:
                raise SourceError(describe_error(exc, self.budget, what)) from None
            yield note

    def _listing(self, client: Any) -> Iterator[Any]:
        venue = self.venue_id
        if self.api == "v2":
            yield from self._pages(client, f"{venue}/-/Submission", "replies")
            return
        blind = False
        for note in self._pages(client, f"{venue}/-/Blind_Submission", "directReplies"):
            blind = True
            yield note
        if not blind:
            yield from self._pages(client, f"{venue}/-/Submission", "directReplies")
        for suffix in ("Withdrawn_Submission", "Desk_Rejected_Submission"):
            yield from self._pages(client, f"{venue}/-/{suffix}", "directReplies")

    def _check_venue(self, client: Any) -> None:
        """No submissions at all: a venue group that exists is fine (nothing yet); none is an error."""
        from openreview import OpenReviewException

        try:
            stop.call(lambda: client.get_group(self.venue_id))
        except (OpenReviewException, IndexError) as exc:
            info = exc.args[0] if exc.args and isinstance(exc.args[0], dict) else {}
            if isinstance(exc, IndexError) or info.get("status") == 404 or info.get("name") == "NotFoundError":
                raise SourceError(f"unknown OpenReview venue {self.venue_id!r} (no venue group and no submissions "
                                  f"at {self.baseurl}, API {self.api})") from None
            raise SourceError(describe_error(exc, self.budget, f"venue group {self.venue_id}")) from None
        except request_errors() as exc:
            raise SourceError(describe_error(exc, self.budget, f"venue group {self.venue_id}")) from None
        log.info("OpenReview venue %s exists but has no public submissions yet", self.venue_id)

    def _pdf_loader(self, client: Any, note_id: str) -> Callable[[], bytes]:
        budget = self.budget

        def load() -> bytes:
            try:
                # v2 takes the field name first: get_attachment(field_name, id=...)
                data = stop.call(lambda: client.get_attachment("pdf", id=note_id) if self.api == "v2"
                                 else client.get_pdf(note_id))
            except request_errors() as exc:
                raise SourceError(describe_error(exc, budget, f"PDF of {note_id}")) from None
            if not isinstance(data, bytes) or not data.startswith(b"%PDF-"):
                kind = budget.last.get("content_type") or "unknown content type"
                raise SourceError(f"PDF of {note_id}: OpenReview answered something that is not a PDF ({kind})")
            return data

        return load

    # -- the source interface -------------------------------------------
    def fetch(self, since: datetime | None = None, limit: int | None = None) -> Iterator[PaperRecord | SourceFailure]:
        """Yield each submission (newest state, with reviews) or a failure naming the bad note.

        ``since`` keeps only papers whose submission or replies changed at or after it.
        """
        self.budget.waited_s = 0.0
        self.budget.retries = 0
        client = self._client()
        limits = IngestLimits.from_settings(self.settings.limits)
        seen: set[str] = set()
        yielded = 0
        if limit is not None and limit <= 0:
            return
        for note in self._listing(client):
            raw = note_dict(note)
            raw_id = raw.get("id")
            note_id = raw_id if isinstance(raw_id, str) else "?"
            if note_id in seen:
                continue
            seen.add(note_id)
            if since is not None:
                changed = latest_change(raw)
                if changed is not None and changed < since:
                    continue
            try:
                paper, failures = parse_submission(raw, self.venue_id, self.name)
            except ValueError as exc:
                yield SourceFailure(note_id, str(exc))
                continue
            yield from failures
            over = limits.refusal(paper)  # the archive's limits (ingest_max_*) hold for OpenReview records too
            if over is not None:
                yield SourceFailure(note_id, f"{over}; paper refused")
                continue
            if yielded >= limits.papers:
                yield SourceFailure(self.venue_id, f"the venue lists more than {limits.papers:,} papers (limit "
                                                   "ingest_max_papers); the rest are not read")
                return
            if self.settings.ingest.fetch_pdfs and paper.pdf_ref:
                paper.pdf_loader = self._pdf_loader(client, paper.paper_id)
            yielded += 1
            yield paper
            if limit is not None and yielded >= limit:
                return
        if not seen:
            self._check_venue(client)


def check_venue_id(venue_id: str) -> str:
    """``venue_id`` without surrounding blanks and slashes, checked against the grammar of OpenReview group ids:
    path segments of letters, digits and ``._-+~@`` joined by single slashes, none starting with a dot (so no
    ``..``), at most 200 characters.  A :class:`SourceError` saying what is wrong otherwise."""
    cleaned = venue_id.strip().strip("/")
    if not cleaned:
        raise SourceError("openreview source spec must be openreview:VENUE_ID (e.g. ICLR.cc/2024/Conference)")
    if len(cleaned) > _VENUE_ID_MAX or not _VENUE_ID.fullmatch(cleaned):
        raise SourceError(f"invalid OpenReview venue id {venue_id!r}: a venue id is path segments of letters, digits "
                          "and ._-+~@ joined by single slashes, none starting with a dot, at most "
                          f"{_VENUE_ID_MAX} characters (e.g. ICLR.cc/2024/Conference)")
    return cleaned


def check_openreview_arg(arg: str) -> None:
    """``openreview:VENUE_ID`` needs a well-formed venue id (checked before any work: :func:`check_venue_id`)."""
    check_venue_id(arg)


@SOURCES.register("openreview", spec="openreview:VENUE_ID", summary="a venue on OpenReview (API v1 or v2)",
                  venue_id=True, check_arg=check_openreview_arg)
def make_openreview(arg: str, settings: Settings) -> OpenReviewSource:
    """``openreview:VENUE_ID``, e.g. ``openreview:ICLR.cc/2024/Conference``."""
    check_openreview_arg(arg)
    return OpenReviewSource(arg, settings)

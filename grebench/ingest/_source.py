"""The paper-source interface and its resolution from strings."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Protocol

from grebench.store import PaperRecord

if TYPE_CHECKING:
    from grebench.settings import Settings


class SourceError(Exception):
    """A source cannot be used at all (unknown venue, unreadable file, server refusing us)."""


@dataclass(frozen=True)
class SourceFailure:
    """One item a source could not turn into a paper; the rest goes on."""

    item: str
    reason: str


class PaperSource(Protocol):
    """Anything that yields papers with their reviews."""

    name: str

    def fetch(self, since: datetime | None = None, limit: int | None = None) -> Iterator[PaperRecord | SourceFailure]:
        """Yield papers (or per-item failures), newest state of each."""
        ...


def resolve_source(spec: str, settings: Settings) -> PaperSource:
    """Build a source from ``bundled``, ``archive:PATH`` or ``openreview:VENUE_ID``."""
    kind, _, arg = spec.partition(":")
    if kind == "bundled" and not arg:
        from grebench.ingest._archive import bundled_source

        return bundled_source()
    if kind == "archive" and arg:
        from grebench.ingest._archive import ArchiveSource

        return ArchiveSource(Path(arg))
    if kind == "openreview" and arg:
        from grebench.ingest._openreview import OpenReviewSource

        return OpenReviewSource(arg, settings)
    raise SourceError(f"unknown source {spec!r}: use bundled, archive:PATH or openreview:VENUE_ID")

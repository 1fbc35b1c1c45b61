"""The paper-source interface, the registry of sources and their resolution from spec strings."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Callable, Iterator, Protocol

from grebench.registry import Registry, UnknownPart
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


SourceFactory = Callable[[str, "Settings"], PaperSource]

@dataclass(frozen=True)
class SourceInfo:
    """The facts of a kind of paper source.  ``venue_id``: its argument is an OpenReview venue id (a bare venue id
    in the ``venues`` setting means this source).  ``check_arg``: validates an ARG before any work (the setup check
    calls it), raising ``ValueError(reason)``; None: any ARG passes."""

    name: str
    venue_id: bool = False
    check_arg: Callable[[str], None] | None = None


#: Registered paper sources; an entry's facts are a :class:`SourceInfo`.
SOURCES: Registry[SourceFactory] = Registry(
    "source", builtins=("grebench.ingest._archive", "grebench.ingest._season", "grebench.ingest._openreview"),
    facts=SourceInfo)


def resolve_source(spec: str, settings: Settings) -> PaperSource:
    """Build a source from its spec (``bundled``, ``archive:PATH``, ``openreview:VENUE_ID`` or a plugin's)."""
    try:
        entry, arg = SOURCES.resolve(spec)
    except UnknownPart as exc:
        raise SourceError(str(exc)) from None
    return entry.obj(arg, settings)


def source_spec(item: str) -> str:
    """A source spec from a ``venues`` entry: a registered ``NAME[:ARG]`` as it is; a bare venue id (no registered
    source name before a colon) goes to the source registered with ``venue_id=True`` (OpenReview).

    An entry ``NAME:ARG`` whose NAME is not registered is an error, never silently an OpenReview venue.
    """
    item = item.strip()
    name, _ = SOURCES.split(item)
    if name in SOURCES:
        return item
    if ":" in item and "/" not in name:  # NAME:ARG with an unknown NAME (venue ids have a '/' before any colon)
        raise SourceError(f"unknown source {name!r} in venues entry {item!r} (known: {SOURCES.help()})")
    venue = [e for e in SOURCES.entries() if e.facts(SourceInfo).venue_id]
    if not venue:
        raise SourceError(f"{item!r} is not a source spec and no registered source takes venue ids")
    return f"{venue[0].name}:{item}"

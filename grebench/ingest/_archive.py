"""JSON Lines archives (the format of the bundled ICLR 2020 sample) and the bundled source.

The format is documented in ``docs/archive-format.md``.  Each line is one
paper; a line ``{"_meta": {...}}`` sets file-wide defaults
(``judgments_preprocessor``, ``reviews_public_at``, ``venue_id``, ``venue``).
Bad lines (invalid UTF-8, invalid JSON, missing or mistyped fields) become
:class:`SourceFailure` items naming the line; the other lines still load.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any, Iterator

from grebench.ingest._content import CONFIDENCE_FIELDS, RATING_FIELDS, first_str, review_text, venue_year
from grebench.ingest._source import SOURCES, SourceError, SourceFailure
from grebench.settings import LimitSettings, Settings
from grebench.store import PaperRecord, ReviewRecord

# The bundled sample's reviews are the versions crawled on this date, when they were public.
BUNDLED_REVIEWS_PUBLIC_AT = "2019-11-08"
IMPORTED = "imported"


def parse_time(value: Any, what: str) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:  # NaN, inf and far-out epochs raise ValueError, OverflowError or OSError (EOVERFLOW)
            return datetime.fromtimestamp(value / 1000 if value > 1e11 else value, UTC).replace(tzinfo=None)
        except (ValueError, OverflowError, OSError):
            raise ValueError(f"{what}: not a usable epoch timestamp: {value!r}") from None
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
            return parsed if parsed.tzinfo is None else parsed.astimezone(UTC).replace(tzinfo=None)
        except (ValueError, OverflowError):
            raise ValueError(f"{what}: not an ISO date: {value!r}") from None
    raise ValueError(f"{what}: expected a date, got {type(value).__name__}")


def _expect(obj: dict[str, Any], key: str, types: type | tuple[type, ...], what: str, required: bool = True) -> Any:
    if key not in obj or obj[key] is None:
        if required:
            raise ValueError(f"{what}: missing field {key!r}")
        return None
    value = obj[key]
    allowed = types if isinstance(types, tuple) else (types,)
    if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
        names = "/".join(t.__name__ for t in allowed)
        raise ValueError(f"{what}: field {key!r} must be {names}, got {type(value).__name__}")
    return value


def _nested_str(record: dict[str, Any], outer: str, inner: str) -> str | None:
    value = record.get(outer)
    found = value.get(inner) if isinstance(value, dict) else None
    return found if isinstance(found, str) else None


def parse_record(record: Any, meta: dict[str, Any], source: str) -> PaperRecord:
    """Validate one archive record and turn it into a :class:`PaperRecord`."""
    if not isinstance(record, dict):
        raise ValueError(f"expected a JSON object, got {type(record).__name__}")
    paper_id = _expect(record, "id", str, "paper")
    where = f"paper {paper_id}"
    venue_id = _expect(record, "venue_id", str, where, required=False) or meta.get("venue_id")
    if not venue_id:
        raise ValueError(f"{where}: missing field 'venue_id' (and no _meta venue_id)")
    for key in ("venue_id", "venue", "judgments_preprocessor"):  # file-wide defaults from a _meta line
        if meta.get(key) is not None and not isinstance(meta[key], str):
            raise ValueError(f"{where}: _meta {key} must be a string, got {type(meta[key]).__name__}")
    reviews_raw = _expect(record, "reviews", list, where)
    default_pre = record.get("judgments_preprocessor") or meta.get("judgments_preprocessor") or IMPORTED
    reviews = [_parse_review(r, i, paper_id, default_pre, where) for i, r in enumerate(reviews_raw)]
    public = record.get("reviews_public_at", meta.get("reviews_public_at"))
    previous = _expect(record, "previous_versions", list, where, required=False) or []
    if not all(isinstance(p, str) and p.strip() and len(p) <= 200 for p in previous) or len(previous) > 50:
        raise ValueError(f"{where}: 'previous_versions' must be a list of at most 50 paper ids (strings)")
    return PaperRecord(
        paper_id=paper_id,
        venue_id=venue_id,
        venue=_expect(record, "venue", str, where, required=False) or meta.get("venue"),
        venue_year=venue_year(venue_id),
        title=_expect(record, "title", str, where),
        abstract=_expect(record, "abstract", str, where, required=False),
        authors=_nested_str(record, "miniconf", "authors"),
        keywords=_nested_str(record, "papercopilot", "keywords"),
        decision=_expect(record, "decision", str, where, required=False),
        withdrawn=bool(record.get("withdrawn", False)),
        submitted_at=parse_time(record.get("submitted_at"), f"{where}: submitted_at"),
        reviews_public_at=parse_time(public, f"{where}: reviews_public_at"),
        source=source,
        reviews=reviews,
        previous_versions=tuple(dict.fromkeys(p.strip() for p in previous if p.strip() != paper_id)),
    )


def _parse_review(raw: Any, index: int, paper_id: str, default_pre: str, where: str) -> ReviewRecord:
    what = f"{where}: review #{index}"
    if not isinstance(raw, dict):
        raise ValueError(f"{what}: expected an object, got {type(raw).__name__}")
    review_id = _expect(raw, "id", str, what)
    content = _expect(raw, "content", dict, f"{where}: review {review_id}")
    try:
        text, sections = review_text(content)
    except ValueError as exc:
        raise ValueError(f"{where}: review {review_id}: {exc}") from None
    judgments = raw.get("judgments")
    if judgments is not None and not (isinstance(judgments, list) and all(isinstance(j, str) for j in judgments)):
        raise ValueError(f"{where}: review {review_id}: 'judgments' must be a list of strings")
    kind = raw.get("kind")
    return ReviewRecord(
        review_id=review_id,
        paper_id=paper_id,
        kind=kind if isinstance(kind, str) else ReviewRecord.OFFICIAL,
        text=text,
        sections=sections,
        content=content,
        title=content.get("title") if isinstance(content.get("title"), str) else None,
        rating=first_str(content, RATING_FIELDS),
        confidence=first_str(content, CONFIDENCE_FIELDS),
        signature=raw.get("signature") if isinstance(raw.get("signature"), str) else None,
        visible_at=parse_time(raw.get("visible_at"), f"{what}: visible_at"),
        modified_at=parse_time(raw.get("modified_at"), f"{what}: modified_at"),
        judgments=judgments,
        judgments_preprocessor=(raw.get("judgments_preprocessor") or default_pre) if judgments is not None else None,
    )


@dataclass(frozen=True)
class IngestLimits:
    """What one archive may hold (settings ``ingest_max_*``); a record over a limit is refused with its line."""

    line_bytes: int = 4 * 1024 * 1024
    title_chars: int = 1_000
    abstract_chars: int = 20_000
    review_chars: int = 100_000
    reviews_per_paper: int = 50
    papers: int = 200_000

    @classmethod
    def from_settings(cls, limits: LimitSettings) -> IngestLimits:
        return cls(limits.ingest_max_line_bytes, limits.ingest_max_title_chars,
                   limits.ingest_max_abstract_chars, limits.ingest_max_review_chars,
                   limits.ingest_max_reviews_per_paper, limits.ingest_max_papers)

    def refusal(self, paper: PaperRecord) -> str | None:
        """Why ``paper`` is over a limit, or None."""
        if len(paper.title) > self.title_chars:
            return f"title is {len(paper.title):,} characters (limit ingest_max_title_chars = {self.title_chars:,})"
        if paper.abstract is not None and len(paper.abstract) > self.abstract_chars:
            return (f"abstract is {len(paper.abstract):,} characters "
                    f"(limit ingest_max_abstract_chars = {self.abstract_chars:,})")
        if len(paper.reviews) > self.reviews_per_paper:
            return f"{len(paper.reviews)} reviews (limit ingest_max_reviews_per_paper = {self.reviews_per_paper})"
        for review in paper.reviews:
            if len(review.text or "") > self.review_chars:
                return (f"review {review.review_id[:60]!r} is {len(review.text or ''):,} characters "
                        f"(limit ingest_max_review_chars = {self.review_chars:,})")
        return None


def _lines(handle: Any, limit: int) -> Iterator[tuple[bytes, bool]]:
    """(line, whole) for each line of a binary file, reading at most ``limit`` + 1 bytes of one line into memory;
    a longer line comes back cut (``whole`` False) and the rest of it is skipped."""
    while True:
        raw = handle.readline(limit + 1)
        if not raw:
            return
        if len(raw) > limit and not raw.endswith(b"\n"):
            while True:  # skip the rest of the over-long line without keeping it
                rest = handle.readline(1 << 20)
                if not rest or rest.endswith(b"\n"):
                    break
            yield raw, False
        else:
            yield raw, True


class ArchiveSource:
    """Papers from a JSON Lines archive file."""

    def __init__(self, path: Path, name: str | None = None, meta: dict[str, Any] | None = None,
                 limits: IngestLimits | None = None) -> None:
        self.path = path
        self.name = name or f"archive:{path}"
        self._meta = dict(meta or {})
        self.limits = limits or IngestLimits()

    def as_of(self, record: Any, meta: dict[str, Any]) -> Any:
        """The record as the source shows it now (an archive: as it is; a season: what was public by now, or None)."""
        return record

    def fetch(self, since: datetime | None = None, limit: int | None = None) -> Iterator[PaperRecord | SourceFailure]:
        """Yield each valid line as a paper and each bad line as a failure."""
        try:
            handle = self.path.open("rb")
        except OSError as exc:
            raise SourceError(f"cannot read archive {self.path}: {exc.strerror}") from None
        meta = dict(self._meta)
        yielded = 0
        owners: dict[str, tuple[str, int]] = {}  # review id -> (paper, line) in this file
        with handle:
            for number, (raw, whole) in enumerate(_lines(handle, self.limits.line_bytes), start=1):
                if limit is not None and yielded >= limit:
                    return
                item = f"{self.path.name}:{number}"
                if not whole:
                    yield SourceFailure(item, f"line is over {self.limits.line_bytes:,} bytes "
                                              "(limit ingest_max_line_bytes); line refused")
                    continue
                if not raw.strip():
                    continue
                if yielded >= self.limits.papers:
                    yield SourceFailure(item, f"the archive holds more than {self.limits.papers:,} papers (limit "
                                              "ingest_max_papers); this line and the rest are not read")
                    return
                try:
                    record = json.loads(raw.decode("utf-8"))
                except UnicodeDecodeError as exc:
                    yield SourceFailure(item, f"invalid UTF-8 at byte {exc.start}")
                    continue
                except json.JSONDecodeError as exc:
                    yield SourceFailure(item, f"invalid JSON: {exc.msg} at column {exc.colno}")
                    continue
                if isinstance(record, dict) and set(record) == {"_meta"} and isinstance(record["_meta"], dict):
                    meta.update(record["_meta"])
                    continue
                try:
                    record = self.as_of(record, meta)
                    if record is None:  # not public yet (a season replayed on a simulated clock)
                        continue
                    paper = parse_record(record, meta, self.name)
                except ValueError as exc:
                    yield SourceFailure(item, str(exc))
                    continue
                over = self.limits.refusal(paper)
                if over is not None:
                    yield SourceFailure(item, f"{over}; paper {paper.paper_id[:60]!r} refused")
                    continue
                taken = [(r.review_id, owners[r.review_id]) for r in paper.reviews
                         if owners.get(r.review_id, (paper.paper_id, 0))[0] != paper.paper_id]
                if taken:
                    rid, (other, line) = taken[0]
                    yield SourceFailure(item, f"review id {rid!r} already belongs to paper {other!r} (line {line}); "
                                              "a review id names one review of one paper: paper refused")
                    continue
                for r in paper.reviews:
                    owners.setdefault(r.review_id, (paper.paper_id, number))
                if since is not None and paper.submitted_at is not None and paper.submitted_at < since:
                    continue
                yielded += 1
                yield paper


#: The bundled samples (see ``data/SOURCES.md``): name -> (file, the day its reviews became public, summary).
#: ``bundled`` alone is :data:`DEFAULT_BUNDLED`: the newest, so that the default board ranks models on papers
#: whose reviews appeared after their training cutoff.
BUNDLED: dict[str, tuple[str, str, str]] = {
    "iclr2026": ("iclr2026_reviews.jsonl", "2025-11-12",
                 "ICLR 2026 sample (300 papers, 1,168 reviews, public 2025-11-12, CC BY 4.0)"),
    "iclr2020": ("iclr2020_reviews.jsonl", BUNDLED_REVIEWS_PUBLIC_AT,
                 "ICLR 2020 sample (400 accepted papers, 1,223 reviews, public 2019-11-08)"),
}
DEFAULT_BUNDLED = "iclr2026"


def bundled_path(name: str = "iclr2020") -> Path:
    """Path of a bundled sample inside the installed package (``iclr2020``, the test and probe fixture, or
    ``iclr2026``)."""
    return Path(str(resources.files("grebench.ingest") / "data" / BUNDLED[name][0]))


def bundled_source(name: str = DEFAULT_BUNDLED, limits: IngestLimits | None = None) -> ArchiveSource:
    """A real sample shipped with the package (see ``data/SOURCES.md``)."""
    return ArchiveSource(bundled_path(name), name="bundled" if name == DEFAULT_BUNDLED else f"bundled:{name}",
                         meta={"reviews_public_at": BUNDLED[name][1]}, limits=limits)


def check_bundled_arg(arg: str) -> None:
    """``bundled[:NAME]`` names a bundled sample (checked before any work)."""
    if (arg.strip().lower() or DEFAULT_BUNDLED) not in BUNDLED:
        raise SourceError(f"unknown bundled sample {arg!r}; bundled samples: {', '.join(BUNDLED)}")


@SOURCES.register("bundled", spec="bundled[:iclr2026|iclr2020]",
                  summary="a bundled real sample: ICLR 2026 (default; reviews public 2025-11-12, after every "
                          "built-in model's cutoff) or ICLR 2020", check_arg=check_bundled_arg)
def make_bundled(arg: str, settings: Settings) -> ArchiveSource:
    """``bundled`` (the default sample) or ``bundled:NAME``."""
    check_bundled_arg(arg)
    return bundled_source(arg.strip().lower() or DEFAULT_BUNDLED, IngestLimits.from_settings(settings.limits))


def check_archive_arg(arg: str) -> None:
    """``archive:PATH`` names a file that exists (checked before any work; reading it is ingest's)."""
    if not arg:
        raise SourceError("archive source spec must be archive:PATH")
    path = Path(arg).expanduser()
    if not path.exists():
        raise SourceError(f"{path}: no such file")
    if not path.is_file():
        raise SourceError(f"{path} is not a file")


@SOURCES.register("archive", spec="archive:PATH", summary="a JSON Lines archive (docs/archive-format.md)",
                  check_arg=check_archive_arg)
def make_archive(arg: str, settings: Settings) -> ArchiveSource:
    """``archive:PATH``: a JSON Lines file of papers with their reviews."""
    if not arg:
        raise SourceError("archive source spec must be archive:PATH")
    return ArchiveSource(Path(arg), limits=IngestLimits.from_settings(settings.limits))

"""Seasons: archives with dates, read as they stood at the clock's "now" (``grebench replay``; docs/replay.md).

A season file is the archive format (docs/archive-format.md) plus dates: each paper's ``submitted_at`` (when it was
posted; required), the venue's ``reviews_public_at``, and per review ``created_at``, ``modified_at`` (the date of
its ``content``), ``visible_at`` (when that review became public; default: the later of ``reviews_public_at`` and
its creation: a late review arrives late) and ``history``, its earlier versions ``[{"modified_at", "content"}]``.
At a given "now" (:func:`grebench.store.utcnow`: a replay's simulated clock) the source yields the papers posted by
then, each with the reviews public by then, each review as its latest version modified by then: what OpenReview
showed that day.  Ingest stores a changed review as a new version, so an edit lands on the day it was made.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Any

from grebench.ingest._archive import ArchiveSource, IngestLimits, check_archive_arg, parse_time
from grebench.ingest._source import SOURCES, SourceError
from grebench.settings import Settings
from grebench.store import utcnow

#: The shipped season (see ``data/SOURCES.md``): ``season:bundled``.
BUNDLED_SEASON = "iclr2026_season.jsonl"
_SEASON_ONLY = ("created_at", "history")


def bundled_season_path() -> Path:
    """Path of the shipped season inside the installed package."""
    return Path(str(resources.files("grebench.ingest") / "data" / BUNDLED_SEASON))


def _review_as_of(raw: Any, public_default: datetime | None, now: datetime, where: str) -> dict[str, Any] | None:
    """One review as it stood at ``now`` (its latest version modified by then), or None while it is hidden."""
    if not isinstance(raw, dict):
        return raw  # parse_record says what is wrong with it
    what = f"{where}: review {raw.get('id')!r}"
    history = raw.get("history") or []
    if not isinstance(history, list) or not all(isinstance(h, dict) for h in history):
        raise ValueError(f"{what}: 'history' must be a list of objects")
    versions = [(parse_time(h.get("modified_at"), f"{what}: history modified_at"), h) for h in history]
    versions.append((parse_time(raw.get("modified_at"), f"{what}: modified_at"), raw))
    if any(when is None for when, _ in versions[:-1]):
        raise ValueError(f"{what}: every 'history' version needs its modified_at")
    dated = sorted((when, i, v) for i, (when, v) in enumerate(versions) if when is not None)
    created = parse_time(raw.get("created_at"), f"{what}: created_at") or (dated[0][0] if dated else None)
    public = parse_time(raw.get("visible_at"), f"{what}: visible_at")
    if public is None:
        known = [d for d in (public_default, created) if d is not None]
        public = max(known) if known else None
    if public is not None and public > now:
        return None
    when, version = None, raw  # undated: the one version there is
    if dated:  # the latest version modified by now (the first one, when it is public before its own date)
        upto = [(w, v) for w, _, v in dated if w <= now]
        when, version = upto[-1] if upto else (dated[0][0], dated[0][2])
    out = {k: v for k, v in raw.items() if k not in _SEASON_ONLY}
    out.update(content=version.get("content"), modified_at=when and when.isoformat(),
               visible_at=public and public.isoformat())
    if version is not raw:  # an earlier version's judgments are its own (none unless stored with it)
        out["judgments"] = version.get("judgments")
    return out


class SeasonSource(ArchiveSource):
    """A season file read at the clock's "now": papers posted by then, reviews public by then, as edited by then."""

    def as_of(self, record: Any, meta: dict[str, Any]) -> Any:
        """The record as it stood at ``utcnow()``, or None before the paper was posted."""
        if not isinstance(record, dict):
            return record
        where = f"paper {record.get('id')!r}"
        posted = parse_time(record.get("submitted_at"), f"{where}: submitted_at")
        if posted is None:
            raise ValueError(f"{where}: a season record needs 'submitted_at' (the day the paper was posted)")
        now = utcnow()
        if posted > now:
            return None
        public = parse_time(record.get("reviews_public_at", meta.get("reviews_public_at")),
                            f"{where}: reviews_public_at")
        reviews = record.get("reviews")
        if not isinstance(reviews, list):
            return record
        shown = [_review_as_of(r, public, now, where) for r in reviews]
        return {**record, "reviews": [r for r in shown if r is not None]}


def season_span(source: SeasonSource) -> tuple[datetime, datetime]:
    """The first day a paper was posted, at midnight, and the first midnight by which everything had changed (a
    review shown or edited): the default days of a replay, the last of which shows the season's last change."""
    posted: list[datetime] = []
    changed: list[datetime] = []
    meta: dict[str, Any] = {}
    with source.path.open("rb") as handle:
        for raw in handle:
            try:
                record = json.loads(raw)
            except ValueError:
                continue  # ingest reports bad lines; the span reads the good ones
            if not isinstance(record, dict):
                continue
            if set(record) == {"_meta"} and isinstance(record["_meta"], dict):
                meta.update(record["_meta"])
                continue
            where = f"paper {record.get('id')!r}"
            when = parse_time(record.get("submitted_at"), f"{where}: submitted_at")
            if when is not None:
                posted.append(when)
            public = parse_time(record.get("reviews_public_at", meta.get("reviews_public_at")), where)
            changed += [public] if public else []
            for review in record.get("reviews") or []:
                if isinstance(review, dict):
                    for version in [review, *(review.get("history") or [])]:
                        for key in ("modified_at", "visible_at", "created_at"):
                            stamp = parse_time(version.get(key), where) if isinstance(version, dict) else None
                            changed += [stamp] if stamp else []
    if not posted:
        raise SourceError(f"{source.path}: no paper with a submitted_at: not a season file")
    first, last = min(posted), max(posted + changed)
    end = datetime(last.year, last.month, last.day)
    return datetime(first.year, first.month, first.day), end if end == last else end + timedelta(days=1)


def check_season_arg(arg: str) -> None:
    """``season:PATH`` names a file that exists, ``season:bundled`` the shipped season."""
    if arg.strip().lower() != "bundled":
        check_archive_arg(arg)


@SOURCES.register("season", spec="season:PATH|bundled",
                  summary="a season file read as it stood at the clock's now (grebench replay; docs/replay.md)",
                  check_arg=check_season_arg)
def make_season(arg: str, settings: Settings) -> SeasonSource:
    """``season:PATH`` or ``season:bundled``."""
    if not arg:
        raise SourceError("season source spec must be season:PATH or season:bundled")
    bundled = arg.strip().lower() == "bundled"
    path = bundled_season_path() if bundled else Path(arg).expanduser()
    return SeasonSource(path, name="season:bundled" if bundled else f"season:{path}",
                        limits=IngestLimits.from_settings(settings.limits))

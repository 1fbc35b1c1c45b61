"""The one parser of date and time options (``leaderboard --as-of``, ``replay --from/--to``, the dates of
``bench import`` and ``submit``): what each accepts is written once, here.

Accepted: a date ``2025-11-12``, or a date-time ``2025-11-12T06:00`` (seconds and fractions optional, ``T`` or a
blank between), either followed by ``Z`` or an offset ``+02:00`` / ``-0530``.  Without a zone a time is UTC.  A date
alone names a day: its first instant, or its last with ``day_end`` (``--as-of 2025-11-12`` is "as published by the end
of that day"); a zone after a date says whose day (``2025-11-12Z`` is the UTC day, never midnight as a time).  With
``day_end`` a time names the span it is written to the same way: ``06:00`` is that minute and ``06:00:00`` that second,
up to its last microsecond (issue 64: a replay's clock stamps a version ``00:00:00.000145``, and ``--as-of
2025-11-14T00:00:00Z`` found the version before it; a board version's id is itself to the second).  The
result is timezone-aware UTC; :func:`grebench.store.naive_utc` turns it into the store's naive UTC at the store's
edge.  The standard library reads each part (``date.fromisoformat``, ``time.fromisoformat``); the pattern only
splits them, because ``datetime.fromisoformat("2025-11-12+02:00")`` reads the offset as a time of day.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, timedelta, timezone, tzinfo
from typing import Any

import click

_FORM = re.compile(r"^(?P<date>\d{4}-\d{2}-\d{2})(?:[T ](?P<time>\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?))?"
                   r"(?P<zone>[Zz]|[+-]\d{2}:?\d{2})?$")
#: What the options accept, as their refusals say it.
FORMS = "a date (YYYY-MM-DD) or an ISO date-time (YYYY-MM-DDTHH:MM[:SS]), optionally with Z or an offset like +02:00"


def _zone(text: str | None) -> tzinfo:
    if text is None or text in ("Z", "z"):
        return UTC
    sign = -1 if text[0] == "-" else 1
    digits = text[1:].replace(":", "")
    hours, minutes = int(digits[:2]), int(digits[2:])
    if hours > 23 or minutes > 59:
        raise ValueError(f"offset {text} is out of range")
    return timezone(sign * timedelta(hours=hours, minutes=minutes))


def parse_when(text: str, *, day_end: bool = False) -> datetime:
    """``text`` (see the module docstring) as an aware UTC datetime; ``ValueError`` saying what is accepted."""
    match = _FORM.match(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not {FORMS}")
    try:
        day = date.fromisoformat(match["date"])
        clock = time.fromisoformat(match["time"]) if match["time"] else time.max if day_end else time.min
        zone = _zone(match["zone"])
    except ValueError as exc:
        raise ValueError(f"{text!r} is not a valid date or time: {exc}") from None
    when = datetime.combine(day, clock, tzinfo=zone)
    if day_end and match["time"] and "." not in match["time"]:  # the end of the minute or second written
        span = timedelta(minutes=1) if match["time"].count(":") == 1 else timedelta(seconds=1)
        when += span - timedelta(microseconds=1)
    return when.astimezone(UTC)


def parse_day(text: str) -> date:
    """A calendar date, ``YYYY-MM-DD`` (a training cutoff, a release date); ``ValueError`` otherwise."""
    try:
        return date.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"{text!r} is not a date (YYYY-MM-DD)") from None


class When(click.ParamType):
    """A date or date-time option, parsed by :func:`parse_when` when the command line is read (before any work);
    ``day_end``: a date alone means the end of that day."""

    name = "DATE"

    def __init__(self, day_end: bool = False) -> None:
        self.day_end = day_end

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> datetime:
        """The value as an aware UTC datetime; a usage error (exit 2) naming the accepted forms otherwise."""
        if isinstance(value, datetime):
            return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        try:
            return parse_when(str(value), day_end=self.day_end)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


class Day(click.ParamType):
    """A calendar-date option (``YYYY-MM-DD``), checked when the command line is read; handed on as its ISO text."""

    name = "YYYY-MM-DD"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        """The date's ISO text ("" stays "": not given); a usage error (exit 2) otherwise."""
        if not str(value).strip():
            return ""
        try:
            return parse_day(str(value)).isoformat()
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


def shown(when: datetime | None) -> str:
    """A time as the CLI prints it: UTC to the second, ``2025-11-12 06:00:00 UTC`` (no microseconds); a naive time
    is UTC (the store's); no time is ``-``."""
    if not isinstance(when, datetime):
        return "-" if when is None else str(when)
    aware = when if when.tzinfo is not None else when.replace(tzinfo=UTC)
    return f"{aware.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"

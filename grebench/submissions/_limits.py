"""How often one may submit: a weekly quota of accepted entries, and a separate limit on refused tries.

Only **accepted** submissions and review uploads count toward the weekly quota (``submissions_per_week`` per
submitter, ``submissions_per_address_per_week`` per network address): a form refused for a typo costs nothing of
it.  Refused tries have their own anti-abuse limit, ``submission_refusals_per_address_per_hour`` per address, so
that probing the checks (each may resolve a name) stays bounded without locking anyone out for a week.  Every
refusal by a limit says when the next try is allowed, as a date and time (UTC), and the form states the limits.

Tables (queue file only, never copied to the main store or exported): ``submission_sources`` (the address of
each accepted entry) and ``submission_refusals`` (the address and time of each refused try).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

import duckdb

from grebench.settings import SubmissionSettings

WEEK = timedelta(days=7)
HOUR = timedelta(hours=1)

#: Where each accepted submission and upload came from: the network address the app saw, for a quota that a fresh
#: e-mail address cannot reset.
SOURCES_DDL = """
CREATE TABLE IF NOT EXISTS submission_sources (
    id VARCHAR PRIMARY KEY,
    address VARCHAR NOT NULL,
    created_at TIMESTAMP NOT NULL
)
"""
#: Refused tries per address (the anti-abuse limit); before issue 50 they sat in ``submission_sources`` under ids
#: ``refused-…`` and counted toward the weekly quota: :func:`create_tables` moves them here.
REFUSALS_DDL = """
CREATE TABLE IF NOT EXISTS submission_refusals (
    address VARCHAR NOT NULL,
    created_at TIMESTAMP NOT NULL
)
"""


def create_tables(con: duckdb.DuckDBPyConnection) -> None:
    """Create the limit tables; refusals an older queue file counted as sources move to their own table."""
    con.execute(SOURCES_DDL)
    con.execute(REFUSALS_DDL)
    if con.execute("SELECT count(*) FROM submission_sources WHERE id LIKE 'refused-%'").fetchone() != (0,):
        con.execute("INSERT INTO submission_refusals SELECT address, created_at FROM submission_sources "
                    "WHERE id LIKE 'refused-%'")
        con.execute("DELETE FROM submission_sources WHERE id LIKE 'refused-%'")


def when(moment: datetime) -> str:
    """A moment as the form says it: ``2026-11-29 14:03 UTC`` (rounded up to the minute: never too early)."""
    up = moment.replace(second=0, microsecond=0) + (timedelta(minutes=1) if moment.second or moment.microsecond
                                                    else timedelta())
    return up.strftime("%Y-%m-%d %H:%M UTC")


def _next_free(times: list[datetime], limit: int, window: timedelta, now: datetime) -> datetime | None:
    """When one more entry fits under ``limit`` per ``window`` given the entries' ``times`` in the window (None: one
    fits now).  The oldest entries leave the window first."""
    if len(times) < limit:
        return None
    if limit <= 0:
        return now + window
    ordered = sorted(times)
    return ordered[len(ordered) - limit] + window


@dataclass(frozen=True)
class Allowance:
    """What one address (and, when known, one submitter) may still do, and when the next try is allowed."""

    used: int                      # accepted entries from the address in the last 7 days
    limit: int                     # submissions_per_address_per_week
    refusals: int                  # refused tries from the address in the last hour
    refusal_limit: int             # submission_refusals_per_address_per_hour
    next_try: datetime | None      # None: a try is allowed now
    reason: str | None             # which limit is reached (None: none)

    def sentence(self) -> str:
        """The allowance in words, for the form."""
        left = max(0, self.limit - self.used)
        text = (f"From your network address: {self.used} of {self.limit} accepted submissions or uploads used in the "
                f"last 7 days ({left} left); refused tries do not count toward them.")
        if self.next_try is not None:
            text += f" Now: {self.reason}; next try allowed after {when(self.next_try)}."
        return text


def address_allowance(con: duckdb.DuckDBPyConnection, quota: SubmissionSettings, source: str | None,
                      now: datetime) -> Allowance:
    """The weekly quota and the refusal limit of one address (no address: nothing is limited by address)."""
    limit, refusal_limit = quota.submissions_per_address_per_week, quota.submission_refusals_per_address_per_hour
    if not source:
        return Allowance(0, limit, 0, refusal_limit, None, None)
    accepted = [r[0] for r in con.execute("SELECT created_at FROM submission_sources WHERE address = ? AND "
                                          "created_at > ?", [source, now - WEEK]).fetchall()]
    refused = [r[0] for r in con.execute("SELECT created_at FROM submission_refusals WHERE address = ? AND "
                                         "created_at > ?", [source, now - HOUR]).fetchall()]
    weekly = _next_free(accepted, limit, WEEK, now)
    hourly = _next_free(refused, refusal_limit, HOUR, now)
    if hourly is not None and (weekly is None or hourly >= weekly):
        reason = (f"too many refused tries from your network address ({len(refused)} in the last hour, limit "
                  f"{refusal_limit})")
        return Allowance(len(accepted), limit, len(refused), refusal_limit, hourly, reason)
    if weekly is not None:
        reason = (f"rate limit reached for your network address ({limit} accepted submissions or uploads per "
                  "7 days)")
        return Allowance(len(accepted), limit, len(refused), refusal_limit, weekly, reason)
    return Allowance(len(accepted), limit, len(refused), refusal_limit, None, None)


def submitter_next_try(con: duckdb.DuckDBPyConnection, quota: SubmissionSettings, submitter: str,
                       now: datetime) -> datetime | None:
    """When the submitter (the contact, lower-case) may have one more entry accepted (None: now).  Counts the queued,
    running, finished and failed entries of the last 7 days, endpoint submissions and uploads together: only
    accepted entries are ever stored."""
    rows = con.execute("SELECT created_at FROM submissions WHERE submitter = ? AND created_at > ? UNION ALL "
                       "SELECT created_at FROM import_submissions WHERE submitter = ? AND created_at > ?",
                       [submitter, now - WEEK, submitter, now - WEEK]).fetchall()
    return _next_free([r[0] for r in rows], quota.submissions_per_week, WEEK, now)


def record_source(con: duckdb.DuckDBPyConnection, sub_id: str, source: str | None, now: datetime) -> None:
    """Remember where an accepted entry came from (it counts toward the address's weekly quota)."""
    if source:
        con.execute("INSERT INTO submission_sources VALUES (?, ?, ?)", [sub_id, source[:100], now])


def record_refusal(con: duckdb.DuckDBPyConnection, source: str | None, now: datetime) -> None:
    """Count one refused try against its address (the refusal limit only, never the weekly quota)."""
    if source:
        con.execute("INSERT INTO submission_refusals VALUES (?, ?)", [source[:100], now])


def pending(con: duckdb.DuckDBPyConnection) -> int:
    """Entries waiting in the queue (endpoint submissions and uploads)."""
    row = cast("tuple[Any, ...]", con.execute(
        "SELECT (SELECT count(*) FROM submissions WHERE status = 'queued') + "
        "(SELECT count(*) FROM import_submissions WHERE status = 'queued')").fetchone())
    return int(row[0])


def limits_sentence(quota: SubmissionSettings) -> str:
    """The limits in words, as the Submit form states them."""
    return (f"Limits: {quota.submissions_per_week} accepted submissions per contact and "
            f"{quota.submissions_per_address_per_week} per network address in any 7 days (endpoint submissions "
            "and review uploads together). Refused tries do not count toward these; more than "
            f"{quota.submission_refusals_per_address_per_hour} refused tries from one address in an hour pause "
            "submitting from it for the rest of that hour. Every refusal by a limit says when the next try is "
            "allowed.")

"""``grebench replay``: a season run day by day on a simulated clock through the scheduler's own jobs.

Each simulated day the clock is set to that day and the service runs ``poll`` (ingest what the season showed by
then: :class:`grebench.ingest.SeasonSource`), ``generate`` (sealed generations for papers whose reviews are still
hidden) and ``score``; the day's board rows go to ``replay_history``; ``site`` publishes a board version dated at
the simulated time (with the history drawn) and the day is marked done.  After the last day ``snapshot`` cuts a
snapshot of each venue-year.  A replay killed mid-day runs that day again when restarted (the jobs skip what they
finished), the done days never.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, TypedDict

from grebench import stop
from grebench.scheduler._service import JobOutcome, SchedulerService
from grebench.settings import Settings
from grebench.store import SimulatedClock, Store, naive_utc

#: The jobs of one simulated day, in order (the service's ``queue`` has nothing to do in a replay); the site job is
#: last: it draws the board history, written after scoring.
DAY_JOBS = ("poll", "generate", "score", "site")


def replay_days(start: datetime, end: datetime, step: timedelta) -> list[datetime]:
    """The simulated times from ``start`` to ``end`` (inclusive) every ``step``, as naive UTC (aware times are
    converted: :func:`grebench.store.naive_utc`)."""
    start, end = naive_utc(start), naive_utc(end)
    if step <= timedelta(0):
        raise ValueError(f"the step must be positive, got {step}")
    if end < start:
        raise ValueError(f"the last day ({end:%Y-%m-%d %H:%M} UTC) is before the first ({start:%Y-%m-%d %H:%M} UTC)")
    out, day = [], start
    while day <= end:
        out.append(day)
        day += step
    return out


class DayFacts(TypedDict):
    """What the store held at the end of a replayed day (counts, and the latest board version)."""

    papers: int
    papers_scoreable: int
    papers_scored: int
    sealed_generations: int
    review_versions: int
    board_version: str | None


def _day_facts(store: Store) -> DayFacts:
    latest = store.scalar("SELECT version_id FROM board_versions ORDER BY published_at DESC LIMIT 1")
    return {
        "papers": store.scalar("SELECT count(*) FROM papers"),
        "papers_scoreable": store.scalar("SELECT count(DISTINCT paper_id) FROM baseline_splits"),
        "papers_scored": store.scalar("SELECT count(DISTINCT paper_id) FROM scores"),
        "sealed_generations": store.scalar("SELECT count(*) FROM generations WHERE sealed"),
        "review_versions": store.scalar("SELECT count(*) FROM review_versions"),
        "board_version": latest,
    }


def _record_rows(store: Store, season: str, day: datetime) -> None:
    """The day's board rows (rank with its interval, score with its CI) into ``replay_history`` (after scoring, so
    that the day's site draws that day too)."""
    with store.transaction() as con:
        con.execute("DELETE FROM replay_history WHERE season = ? AND day = ?", [season, day])
        con.execute("INSERT INTO replay_history (season, day, board_id, metric, scope, candidate, rank, rank_low, "
                    "rank_high, score, ci95_low, ci95_high, papers) SELECT ?, ?, b.board_id, b.metric, b.scope, "
                    "r.candidate, r.rank, r.rank_low, r.rank_high, r.score, r.ci95_low, r.ci95_high, r.papers "
                    "FROM boards b JOIN board_rows r USING (board_id)", [season, day])


class ReplayedDay(DayFacts):
    """A replayed day (:func:`replay`): when, done, the store's facts then, and each job's status."""

    day: datetime
    status: str                     # done
    jobs: dict[str, str]            # job -> its status


def _record_day(store: Store, season: str, day: datetime, jobs: list[JobOutcome]) -> ReplayedDay:
    """The day's facts, and the day ``done``."""
    facts = _day_facts(store)
    with store.transaction() as con:
        con.execute("UPDATE replay_days SET status = 'done', papers = ?, papers_scoreable = ?, papers_scored = ?, "
                    "sealed_generations = ?, review_versions = ?, board_version = ?, jobs_json = ? "
                    "WHERE season = ? AND day = ?",
                    [facts["papers"], facts["papers_scoreable"], facts["papers_scored"],
                     facts["sealed_generations"], facts["review_versions"], facts["board_version"],
                     json.dumps([{"job": j["job"], "status": j["status"], "error": j.get("error")} for j in jobs]),
                     season, day])
    store.checkpoint()
    return {"day": day, "status": "done", **facts, "jobs": {j["job"]: j["status"] for j in jobs}}


def replay(settings: Settings, store: Store, season: str, days: Sequence[datetime], *,
           on_day: Callable[[ReplayedDay], None] | None = None) -> list[ReplayedDay]:
    """Replay ``season`` (a source spec, ``season:PATH`` or ``season:bundled``) on ``days`` (simulated naive-UTC
    times, increasing) on ``store``; days already done are skipped.  ``on_day`` hears of each day once it is done.
    Returns the days run now."""
    if not days:
        return []
    days = [naive_utc(d) for d in days]  # the store's days are naive UTC: an aware day would never match one
    settings = settings.replace(venues=season)
    done = {r["day"] for r in store.rows("SELECT day FROM replay_days WHERE season = ? AND status = 'done'",
                                         [season])}
    todo = [d for d in days if d not in done]
    if not todo:
        return []
    clock = SimulatedClock(todo[0])
    service = SchedulerService(settings, store, kinds=(*DAY_JOBS, "snapshot"), clock=clock)
    out = []
    for day in todo:
        clock.set(max(day, clock.now()))
        store.con.execute("INSERT INTO replay_days (season, day, status) VALUES (?, ?, 'running') "
                          "ON CONFLICT DO NOTHING", [season, day])
        store.checkpoint()
        jobs = [service.run_job(kind) for kind in DAY_JOBS[:-1]]
        _record_rows(store, season, day)
        jobs.append(service.run_job(DAY_JOBS[-1]))
        stop.check()  # a stop during the day: the day stays running (the next start runs it again), never done
        row = _record_day(store, season, day, jobs)
        out.append(row)
        if on_day is not None:
            on_day(row)
    stop.check()
    _request_snapshots(settings, store)
    service.run_job("snapshot")
    return out


def _request_snapshots(settings: Settings, store: Store) -> None:
    """Ask the snapshot job for a snapshot of every venue-year replayed (the file the CLI writes under serve)."""
    venues = [r["venue_id"] for r in store.rows("SELECT DISTINCT venue_id FROM papers ORDER BY venue_id")]
    path = settings.snapshot_requests_path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(venues), encoding="utf-8")


def history(store: Store, season: str | None = None) -> dict[str, Any]:
    """The board history of the replays in ``store`` (of ``season`` only, if given): each day's facts and rows,
    each row with its board's ``scope``, ``all`` or ``sealed`` (recorded with the row; for days replayed before
    that, read from ``boards`` where the board is still stored, else None)."""
    where, params = ("WHERE season = ?", [season]) if season else ("", [])
    days = store.rows(f"SELECT * FROM replay_days {where} ORDER BY season, day", params)
    # a store not migrated yet (opened read-only) has no recorded scope
    scope = "h.* EXCLUDE (scope), coalesce(h.scope, b.scope)" if "scope" in store.columns("replay_history") \
        else "h.*, b.scope"
    rows = store.rows(f"SELECT {scope} AS scope FROM replay_history h LEFT JOIN boards b USING (board_id) {where} "
                      "ORDER BY season, day, h.metric, scope NULLS LAST, board_id, rank NULLS LAST, candidate", params)
    return {"days": days, "rows": rows}

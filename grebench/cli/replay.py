"""`grebench replay`: a season on a simulated clock through the scheduler's jobs, and its board history."""

from __future__ import annotations

import re
import sys
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import click

from grebench.cli._common import emit_json, reader_store, stoppable, writer_store
from grebench.cli._dates import When, shown
from grebench.cli._options import settings_options
from grebench.settings import Settings

if TYPE_CHECKING:
    from grebench.scheduler import ReplayedDay

_STEP = re.compile(r"^\s*(\d+)\s*([dhm])\s*$")
_UNITS = {"d": "days", "h": "hours", "m": "minutes"}


def _step(text: str) -> timedelta:
    match = _STEP.match(text)
    if not match or int(match.group(1)) <= 0:
        raise click.BadParameter(f"{text!r}: a positive step like 1d, 12h or 30m", param_hint="--step")
    return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})


def _season_spec(season: str) -> str:
    return "season:bundled" if season.strip().lower() == "bundled" else f"season:{season}"


def _show_day(row: ReplayedDay) -> None:
    jobs = " ".join(f"{k}={v}" for k, v in row["jobs"].items())
    click.echo(f"day {row['day']:%Y-%m-%d %H:%M}: {row['papers']} papers, {row['papers_scoreable']} scoreable, "
               f"{row['papers_scored']} scored, {row['sealed_generations']} sealed generations, "
               f"{row['review_versions']} review versions, board {row['board_version'] or '-'} ({jobs})")


@click.command("replay")
@click.option("--season", metavar="PATH|bundled",
              help="A season file (docs/replay.md: the archive format plus dates) or `bundled` (the default: 30 ICLR "
                   "2026 papers, scripts/make_replay_season.py).  With --history: that season only.")
@click.option("--from", "start", type=When(), help="First simulated day (default: the first paper's posting day): "
              "a date (its midnight) or a date-time, UTC unless it says Z or an offset.")
@click.option("--to", "end", type=When(), help="Last simulated day (default: the season's last change); not before "
              "--from.")
@click.option("--step", default="1d", show_default=True,
              help="Simulated time between two runs of the jobs: Nd, Nh, Nm.")
@click.option("--history", "show_history", is_flag=True, help="Show the stored board history (each day's rank with its "
              "95% rank interval, score with its 95% CI); replay nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@settings_options
@click.pass_obj
def command(settings: Settings, season: str | None, start: datetime | None, end: datetime | None, step: str,
            show_history: bool, as_json: bool) -> None:
    """Replay a season day by day on a simulated clock through the same jobs `grebench serve` runs.

    Each simulated day: poll (papers posted by then, reviews public by then, as edited by then), generate (sealed
    generations for papers whose reviews are still hidden), score, and site (a board version dated at the simulated
    time); the day's ranks, scores and CIs go to the board history.  After the last day a snapshot is cut.  Killed
    mid-day, the same command resumes on that day; done days are not run again.  The settings' `venues` are
    replaced by the season; everything else (estimator, candidates, data_dir) is the settings'.  Exit 1 when a
    job failed on some day (the day is still done: the next day's jobs run as serve's would)."""
    from grebench.ingest import SourceError, resolve_source, season_span
    from grebench.scheduler import history, replay, replay_days

    spec = _season_spec(season or "bundled")
    if show_history:
        reader = reader_store(settings, hint="run `grebench replay` first")
        try:
            out = history(reader.store, None if season is None else spec)
        finally:
            reader.close()
        _print_history(out, as_json)
        return
    step_delta = _step(step)
    try:
        source = resolve_source(spec, settings)
        first, last = season_span(source)  # type: ignore[arg-type]
    except (SourceError, OSError, ValueError) as exc:
        raise click.UsageError(f"--season {season}: {exc}") from None
    try:  # every day checked before the store is opened: a reversed range is a usage error, not a traceback
        days = replay_days(start or first, end or last, step_delta)
    except ValueError as exc:
        given = " and ".join(f"{flag} {shown(when)}" for flag, when in (("--from", start), ("--to", end)) if when)
        raise click.UsageError(f"{exc}: nothing to replay ({given or 'the season'}; the season runs from "
                               f"{shown(first)} to {shown(last)})") from None
    with stoppable(settings.service), writer_store(settings) as store:
        done = replay(settings, store, spec, days, on_day=None if as_json else _show_day)
        if as_json:
            emit_json({"season": spec, "days_run": done, **history(store, spec)})
        elif not done:
            click.echo(f"every day from {days[0]:%Y-%m-%d} to {days[-1]:%Y-%m-%d} was replayed already "
                       "(grebench replay --history shows them)")
    failed = [f"{d['day']:%Y-%m-%d %H:%M} {job}" for d in done for job, status in d["jobs"].items()
              if status == "failed"]
    if failed:  # the service's faults, as serve records them: the jobs table and runs say why
        click.echo(f"{len(failed)} job(s) failed: {', '.join(failed[:10])} (see grebench stats and the jobs "
                   "table)", err=True)
        sys.exit(1)


def _print_history(out: dict[str, Any], as_json: bool) -> None:
    from grebench.scoring import rank_range

    if as_json:
        emit_json(out)
        return
    if not out["days"]:
        click.echo("no replay in this store (run grebench replay)")
        return
    rows: dict[tuple[str, datetime], list[dict[str, Any]]] = {}
    for r in out["rows"]:
        rows.setdefault((r["season"], r["day"]), []).append(r)
    for d in out["days"]:
        click.echo(f"{d['season']} {d['day']:%Y-%m-%d %H:%M} [{d['status']}]: {d['papers']} papers, "
                   f"{d['papers_scoreable']} scoreable, {d['sealed_generations']} sealed generations")
        for r in rows.get((d["season"], d["day"]), []):
            ci = "" if r["ci95_low"] is None else f" [{r['ci95_low']:.3f}, {r['ci95_high']:.3f}]"
            span = rank_range(r)
            rank = "-" if r["rank"] is None else str(r["rank"]) + (f" ({span})" if span else "")
            board = f"{r['metric']} [{r.get('scope') or 'board gone'}]"  # all and sealed boards are told apart
            click.echo(f"  {board:<18} #{rank:<9} {r['candidate']:<28} {r['score']:.3f}{ci} on {r['papers']}")

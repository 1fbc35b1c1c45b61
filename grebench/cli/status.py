"""`grebench status`: the service's jobs (what ran, how it ended, what is due next, the last error), the store's
last check and the age of the last board."""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path
from typing import Any

import click
import duckdb

from grebench.cli._common import emit_json, holder_name
from grebench.cli._dates import shown
from grebench.cli._options import settings_options
from grebench.settings import Settings
from grebench.store import utcnow


@click.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@settings_options
@click.pass_obj
def command(settings: Settings, as_json: bool) -> None:
    """The jobs table: each job's last outcome, when it last started and finished, when it is next due and its last
    error; the store's last check (`grebench check`, run by `grebench serve` at start and every
    check_interval_min); and how old the last published board version is.

    While `grebench serve` holds the store, what it last wrote of its jobs is shown (DATA_DIR/service-status.json,
    rewritten after every job, with APScheduler's own next run times); otherwise the store's jobs table, with the
    times a service started now would run them.
    """
    from grebench.scheduler import stored_status
    from grebench.store import StoreDamaged, StoreLocked, open_store

    source: str
    try:
        store = open_store(settings.db_path, read_only=True)
    except FileNotFoundError:
        raise click.ClickException(f"no store at {settings.db_path}: nothing has run yet") from None
    except StoreDamaged as exc:
        from grebench.cli._common import damaged_message

        raise click.ClickException(damaged_message(settings, exc.reason)) from None
    except duckdb.IOException as exc:
        if "lock" not in str(exc).lower():
            raise click.ClickException(f"cannot read {settings.db_path}: {str(exc).splitlines()[0][:300]}") from None
        holder = holder_name(StoreLocked(settings.db_path, str(exc)).pid)
        status = _from_service(settings.service_status_path, holder)
        source = f"{holder} holds the store; as it last wrote at {shown(_time(status['written_at']))}"
    else:
        try:
            status = json.loads(json.dumps(stored_status(store, settings.service), default=_iso))
        finally:
            store.con.close()
        source = "no service holds the store; next due: as a service started now would run them"
    now = utcnow()
    board = status.get("board")
    if board is not None:
        board["age_s"] = round((now - _time(board["published_at"])).total_seconds(), 1)
    status["source"] = source
    if as_json:
        emit_json(status)
        return
    click.echo(source)
    if status.get("stale"):
        click.echo(f"warning: the status is stale: {status['stale']}")
    click.echo(f"{'job':<10} {'status':<12} {'last started':<24} {'last finished':<24} {'runs':>5}  "
               f"{'next due':<24} last error")
    for job in status["jobs"]:
        click.echo(f"{job['job_id']:<10} {job['status']:<12} {_when(job['last_started_at']):<24} "
                   f"{_when(job['last_finished_at']):<24} {job['runs']:>5}  {_when(job.get('next_due')):<24} "
                   f"{(job['last_error'] or '-')[:200]}")
    if board is None:
        click.echo("last board: none published yet")
    else:
        click.echo(f"last board: version {board['version']}, published {shown(_time(board['published_at']))} "
                   f"({_age(board['age_s'])} ago)")


def _from_service(path: Path, holder: str) -> Any:
    """The status file the running service wrote (its JSON, as written: :class:`grebench.scheduler.ServiceStatus`
    with times as text)."""
    try:
        status = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise click.ClickException(f"{holder} holds the store and no service status was written ({path} is "
                                   "missing): the status file is written by `grebench serve`") from None
    pid = int(status.get("pid") or 0)
    if pid and not os.path.exists(f"/proc/{pid}") and os.path.isdir("/proc"):
        status["stale"] = f"written by PID {pid}, which is no longer running"
    return status


def _iso(value: Any) -> str:
    return value.isoformat() if isinstance(value, datetime) else str(value)


def _time(text: str) -> datetime:
    return datetime.fromisoformat(str(text).removesuffix("Z"))


def _when(value: str | None) -> str:
    return "-" if not value else shown(_time(value))


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"

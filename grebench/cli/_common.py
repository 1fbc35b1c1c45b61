"""Helpers shared by commands: opening the writer store, JSON output, progress, running a stage."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import click
import duckdb

from grebench.pipeline import JobObserver, ResolvedRun, RunOptions
from grebench.progress import Progress, progress_for
from grebench.settings import ServiceSettings, Settings
from grebench.store import (
    Store,
    StoreDamaged,
    StoreLocked,
    failure_text,
    io_cause,
    is_damage,
    note_damage,
    open_store,
)


def open_writer(settings: Settings, locked_ok: bool = False) -> Store:
    """Open the writer's store, or end the command with one line: a data directory that cannot hold it (a file,
    read-only, cannot be created) is a usage error (exit 2) said before anything is written; a store another
    process holds names that process (```grebench serve` (PID 123)``), at once (``locked_ok``: raise
    :class:`grebench.store.StoreLocked` instead, for a command that can then use what was published)."""
    from grebench.pipeline import SetupError, check_data_dir

    try:
        check_data_dir(settings)
    except SetupError as exc:
        raise click.UsageError(str(exc)) from None
    try:
        return open_store(settings.db_path)
    except StoreLocked as exc:
        if locked_ok:
            raise
        raise click.ClickException(locked_message(settings.db_path, exc)) from None
    except StoreDamaged as exc:
        if locked_ok:  # a command that can use what was published instead
            raise
        raise click.ClickException(damaged_message(settings, exc.reason)) from None
    except RuntimeError as exc:
        raise click.ClickException(str(exc)) from None
    except (duckdb.Error, OSError) as exc:
        raise click.ClickException(_store_failure(settings, exc)) from None


def damaged_message(settings: Settings, reason: str) -> str:
    """What every command says of a damaged store: what was found, and the two ways back (the backups ``serve``
    keeps, the snapshots), each as commands."""
    from grebench.store import backups

    db = settings.db_path
    found = backups(settings.backups_path)
    aside = f"stop the service, move {db.name} (and {db.name}.wal, if any) aside"
    if found:
        restore = f"restore the newest backup `grebench serve` keeps: {aside}, then `cp {found[-1]} {db}`"
    else:
        restore = (f"restore a backup ({aside} and copy one in; `grebench serve` keeps the last "
                   f"{settings.service.backup_keep} in {settings.backups_path}, none is there yet)")
    return (f"the store {db} is damaged ({reason[:300]}). To repair it, {restore}; or rebuild it from the last "
            f"snapshots: with the damaged file moved aside, `grebench snapshot import DIR` each folder of "
            f"{settings.snapshots_path}, then `grebench run` computes the rest. `grebench check` verifies the "
            "result. Meanwhile readers (`stats`, `leaderboard`, `export`, `site build --out`) show the last "
            "published export.")


def locked_message(db: Path, exc: StoreLocked) -> str:
    """What a writer says when another process holds the store: who, and what to do (DuckDB's own text names the
    interpreter, ``python3.11``, not the command)."""
    return (f"the store {db} is in use: {holder_name(exc.pid)} holds it, and only one grebench writer "
            "may run on a data directory at a time. Wait for it to finish or stop it (SIGTERM), or use another "
            "--data-dir; readers (`grebench stats`, `leaderboard`, `export`) work beside it.")


@contextmanager
def writer_store(settings: Settings, locked_ok: bool = False) -> Iterator[Store]:
    """The writer's store for the block (:func:`open_writer`); a store that cannot be written during the block
    (a full disk) ends the command with one line, no traceback; a damaged one with the remedy (``locked_ok``: raises
    :class:`grebench.store.StoreDamaged`, for a command that can then use what was published)."""
    store = open_writer(settings, locked_ok)
    try:
        yield store
    except StoreDamaged as exc:  # found while working (a stage read a damaged block)
        _close_quietly(store)
        if locked_ok:  # the command uses what was published instead
            raise
        raise click.ClickException(damaged_message(settings, exc.reason)) from None
    except duckdb.Error as exc:  # e.g. disk full: the database is invalidated; say so plainly, no traceback
        if is_damage(exc):  # a damaged block met while working: said with the remedy, remembered for the next command
            _close_quietly(store)
            reason = str(exc).splitlines()[0][:300]
            note_damage(settings.db_path, reason)
            if locked_ok:
                raise StoreDamaged(settings.db_path, reason) from None
            raise click.ClickException(damaged_message(settings, reason)) from None
        store.note_failure(_store_failure(settings, exc))  # the next writer records it as the run's failure
        _close_quietly(store)
        raise click.ClickException(_store_failure(settings, exc)) from None
    except BaseException as exc:
        try:
            store.close()
        except duckdb.Error:  # the block's error invalidated the store (a full disk): it says why, not the close
            store.note_failure(failure_text(exc))
            _close_quietly(store)
        raise
    else:
        try:
            store.close()
        except duckdb.Error as exc:
            store.note_failure(_store_failure(settings, exc))
            _close_quietly(store)
            raise click.ClickException(_store_failure(settings, exc)) from None


#: How long a reader waits for a busy store: attempts and the pause after each (about 3 s in all).
READER_ATTEMPTS, READER_PAUSE_S = 6, 0.5
#: Command-line words that introduce the grebench command in a process's argv (console script or ``-m``).
_PROGRAM = ("grebench", "grebench.cli")


def _pause() -> None:
    time.sleep(READER_PAUSE_S)  # a bounded wait for a writer's transaction to end


def holder_name(pid: int | None) -> str:
    """Who holds the store for writing, as a reader says it: ```grebench run` (PID 123)`` from the process's
    command line where it is a grebench command, else ``another process (PID 123)``."""
    if pid is None:
        return "another process"
    try:
        argv = [a.decode(errors="replace") for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if a]
    except OSError:  # not Linux, or the process is gone
        return f"another process (PID {pid})"
    from grebench.cli._main import COMMANDS

    for i, word in enumerate(argv):
        if Path(word).name in _PROGRAM or (word == "-m" and i + 1 < len(argv) and argv[i + 1] in _PROGRAM):
            command = next((w for w in argv[i + 1:] if w in COMMANDS), None)
            if command is not None:
                return f"`grebench {command}` (PID {pid})"
    return f"another process (PID {pid})"


@dataclass
class Reader:
    """A reader's store: the live one (opened read-only), or the last published state while a writer holds it
    (``published``: which version and when; ``counts``: the exported tables' rows)."""

    store: Store
    published: dict[str, Any] | None = None
    counts: dict[str, int] | None = None
    damaged: str | None = None  # the live store is damaged (why): what is shown is the published export

    def exit_if_damaged(self) -> None:
        """A reader that showed the published export because the store is damaged ends with exit status 1."""
        if self.damaged is not None:
            sys.exit(1)

    def close(self) -> None:
        """Close the store's connection."""
        self.store.con.close()


def reader_store(settings: Settings, hint: str = "run `grebench ingest` first",
                 tables: tuple[str, ...] | None = None) -> Reader:
    """Open the store read-only for a reader command.  While another process (``grebench run``, ``serve``) holds
    it for writing, wait briefly, then read the last published state (the export the site stage writes with every
    publish; ``tables``: only those) and say so on stderr in one line: which writer, which board version."""
    if not settings.db_path.exists():
        raise click.ClickException(f"no store at {settings.db_path}: {hint}")
    holder = "another process"
    for attempt in range(READER_ATTEMPTS):
        try:
            return _whole(settings.db_path, open_store(settings.db_path, read_only=True))
        except StoreDamaged as exc:
            return _published_instead_of_damaged(settings.export_path, damaged_message(settings, exc.reason),
                                                 exc.reason, tables)
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower():
                raise click.ClickException(f"cannot read {settings.db_path}: {str(exc).splitlines()[0][:200]}"
                                           ) from None
            if attempt + 1 < READER_ATTEMPTS:
                _pause()
            else:
                holder = holder_name(StoreLocked(settings.db_path, str(exc)).pid)
    from grebench.site import published_state

    state = published_state(settings.export_path, tables)
    if state is None:
        raise click.ClickException(f"the store is busy ({holder} is writing) and nothing was published yet; "
                                   "try again when it finishes")
    click.echo(f"{holder} is writing the store; showing the last published state: {state.describe()}", err=True)
    return Reader(state.store, {"version": state.version_id, "published_at": state.published_at,
                                "source": str(state.source), "writer": holder}, state.counts)


def _whole(db: Path, store: Store) -> Reader:
    """The live store for a reader once every block of it reads back (checked once per version of the file:
    :func:`grebench.store.ensure_whole`); :class:`StoreDamaged` otherwise."""
    from grebench.store import ensure_whole

    try:
        ensure_whole(store.con, db)
    except BaseException:
        _close_quietly(store)
        raise
    return Reader(store)


def _published_instead_of_damaged(export: Path, message: str, reason: str,
                                  tables: tuple[str, ...] | None) -> Reader:
    """The last published state (in ``export``) for a reader of a damaged store, the damage and its remedy
    (``message``) said on stderr."""
    from grebench.site import published_state

    state = published_state(export, tables)
    if state is None:
        raise click.ClickException(message + " (nothing was published yet)")
    click.echo(f"Error: {message}", err=True)
    click.echo(f"showing the last published state instead: {state.describe()}", err=True)
    return Reader(state.store, {"version": state.version_id, "published_at": state.published_at,
                                "source": str(state.source), "writer": "nobody (the store is damaged)"},
                  state.counts, damaged=reason)


def _close_quietly(store: Store) -> None:
    """Close a connection that may be invalidated (its checkpoint would fail again)."""
    try:
        store.con.close()
    except duckdb.Error:
        pass


def _store_failure(settings: Settings, exc: BaseException) -> str:
    """One clear line for a store that could not be written (the WAL keeps every committed transaction)."""
    found = io_cause(exc)
    if found is not None:
        cause, path = found
        what = f"{cause} writing {path or settings.db_path}"
    else:
        what = f"the store {settings.db_path} could not be written: {str(exc).splitlines()[0][:300]}"
    return (f"{what}. Work committed before this point is kept; free space (or fix the cause) and run the command "
            "again to resume.")


@contextmanager
def stoppable(service: ServiceSettings) -> Iterator[None]:
    """SIGTERM / SIGINT stop the work of the block at its next request boundary (:mod:`grebench.stop`): the run is
    recorded ``interrupted``, one line says so, and the command exits 0 after SIGTERM, 130 after SIGINT."""
    from grebench import stop

    with stop.handling_signals(service.stop_grace_s):
        try:
            yield
        except stop.Interrupted as exc:
            click.echo(f"{exc}: stopped at a request boundary; what finished is stored and the run is recorded as "
                       "interrupted (run the same command again to resume)", err=True)
            if stop.stop_signal() is not None:  # the store is closed: skip the interpreter's slow teardown
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(stop.exit_status(130))
            sys.exit(stop.exit_status(130))


def emit_json(obj: Any) -> None:
    """Print one JSON object on stdout (machine-readable output)."""
    click.echo(json.dumps(obj, indent=2, default=str, ensure_ascii=False))


def progress_display(as_json: bool) -> Progress:
    """Progress on stderr: a bar on a terminal, plain lines otherwise, nothing in ``--json`` mode."""
    return progress_for(as_json)


class _StagesSummary(JobObserver):
    """A single-stage command stores its stages' summaries with the run; ``plan`` (optional) says, once the run
    is resolved, what the command will work with (``exam`` and ``judge``: the gem judge's setup)."""

    def __init__(self, plan: Callable[[ResolvedRun], str] | None) -> None:
        self.plan = plan

    def resolved(self, run: ResolvedRun) -> None:
        if self.plan is not None:
            click.echo(self.plan(run), err=True)

    def summary(self, store: Store, result: Any) -> dict[str, Any] | None:
        return dict(result.result.stages)


def run_stage(settings: Settings, command: str, names: Sequence[str], options: RunOptions, as_json: bool,
              args: dict[str, Any] | None = None,
              refusals: tuple[type[BaseException], ...] = (ValueError,),
              plan: Callable[[ResolvedRun], str] | None = None,
              locked_ok: bool = False) -> tuple[dict[str, dict[str, Any]], str, str]:
    """Run a job of pipeline stages for a single-stage command: (summary per stage, run id, run status).

    An exception of a ``refusals`` type (bad input: an unknown candidate, a preprocessor that cannot be used) ends
    the command with its message and no traceback; other failures are recorded on the run like in ``grebench run``.
    ``plan(run)`` is printed to stderr once the job's run is resolved (not with ``as_json``).  ``locked_ok``: a
    store another process holds raises :class:`grebench.store.StoreLocked` (see :func:`writer_store`).
    """
    from grebench.pipeline import Job, SetupError, run_job

    try:
        with stoppable(settings.service):
            done = run_job(settings, Job.of(*names), options, open_store=lambda: writer_store(settings, locked_ok),
                           command=command, args=args or {}, progress=progress_display(as_json), refusals=refusals,
                           observer=_StagesSummary(None if as_json else plan))
    except SetupError as exc:  # before any stage: a mistake costs nothing and is said once
        raise click.UsageError(str(exc)) from None
    if done.refused is not None:
        raise click.ClickException(str(done.refused)) from None
    stages = done.result.stages
    return {name: {**summary, "run_id": done.run_id} for name, summary in stages.items()}, done.run_id, done.status


def exit_if_failed(stages: Mapping[str, Mapping[str, object]], status: str, said: Sequence[str] = ()) -> None:
    """End a command whose run is recorded as not ``ok`` with exit status 1 (its output printed first): one line
    per failed stage not already ``said``, naming the path and the cause of a file error (``Error: [boards] no space
    left on device writing /data/grebench.duckdb.wal``), and one for each stage skipped because of it.  The exit
    status is the run's outcome: cron and CI read a stale board as the failure it is."""
    if status == "ok":
        return
    for name, summary in stages.items():
        if summary.get("error") and name not in said:
            click.echo(f"Error: [{name}] {summary['error']}", err=True)
        elif summary.get("skipped") and isinstance(summary["skipped"], str):
            click.echo(f"skipped: [{name}] {summary['skipped']}", err=True)
    sys.exit(1)


def estimator_help() -> str:
    """How estimators are written (from the registry: plugins appear here too)."""
    from grebench.scoring.estimators import ESTIMATORS

    return ESTIMATORS.help()


def preprocessor_help() -> str:
    """How preprocessors are written (from the registry)."""
    from grebench.scoring import PREPROCESSORS

    return PREPROCESSORS.help()


def metric_choice() -> click.Choice:
    """The registered metrics as a click choice (plugins' metrics too)."""
    from grebench.scoring import METRICS

    return click.Choice(METRICS.names())


def default_metrics() -> tuple[str, ...]:
    """The metrics scored unless the user chooses (from the registry)."""
    from grebench.scoring import default_metrics as defaults

    return defaults()


def headline_metric() -> str:
    """The metric boards lead with (from the registry)."""
    from grebench.scoring import headline_metric as headline

    return headline()


def source_help() -> str:
    """How paper sources are written (from the registry)."""
    from grebench.ingest import SOURCES

    return str(SOURCES.help())


def check_specs(settings: Settings, options: RunOptions | None = None, source: bool = False) -> None:
    """Refuse settings (and options) that name an unknown estimator, preprocessor, source, metric or model before
    any work starts: one line naming what and why, exit 2 (:func:`grebench.pipeline.check_setup`)."""
    from grebench.pipeline import SetupError, check_setup

    try:
        check_setup(settings, options, source=source)
    except SetupError as exc:
        raise click.UsageError(str(exc)) from None

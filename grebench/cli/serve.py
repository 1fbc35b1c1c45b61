"""`grebench serve`: the scheduler and the Gradio app in one process (the production entry point).

Stopping (docs/operations.md): SIGTERM (``docker stop``, systemd) or SIGINT (Ctrl-C) sets the process's stop token
(:mod:`grebench.stop`): the running job stops at its next request boundary, what it finished is stored, its run
and job are recorded ``interrupted`` (the next start runs it first), no job starts after the signal and the app is
closed.  Exit status 0 after SIGTERM, 130 after SIGINT; a job that reaches no boundary within ``stop_grace_s``
does not hold the process (it exits anyway; the run is marked interrupted).  ``--once`` exits 1 when a job failed.

At start, before any job, the store is checked (`grebench check`) and a backup copy kept in DATA_DIR/backups; a
damaged store ends the command with the remedy.  The check and the backup run again every ``check_interval_min``.

Before anything is opened or started, the settings are checked with the app's port (a bind test on ``app_host`` /
``app_port``), a fixed ``local_server_port`` and ``site_dir``: a refusal is one line, exit status 2.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import TYPE_CHECKING, Any

import click

from grebench.cli._common import emit_json, open_writer
from grebench.cli._options import setting_option, settings_options
from grebench.pipeline import SCHEDULED
from grebench.settings import Settings

if TYPE_CHECKING:
    from grebench.scheduler import JobOutcome

log = logging.getLogger(__name__)


def _plan(settings: Settings, service: Any) -> list[str]:
    from grebench.cli._plan import serve_plan
    from grebench.store import ReviewRecord

    papers = service.store.scalar("SELECT count(DISTINCT paper_id) FROM reviews WHERE kind = ?",
                                  [ReviewRecord.OFFICIAL])
    return serve_plan(settings, service.kinds, {k: service.interval(k).total_seconds() / 60 for k in service.kinds},
                      int(papers or 0) or None)


def _result_line(r: JobOutcome) -> str:
    """``poll: failed — [ingest] VENUE: why (+2 more)``, ``score: ok``, ``site: interrupted (stopped by SIGTERM)``:
    the job's recorded outcome."""
    line = f"{r['job']}: {r['status']}"
    if r["status"] == "failed" and r.get("error"):
        line += f" — {r['error']}"
    elif r["status"] == "interrupted":
        line += f" ({r['summary'].get('interrupted', '')})"
    return line


def _failed(results: list[JobOutcome]) -> bool:
    return any(r["status"] == "failed" for r in results)


@click.command("serve")
@click.option("--no-app", is_flag=True, help="Run the scheduler only (no Gradio app).")
@click.option("--once", is_flag=True, help="Run every job once, in order, and exit (a cron-style cycle); exit "
              "status 1 when a job failed.")
@click.option("--job", "jobs", multiple=True, type=click.Choice(SCHEDULED),
              help="Only these jobs (repeatable). Default: all.")
@setting_option("executor", into_settings=True)
@click.option("--json", "as_json", is_flag=True, help="With --once: print the job summaries as JSON.")
@settings_options
@click.pass_obj
def command(settings: Settings, no_app: bool, once: bool, jobs: tuple[str, ...], as_json: bool) -> None:
    """Start the service: poll venues, generate while reviews are hidden, score when they appear, rebuild the site
    and the app's exports, cut yearly snapshots — and serve the app.

    All jobs run one at a time in one worker thread on the one DuckDB writer; their state is in the store's
    `jobs` table, so after a crash or restart the schedule resumes and nothing is repeated. SIGTERM or Ctrl-C
    stops the running job at its next request boundary (exit status 0 after SIGTERM, 130 after Ctrl-C).
    """
    from grebench import stop
    from grebench.pipeline import JOBS, SetupError, check_app_port, check_data_dir, check_local_port, check_site_dir
    from grebench.scheduler import JOB_KINDS, SchedulerService

    stages = [stage for kind in jobs or JOB_KINDS if kind in JOBS for stage in JOBS[kind].stages]
    try:
        check_data_dir(settings)
        check_site_dir(settings, stages)
        check_local_port(settings, stages)
        if not (no_app or once):  # the app's port is checked with the settings, before any job starts
            check_app_port(settings.app, "the setting app_port (GREBENCH_APP_PORT), or run `grebench serve --no-app`")
    except SetupError as exc:
        raise click.UsageError(str(exc)) from None
    # the writer lock first, before anything slow: a second serve on this data dir names the holder at once
    store = open_writer(settings)
    try:
        service = SchedulerService(settings, store, kinds=list(jobs) or JOB_KINDS, close_store=True, checks=True)
    except (RuntimeError, ValueError) as exc:
        store.close()
        raise click.ClickException(str(exc)) from None
    failed = False
    with stop.handling_signals(settings.service.stop_grace_s):
        try:
            _check_at_start(service)  # a stop during it ends it between two tables: then nothing else runs
            if service.recovered:
                click.echo(f"resuming after a crash in: {', '.join(service.recovered)}", err=True)
            for line in _plan(settings, service):
                click.echo(line, err=True)
            if once:
                results = service.run_all_once()
                if as_json:
                    emit_json(results)
                else:
                    for r in results:
                        click.echo(_result_line(r))
                failed = _failed(results)
            else:
                _serve(service, no_app)
        finally:
            if stop.stopping():
                click.echo(f"{stop.reason_text()}: no job starts any more; the running one stops at its next "
                           "request boundary (what it finished is stored; the next start resumes it)", err=True)
            try:
                service.close()  # waits for the running job: bounded by stop_grace_s after a signal
            except Exception:
                from grebench.store import noted_damage

                if noted_damage(settings.db_path) is None:
                    raise  # a damaged store refuses its last checkpoint: the damage was said, not this

    if stop.stopping():
        # the store is closed and the app too: exit now.  The interpreter's own teardown (seconds of C-level
        # finalisation of the libraries an app process loads, measured 6 s here) is not worth docker's 10 s grace
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(stop.exit_status())
    if failed:
        sys.exit(1)


def _check_at_start(service: Any) -> None:
    """The store's check before any job (:meth:`grebench.scheduler.SchedulerService.check_store`, then a backup): a
    damaged store ends the command with the remedy (the app would serve the published export, but no job may
    write on top of the damage)."""
    from grebench import stop
    from grebench.cli._common import damaged_message

    report = service.check_store()
    if report.damaged:
        raise click.ClickException(damaged_message(service.settings,
                                                   report.problems[0] if report.problems else "damaged"))
    if not report.ok and not stop.stopping():  # whole, but not holding what was published or cut: said; runs on
        click.echo(f"warning: the store check found: {'; '.join(report.problems)[:1000]} (`grebench status`)",
                   err=True)


def _serve(service: Any, no_app: bool) -> None:
    """Run the scheduler (and the app) until a signal sets the stop token.  The app is launched before the
    scheduler starts: an app that cannot start (its port taken since the check) ends the command before any job
    ran."""
    from grebench import stop

    settings = service.settings
    demo = None
    try:
        if not no_app:
            from grebench.site import create_app, launch

            # one vault: in-memory keys work; create_app already configured the Gradio queue (docs/site.md)
            demo = create_app(settings, vault=service.vault, queue=service.queue)
            try:
                # the main thread keeps waiting on the stop token, not in Gradio's own loop
                launch(demo, settings, prevent_thread_lock=True)
            except OSError as exc:  # Gradio's message names its own variables; ours names the setting
                why = str(exc).split(". ")[0]
                raise click.ClickException(
                    f"the app could not listen on {settings.app.app_host}:{settings.app.app_port} ({why}); free the "
                    "port or choose another with the setting app_port (GREBENCH_APP_PORT); no job was started"
                ) from None
        service.start()
        if no_app:
            click.echo("scheduler running (SIGTERM or Ctrl-C to stop)", err=True)
        stop.wait_for_stop()
    finally:
        service.shutdown(wait=False)  # nothing new starts
        if demo is not None:
            _close_app(demo)


def _close_app(demo: Any) -> None:
    """Close the app and remove its published downloads (:func:`grebench.site.close_app`), timed."""
    from grebench.site import close_app

    started = time.monotonic()
    close_app(demo)
    log.info("app closed in %.1f s", time.monotonic() - started)

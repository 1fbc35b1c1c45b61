"""`grebench serve`: the scheduler and the Gradio app in one process (the production entry point)."""

from __future__ import annotations

import signal
import threading
from typing import Any

import click

from grebench.cli._common import emit_json
from grebench.cli._options import settings_options
from grebench.settings import Settings


def _stop_on_sigterm(stop: threading.Event) -> None:
    def handler(_signum: int, _frame: Any) -> None:
        stop.set()
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


@click.command("serve")
@click.option("--no-app", is_flag=True, help="Run the scheduler only (no Gradio app).")
@click.option("--once", is_flag=True, help="Run every job once, in order, and exit (a cron-style cycle).")
@click.option("--job", "jobs", multiple=True, help="Only these jobs (repeatable): queue, poll, generate, score, "
              "site, snapshot. Default: all.")
@click.option("--json", "as_json", is_flag=True, help="With --once: print the job summaries as JSON.")
@settings_options
@click.pass_obj
def command(settings: Settings, no_app: bool, once: bool, jobs: tuple[str, ...], as_json: bool) -> None:
    """Start the service: poll venues, generate while reviews are hidden, score when they appear, rebuild the site
    and the app's exports, cut yearly snapshots — and serve the app.

    All jobs run one at a time in one worker thread on the one DuckDB writer; their state is in the store's
    `jobs` table, so after a crash or restart the schedule resumes and nothing is repeated.
    """
    from grebench.pipeline import SetupError, check_data_dir
    from grebench.scheduler import JOB_KINDS, SchedulerService

    try:
        check_data_dir(settings)
    except SetupError as exc:
        raise click.UsageError(str(exc)) from None
    try:
        service = SchedulerService(settings, kinds=list(jobs) or JOB_KINDS)
    except (RuntimeError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    try:
        if service.recovered:
            click.echo(f"resuming after a crash in: {', '.join(service.recovered)}", err=True)
        if once:
            results = service.run_all_once()
            if as_json:
                emit_json(results)
            else:
                for r in results:
                    click.echo(f"{r['job']}: {r['status']} ({r['run_status']})")
            return
        stop = threading.Event()
        _stop_on_sigterm(stop)
        service.start()
        if no_app:
            click.echo("scheduler running (Ctrl-C to stop)", err=True)
            try:
                while not stop.wait(3600):
                    pass
            except KeyboardInterrupt:
                pass
            return
        from grebench.site import create_app, launch_kwargs

        # one vault: in-memory keys work; create_app already configured the Gradio queue (docs/site.md)
        demo = create_app(settings, vault=service.vault, queue=service.queue)
        try:
            demo.launch(**launch_kwargs(settings))
        except KeyboardInterrupt:
            pass
    finally:
        service.close()

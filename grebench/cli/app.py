"""`grebench app`: the Gradio app (reads `grebench export` Parquet, writes only the submission queue)."""

from __future__ import annotations

import sys

import click

from grebench.cli._options import setting_option, settings_options
from grebench.settings import Settings


@click.command("app")
@setting_option("app_host", "--host")
@setting_option("app_port", "--port")
@settings_options
@click.pass_obj
def command(settings: Settings, host: str | None, port: int | None) -> None:
    """Serve the leaderboard app: browse boards, submit an endpoint, follow the queue.

    SIGTERM or Ctrl-C closes it (exit status 0 after SIGTERM, 130 after Ctrl-C)."""
    from grebench.pipeline import SetupError, check_app_port
    from grebench.site import launch_app

    changes = {k: v for k, v in {"app_host": host, "app_port": port}.items() if v is not None}
    settings = settings.replace(**changes) if changes else settings
    try:
        check_app_port(settings.app, "--port or the setting app_port (GREBENCH_APP_PORT)")
    except SetupError as exc:
        raise click.UsageError(str(exc)) from None
    try:
        status = launch_app(settings)
    except ValueError as exc:  # e.g. a malformed GREBENCH_SECRET_KEY
        raise click.ClickException(str(exc)) from None
    if status:
        sys.exit(status)

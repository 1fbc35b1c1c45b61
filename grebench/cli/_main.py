"""The command group, shared options and command registration."""

from __future__ import annotations

import importlib
import logging
import sys

import click

from grebench import __version__
from grebench._offline import apply_offline_defaults
from grebench.settings import load_settings

# command name -> module under grebench.cli that defines a click command called `command`
COMMANDS = {
    "ingest": "ingest",
    "extract": "extract",
    "stats": "stats",
    "export": "export",
    "bench": "bench",
    "score": "score",
    "leaderboard": "leaderboard",
    "run": "run",
    "validate": "validate",
    "judge": "judge",
    "exam": "exam",
    "site": "site",
    "app": "app",
    "serve": "serve",
    "snapshot": "snapshot",
    "submit": "submit",
}


class LazyGroup(click.Group):
    """A group whose commands are imported only when used (keeps `--help` and startup fast)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = COMMANDS.get(cmd_name)
        if module is None:
            return None
        return importlib.import_module(f"grebench.cli.{module}").command  # type: ignore[no-any-return]


@click.group(cls=LazyGroup)
@click.option("--config", "config", envvar="GREBENCH_CONFIG", type=click.Path(dir_okay=False),
              help="Settings file (TOML). Also GREBENCH_CONFIG.")
@click.option("--data-dir", envvar="GREBENCH_DATA_DIR", help="Data directory (default ./grebench-data).")
@click.option("-v", "--verbose", count=True, help="More log output (-v info, -vv debug).")
@click.version_option(__version__, prog_name="grebench")
@click.pass_context
def main(ctx: click.Context, config: str | None, data_dir: str | None, verbose: int) -> None:
    """GRE-bench: rank LLMs by how much information their peer reviews share with human reviews."""
    apply_offline_defaults()
    try:
        settings = load_settings(config)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    if data_dir:
        settings = settings.replace(data_dir=data_dir)
    from grebench.cli._common import check_specs

    check_specs(settings)
    level = {0: settings.log_level, 1: "INFO"}.get(verbose, "DEBUG")
    logging.basicConfig(level=level.upper() if isinstance(level, str) else level, stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
    for noisy in ("httpx", "LiteLLM", "litellm", "urllib3"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLogger().level))
    ctx.obj = settings

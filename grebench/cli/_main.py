"""The command group and command registration (shared options: :mod:`grebench.cli._options`)."""

from __future__ import annotations

import importlib

import click

from grebench import __version__
from grebench.cli._options import settings_options

# command name -> module under grebench.cli that defines a click command called `command`
COMMANDS = {
    "ingest": "ingest",
    "links": "links",
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
    "replay": "replay",
    "snapshot": "snapshot",
    "submit": "submit",
    "submissions": "submissions",
    "models": "models",
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
@settings_options
@click.option("-v", "--verbose", count=True, help="More log output (-v info, -vv debug).")
@click.version_option(__version__, prog_name="grebench")
def main(verbose: int) -> None:
    """GRE-bench: rank LLMs by how much information their peer reviews share with human reviews.

    --config and --data-dir go before or after the command name (the one nearest the command wins).
    """

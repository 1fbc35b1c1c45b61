"""The command group and command registration (shared options: :mod:`grebench.cli._options`)."""

from __future__ import annotations

import importlib
from typing import Any

import click

from grebench import __version__
from grebench.cli._options import settings_options

# command name -> module under grebench.cli that defines a click command called `command`
COMMANDS = {
    "ingest": "ingest",
    "links": "links",
    "extract": "extract",
    "stats": "stats",
    "status": "status",
    "check": "check",
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


class OneLineUsageError(click.UsageError):
    """A usage error said in one line, ``Error: MESSAGE`` (exit status 2), without click's usage header and "Try
    --help" hint: a refusal names what is wrong and what is allowed, so the header only pushes it down."""

    def show(self, file: Any = None) -> None:
        """Print the one line on stderr."""
        click.echo(f"Error: {self.format_message()}", file=file, err=file is None)


def _one_line(exc: click.UsageError) -> click.UsageError:
    """``exc`` as a :class:`OneLineUsageError`, its message rendered while its context is known (a missing
    parameter names its option from it); ``grebench`` with no arguments still shows the help."""
    if isinstance(exc, (OneLineUsageError, click.exceptions.NoArgsIsHelpError)):
        return exc
    return OneLineUsageError(" ".join(exc.format_message().split()), exc.ctx)


class LazyGroup(click.Group):
    """A group whose commands are imported only when used (keeps `--help` and startup fast); its usage errors, and
    those of every command below it, are said in one line (:class:`OneLineUsageError`)."""

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.UsageError as exc:
            raise _one_line(exc) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            raise _one_line(exc) from None

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

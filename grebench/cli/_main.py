"""The command group and command registration (shared options: :mod:`grebench.cli._options`)."""

from __future__ import annotations

import importlib
import re
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


#: Words an operator reaches for that name what another command does (``grebench panel``: the judge panel is
#: ``grebench judge``); a close misspelling of a command is found without this table.
CONCEPTS = {"panel": "judge", "judges": "judge", "board": "leaderboard", "boards": "leaderboard",
            "rank": "leaderboard", "ranking": "leaderboard", "versions": "leaderboard", "scores": "score",
            "generate": "bench", "candidates": "bench", "papers": "ingest", "poll": "ingest", "web": "app",
            "ui": "app", "daemon": "serve", "service": "serve"}


def closest_command(name: str, commands: list[str] | None = None) -> str | None:
    """The command ``name`` most likely meant: a close spelling (``scroe``), else the command for the concept it
    names (``panel``: ``judge``); None when nothing is close."""
    import difflib

    known = commands if commands is not None else sorted(COMMANDS)
    close = difflib.get_close_matches(name.lower(), known, n=1, cutoff=0.6)
    if close:
        return close[0]
    meant = CONCEPTS.get(name.lower())
    return meant if meant in known else None


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
    message = " ".join(exc.format_message().split())
    unknown = re.fullmatch(r"No such command '(.+)'\.", message)
    group = exc.ctx.command if exc.ctx is not None else None
    if unknown and isinstance(group, click.Group) and exc.ctx is not None:  # a subcommand (`site biuld`) too
        commands = group.list_commands(exc.ctx)
        meant = closest_command(unknown[1], commands)
        prefix = f"grebench {exc.ctx.command_path.split(' ', 1)[1]} " if " " in exc.ctx.command_path else "grebench "
        message += (f" Did you mean `{prefix}{meant}`?" if meant else "") + f" Commands: {', '.join(commands)}"
    return OneLineUsageError(message, exc.ctx)


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
        except Exception as exc:  # a file error no command caught: one line naming the file and why, exit 1
            from grebench.store import failure_text, io_cause

            if io_cause(exc) is None:
                raise
            raise click.ClickException(failure_text(exc)) from None

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

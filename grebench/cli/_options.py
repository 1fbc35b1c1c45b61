"""``--config`` and ``--data-dir``: accepted before the command name and after it, resolved in one place.

Every command, subcommand and group carries :func:`settings_options`, so ``grebench --data-dir D stats``,
``grebench stats --data-dir D`` and ``grebench snapshot export --data-dir D`` mean the same thing.  The value written
nearest the command wins (``grebench --data-dir A stats --data-dir B`` uses B); without either flag,
``GREBENCH_CONFIG`` and ``GREBENCH_DATA_DIR`` apply as before (:func:`grebench.settings.load_settings` reads them).
The settings are built once, when the command itself runs, and handed to it as the click context object.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from grebench._offline import apply_offline_defaults
from grebench.settings import Settings, load_settings

F = TypeVar("F", bound=Callable[..., Any])
_CONFIG, _DATA_DIR = "settings_config", "settings_data_dir"


def settings_options(f: F) -> F:
    """Give a click command or group ``--config`` and ``--data-dir``; the command gets the resolved settings.

    Put it above ``@click.pass_obj`` (so the settings are in place when that reads them) and below
    ``@click.command``/``@click.group``.
    """

    @functools.wraps(f)
    def run(*args: Any, **kwargs: Any) -> Any:
        kwargs.pop(_CONFIG, None)
        kwargs.pop(_DATA_DIR, None)
        ctx = click.get_current_context()
        if ctx.invoked_subcommand is None:  # a group passes on; the command that runs resolves
            ctx.obj = resolve_settings(ctx)
        return f(*args, **kwargs)

    run = click.option("--data-dir", _DATA_DIR, metavar="DIR",
                       help="Data directory (default ./grebench-data). Also GREBENCH_DATA_DIR.")(run)
    run = click.option("--config", _CONFIG, type=click.Path(dir_okay=False), metavar="PATH",
                       help="Settings file (TOML). Also GREBENCH_CONFIG.")(run)
    return run  # type: ignore[return-value]


def resolve_settings(ctx: click.Context) -> Settings:
    """Settings from the ``--config``/``--data-dir`` nearest the command (then the environment), logging set up."""
    config = data_dir = None
    level: click.Context | None = ctx
    while level is not None:
        config = config or level.params.get(_CONFIG)
        data_dir = data_dir or level.params.get(_DATA_DIR)
        level = level.parent
    apply_offline_defaults()
    try:
        settings = load_settings(config)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    if data_dir:
        settings = settings.replace(data_dir=data_dir)
    from grebench.cli._common import check_specs

    check_specs(settings)
    _configure_logging(settings, int(ctx.find_root().params.get("verbose") or 0))
    return settings


def _configure_logging(settings: Settings, verbose: int) -> None:
    level = {0: settings.log_level, 1: "INFO"}.get(verbose, "DEBUG")
    logging.basicConfig(level=level.upper() if isinstance(level, str) else level, stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
    for noisy in ("httpx", "LiteLLM", "litellm", "urllib3"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLogger().level))

"""Options every command shares: ``--config`` and ``--data-dir`` (before or after the command name, resolved in one
place), and the options that override a setting, made from its declaration.

Every command, subcommand and group carries :func:`settings_options`, so ``grebench --data-dir D stats``,
``grebench stats --data-dir D`` and ``grebench snapshot export --data-dir D`` mean the same thing.  The value written
nearest the command wins (``grebench --data-dir A stats --data-dir B`` uses B); without either flag,
``GREBENCH_CONFIG`` and ``GREBENCH_DATA_DIR`` apply as before (:func:`grebench.settings.load_settings` reads them).
The settings are built once, when the command itself runs, and handed to it as the click context object.

Options that override a setting (``--estimator``, ``--papers``, ``--data-dir``, ...) are made by
:func:`setting_option` from the setting's declaration (:class:`grebench.settings.Setting`): its help, what it
accepts, and how a value is parsed and refused are written once, in :mod:`grebench.settings`.  Most are handed to
the command, which passes them on (:class:`grebench.pipeline.RunOptions`); one made with ``into_settings=True``
(``--executor``) is written into the settings object itself, before they are checked, so everything the command
runs reads it there (the scheduler's jobs too) and the command never sees it.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from grebench._offline import apply_offline_defaults
from grebench.settings import ENV_PREFIX, Setting, Settings, declaration, load_settings, unknown_environment

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
        for name in _into_settings(ctx):
            kwargs.pop(name, None)
        if ctx.invoked_subcommand is None:  # a group passes on; the command that runs resolves
            ctx.obj = resolve_settings(ctx)
        return f(*args, **kwargs)

    run = setting_option("data_dir", "--data-dir", _DATA_DIR, metavar="DIR")(run)
    run = click.option("--config", _CONFIG, type=click.Path(dir_okay=False), metavar="PATH",
                       help="Settings file (TOML). Also GREBENCH_CONFIG.")(run)
    return run  # type: ignore[return-value]


def _registry_forms(name: str) -> str:
    """The forms a setting's registry knows (plugins' too), for the settings whose value names a registered part."""
    if name not in ("estimator", "preprocessor"):
        return ""
    from grebench.cli._common import estimator_help, preprocessor_help  # loads the registries: not at start-up

    return estimator_help() if name == "estimator" else preprocessor_help()


class SettingType(click.ParamType):
    """A setting's value on the command line, parsed and checked by its declaration: a value the settings file or
    ``GREBENCH_<NAME>`` would refuse is refused here with the same words (a usage error, exit 2)."""

    def __init__(self, setting: Setting[Any]) -> None:
        self.setting = setting
        self.name = click.types.convert_type(setting.type).name  # TEXT, INTEGER, ... as click's own types show

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """The value as the setting's type; a :class:`click.UsageError` saying what the setting accepts otherwise."""
        origin = max(param.opts, key=len) if param is not None and param.opts else self.setting.name
        try:
            return self.setting.parse(value, origin)
        except ValueError as exc:
            raise click.UsageError(str(exc), ctx) from None


class SettingOption(click.Option):
    """An option made by :func:`setting_option`; ``setting`` is the declaration it overrides, ``into_settings``
    whether its value is written into the settings object rather than handed to the command."""

    def __init__(self, *args: Any, setting: Setting[Any], into_settings: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.setting = setting
        self.into_settings = into_settings


def _into_settings(ctx: click.Context) -> dict[str, str]:
    """The command's options written into the settings: parameter name -> setting name."""
    return {str(p.name): p.setting.name for p in ctx.command.params
            if isinstance(p, SettingOption) and p.into_settings}


def setting_option(name: str, *decls: str, default: str = "", extra_help: str = "", into_settings: bool = False,
                   **attrs: Any) -> Callable[[F], F]:
    """A click option that overrides the setting ``name``, made from its declaration.

    ``decls``: click's parameter declarations when they are not just ``--NAME`` (underscores as dashes), e.g. a
    shorter flag or another parameter name.  The help is the setting's own, then the forms its registry knows (for
    ``estimator`` and ``preprocessor``), what the declaration accepts, ``extra_help``, and the default: the setting
    (with its declared value and ``GREBENCH_<NAME>``), or ``default`` where the command falls back on something else
    (e.g. the setup the store was scored with).  The option's own default is None, meaning "not given": commands and
    :class:`grebench.pipeline.RunOptions` then use the setting's value.  ``into_settings``: the value given is
    written into the settings the command gets (:func:`resolve_settings`), and the command takes no parameter for
    it.  ``attrs`` go to :func:`click.option`; a
    ``type`` there replaces the declaration's parsing with a stricter click type (``click.Path`` for a directory).
    """
    setting = declaration(name)
    text = [setting.help]
    forms = _registry_forms(name)
    if forms:
        text.append(f"Registered forms: {forms}.")
    if setting.accepts():
        text.append(f"Must be {setting.accepts()}.")
    if extra_help:
        text.append(extra_help)
    declared = setting.default if setting.default != "" else "empty"
    text.append(f"Default: {default}." if default else f"Default: the {name} setting ({declared}; the config file "
                f"or {ENV_PREFIX}{name.upper()} may set another).")
    attrs = {"type": SettingType(setting), **attrs}
    return click.option(*(decls or ("--" + name.replace("_", "-"),)), cls=SettingOption, setting=setting,
                        into_settings=into_settings, default=None, help=" ".join(text), **attrs)


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
    root = ctx.find_root()
    if not root.meta.get("grebench.env_checked"):  # said once per command line, however many levels read settings
        root.meta["grebench.env_checked"] = True
        for line in unknown_environment():
            click.echo(f"Warning: {line}", err=True)
    if data_dir:
        settings = settings.replace(data_dir=data_dir)
    given = {setting: ctx.params[name] for name, setting in _into_settings(ctx).items()
             if ctx.params.get(name) is not None}
    if given:  # before the check: `--executor local` overrides a file's `executor = "ray"` where Ray is missing
        settings = settings.replace(**given)
    from grebench.cli._common import check_specs

    check_specs(settings)
    _configure_logging(settings, int(ctx.find_root().params.get("verbose") or 0))
    return settings


def _configure_logging(settings: Settings, verbose: int) -> None:
    from grebench.cli._logging import formatter

    level = {0: settings.log_level, 1: "INFO"}.get(verbose, "DEBUG")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter(settings.log_format))  # a timestamp on every line; JSON with log_format = json
    logging.basicConfig(level=level.upper() if isinstance(level, str) else level, handlers=[handler])
    # APScheduler logs "executed successfully" for every job, failed and interrupted ones too: the scheduler logs
    # one line per job with its real outcome instead (its warnings, a missed run, still show)
    for noisy in ("httpx", "LiteLLM", "litellm", "urllib3", "apscheduler"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLogger().level))
    # each OpenReview retry is logged by our retry policy, with its wait: urllib3's own line would say it twice
    logging.getLogger("urllib3.connectionpool").setLevel(max(logging.ERROR, logging.getLogger().level))
    # what a schema migration did is for whoever asks (-v): it ran on store creation and on every busy-store read
    # (the reader builds its in-memory store through the migrations), where it only said "nothing changed"
    if verbose == 0:
        logging.getLogger("grebench.store.migrations").setLevel(max(logging.WARNING, logging.getLogger().level))
        # transformers' "Loading weights" bar (read from huggingface_hub when transformers is first imported, which
        # the CLI does lazily, after this): a model load is a step of the stage's own progress line
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

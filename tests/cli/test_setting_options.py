"""Options that override a setting are made from its declaration (issue 32): no command writes one by hand, and an
option's help, bounds and refusals are the setting's own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from grebench.cli import main
from grebench.cli._options import SettingOption
from grebench.settings import SETTINGS, RunSettings
from tests.conftest import FAST_ENV

NAMES = {s.name for s in SETTINGS}


def _commands(command: click.Command, path: tuple[str, ...] = ("grebench",)) -> Iterator[tuple[str, click.Command]]:
    """Every command, group and subcommand of the CLI (groups carry options too: ``bench --papers``)."""
    yield " ".join(path), command
    if isinstance(command, click.Group):
        ctx = click.Context(command)
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            assert sub is not None, name
            yield from _commands(sub, (*path, name))


def _by_hand(command: click.Command) -> list[str]:
    """The options of ``command`` whose flag is a setting's name (``--data-dir``: data_dir) but that were not made by
    :func:`grebench.cli._options.setting_option` (``links --paper``, whose values are called papers, is no setting)."""
    out = []
    for param in command.params:
        names = {opt.lstrip("-").replace("-", "_") for opt in param.opts}
        if isinstance(param, click.Option) and names & NAMES and not isinstance(param, SettingOption):
            out.append(param.opts[-1])
    return out


ALL = list(_commands(main))


def test_the_walk_sees_every_command_and_a_hand_written_setting_option() -> None:
    paths = [path for path, _ in ALL]
    assert {"grebench run", "grebench bench", "grebench site build", "grebench app"} <= set(paths)

    @click.command()
    @click.option("--papers", default=None, help="all, or N")
    @click.option("--json", "as_json", is_flag=True)
    def hand_written(papers: str | None, as_json: bool) -> None:
        """A command that writes a setting's option itself."""

    assert _by_hand(hand_written) == ["--papers"]


@pytest.mark.parametrize(("path", "command"), ALL, ids=[path for path, _ in ALL])
def test_no_command_declares_a_setting_option_by_hand(path: str, command: click.Command) -> None:
    assert _by_hand(command) == [], f"{path}: use grebench.cli._options.setting_option for these"
    for param in command.params:
        if isinstance(param, SettingOption):
            assert param.default is None, f"{path} {param.opts}: None must stay 'the setting's value'"
            assert param.help is not None and param.help.startswith(param.setting.help), (path, param.opts)
            if param.setting.accepts():
                assert f"Must be {param.setting.accepts()}." in param.help


def _option(command: str, flag: str) -> SettingOption:
    ctx = click.Context(main)
    found = main.get_command(ctx, command)
    assert found is not None
    return next(p for p in found.params if isinstance(p, SettingOption) and flag in p.opts)


def test_help_names_the_declared_default_and_the_variable() -> None:
    help_text = _option("run", "--papers").help or ""
    assert help_text.startswith(RunSettings.papers.help)
    assert "Default: the papers setting (auto; the config file or GREBENCH_PAPERS may set another)." in help_text
    port = _option("app", "--port").help or ""
    assert "Port of the Gradio app. Must be between 1 and 65,535." in port and "GREBENCH_APP_PORT" in port
    estimator = _option("run", "--estimator").help or ""
    # the registry's forms, plugins' too (in registration order, which other tests' imports may change)
    forms = estimator.partition("Registered forms: ")[2].partition(". ")[0].split(" | ")
    assert {"offline", "hf:NAME|PATH", "vllm:URL[,URL...]"} <= set(forms), estimator
    assert "Default: the one the store was scored with." in (_option("exam", "--estimator").help or "")


def _refusal(output: str, origins: tuple[str, ...]) -> str:
    """The error line of a refused command, without the origin it names (one of ``origins``)."""
    line = next(x for x in output.splitlines() if x.startswith("Error: ")).removeprefix("Error: ")
    origin, _, words = line.partition(": ")
    assert origin in origins, line
    return words


@pytest.mark.parametrize(("command", "flag", "name", "value", "words"), [
    ("app", "--port", "app_port", "0", "app_port = 0 is out of range; it must be between 1 and 65,535"),
    ("app", "--port", "app_port", "65536", "app_port = 65536 is out of range; it must be between 1 and 65,535"),
    ("app", "--port", "app_port", "x", "app_port must be int, got 'x'"),
    ("run", "--papers", "papers", "0", "papers must be 'all', 'auto' or a positive number, got '0'"),
    ("score", "--papers", "papers", "some", "papers must be 'all', 'auto' or a positive number, got 'some'"),
])
def test_an_option_refuses_what_its_setting_refuses_in_the_same_words(tmp_path: Path, command: str, flag: str,
                                                                       name: str, value: str, words: str) -> None:
    data = ["--data-dir", str(tmp_path / "data")]
    by_flag = CliRunner().invoke(main, [*data, command, flag, value], env=FAST_ENV)
    variable = f"GREBENCH_{name.upper()}"
    by_env = CliRunner().invoke(main, [*data, command], env={**FAST_ENV, variable: value})
    assert by_flag.exit_code == by_env.exit_code == 2, (by_flag.output, by_env.output)
    # a setting's own check names the variable; the setup check (papers' grammar) names the setting
    assert _refusal(by_flag.output, (flag,)) == _refusal(by_env.output, (variable, name)) == words
    assert not (tmp_path / "data").exists()  # refused before any work


@pytest.mark.parametrize(("command", "args", "param", "value"), [
    ("app", ["--port", "8000"], "port", 8000),
    ("app", [], "port", None),
    ("run", ["--papers", "12"], "papers", "12"),
    ("run", ["--papers", "ALL"], "papers", "ALL"),
    ("run", ["--estimator", "offline"], "estimator", "offline"),
    ("run", [], "estimator", None),
    ("bench", ["--papers", "3"], "papers", "3"),
])
def test_an_accepted_value_reaches_the_command_as_before(command: str, args: list[str], param: str,
                                                         value: object) -> None:
    found = main.get_command(click.Context(main), command)
    assert found is not None
    with found.make_context(command, list(args), resilient_parsing=False) as ctx:
        assert ctx.params[param] == value

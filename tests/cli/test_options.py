"""``--config`` and ``--data-dir`` work before and after every command's name, nearest one winning."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from grebench.cli._dates import Day
from grebench.cli._main import COMMANDS, main
from grebench.store import open_store


def _leaves(command: click.Command, path: list[str]) -> Iterator[tuple[list[str], click.Command]]:
    if isinstance(command, click.Group):
        for name, sub in sorted(command.commands.items()):
            yield from _leaves(sub, [*path, name])
    else:
        yield path, command


def _all_commands() -> list[tuple[list[str], click.Command]]:
    ctx = click.Context(main)
    out = []
    for name in sorted(COMMANDS):
        command = main.get_command(ctx, name)
        assert command is not None, name
        out.extend(_leaves(command, [name]))
    return out


ALL = _all_commands()
IDS = [" ".join(path) for path, _ in ALL]


def _required(command: click.Command, tmp_path: Path) -> list[str]:
    """Values for a command's required arguments and options, enough for click to parse the command line."""
    a_file = tmp_path / "input.pdf"
    a_file.write_bytes(b"%PDF-1.4\n")
    out: list[str] = []
    for param in command.params:
        if not param.required:
            continue
        dir_only = isinstance(param.type, click.Path) and not param.type.file_okay
        option = "2024-01-01" if isinstance(param.type, Day) else "x"  # a date option checks its value as it parses
        value = str(tmp_path if dir_only else a_file) if isinstance(param, click.Argument) else option
        out += [value] if isinstance(param, click.Argument) else [param.opts[0], value]
    return out


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GREBENCH_CONFIG", raising=False)
    monkeypatch.delenv("GREBENCH_DATA_DIR", raising=False)


def _invoke(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def test_the_registry_lists_every_command() -> None:
    assert len(ALL) >= len(COMMANDS) and ["snapshot", "export"] in [p for p, _ in ALL]


@pytest.mark.parametrize(("path", "command"), ALL, ids=IDS)
def test_every_command_takes_both_options_after_its_name(path: list[str], command: click.Command,
                                                         tmp_path: Path) -> None:
    shown = _invoke(*path, "--config", str(tmp_path / "c.toml"), "--data-dir", str(tmp_path / "d"), "--help")
    assert shown.exit_code == 0, shown.output
    assert "--config PATH" in shown.output and "--data-dir DIR" in shown.output
    # the value is used: the command's own --config is the file that settings are read from
    missing = tmp_path / "nowhere" / "settings.toml"
    used = _invoke(*path, *_required(command, tmp_path), "--config", str(missing))
    assert used.exit_code == 2 and f"config file not found: {missing}" in used.output, used.output
    # before the name still works, and the one written after the name wins
    before = tmp_path / "before.toml"
    both = _invoke("--config", str(before), *path, *_required(command, tmp_path), "--config", str(missing))
    assert f"config file not found: {missing}" in both.output and str(before) not in both.output


@pytest.mark.parametrize("group", sorted(n for n in COMMANDS if isinstance(main.get_command(click.Context(main), n),
                                                                          click.Group)))
def test_groups_take_them_between_group_and_subcommand(group: str, tmp_path: Path) -> None:
    missing = tmp_path / "absent.toml"
    path, command = next((p, c) for p, c in ALL if p[0] == group)
    result = _invoke(group, "--config", str(missing), *path[1:], *_required(command, tmp_path))
    assert result.exit_code == 2 and f"config file not found: {missing}" in result.output, result.output


def _stats_db(*args: str, env: dict[str, str] | None = None) -> Path:
    result = _invoke(*args, env=env)
    assert result.exit_code == 0, result.output
    return Path(json.loads(result.stdout)["db_path"])


@pytest.fixture
def dirs(tmp_path: Path) -> dict[str, Path]:
    """Three data directories, each with a store, and a settings file naming the third."""
    out = {}
    for name in ("a", "b", "c"):
        out[name] = tmp_path / name
        open_store(out[name] / "grebench.duckdb").close()
    config = tmp_path / "settings.toml"
    config.write_text(f'data_dir = "{out["c"]}"\n', encoding="utf-8")
    out["config"] = config
    return out


def test_data_dir_after_the_name_is_the_one_used(dirs: dict[str, Path]) -> None:
    a, b, c, config = dirs["a"], dirs["b"], dirs["c"], str(dirs["config"])
    assert _stats_db("stats", "--data-dir", str(a), "--json") == a / "grebench.duckdb"
    assert _stats_db("--data-dir", str(a), "stats", "--json") == a / "grebench.duckdb"
    assert _stats_db("--data-dir", str(b), "stats", "--data-dir", str(a), "--json") == a / "grebench.duckdb"
    assert _stats_db("stats", "--json", "--config", config) == c / "grebench.duckdb"
    assert _stats_db("stats", "--config", config, "--data-dir", str(a), "--json") == a / "grebench.duckdb"
    # a group-level --data-dir still beats the data_dir of a command-level settings file (each option on its own)
    assert _stats_db("--data-dir", str(b), "stats", "--config", config, "--json") == b / "grebench.duckdb"


def test_environment_variables_still_apply_and_lose_to_options(dirs: dict[str, Path], tmp_path: Path) -> None:
    a, b, c = dirs["a"], dirs["b"], dirs["c"]
    assert _stats_db("stats", "--json", env={"GREBENCH_DATA_DIR": str(b)}) == b / "grebench.duckdb"
    assert _stats_db("stats", "--json", env={"GREBENCH_CONFIG": str(dirs["config"])}) == c / "grebench.duckdb"
    assert _stats_db("stats", "--data-dir", str(a), "--json", env={"GREBENCH_DATA_DIR": str(b)}) == \
        a / "grebench.duckdb"
    # a command-level --config replaces a GREBENCH_CONFIG that points nowhere: that file is never read
    other = tmp_path / "other.toml"
    other.write_text(f'data_dir = "{a}"\n', encoding="utf-8")
    env = {"GREBENCH_CONFIG": str(tmp_path / "missing.toml")}
    assert _stats_db("stats", "--config", str(other), "--json", env=env) == a / "grebench.duckdb"


def test_subcommand_uses_its_data_dir(tmp_path: Path) -> None:
    data = tmp_path / "data"
    open_store(data / "grebench.duckdb").close()
    result = _invoke("site", "build", "--json", "--data-dir", str(data))
    assert result.exit_code == 0, result.output
    assert Path(json.loads(result.stdout)["out"]) == data / "site" and (data / "site" / "index.html").is_file()

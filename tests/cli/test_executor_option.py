"""`--executor local|ray` (issue 61) on run, bench, score and serve: written into the settings before they are
checked, refused like any option (exit 2), and `ray` without Ray installed says how to install it."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from grebench.cli import main
from tests.conftest import FAST_ENV


def _env(tmp_path: Path, **more: str) -> dict[str, str]:
    return {**FAST_ENV, "GREBENCH_DATA_DIR": str(tmp_path / "data"), **more}


@pytest.fixture
def no_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ray looks uninstalled (the check finds packages without importing them)."""
    find_spec = importlib.util.find_spec

    def without_ray(name: str, *args: Any, **kwargs: Any) -> Any:
        return None if name == "ray" else find_spec(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", without_ray)


@pytest.mark.parametrize("command", ["run", "bench", "score", "serve"])
def test_the_scoring_commands_take_executor(command: str) -> None:
    result = CliRunner().invoke(main, [command, "--help"])
    assert result.exit_code == 0 and "--executor" in result.output


@pytest.mark.parametrize("command", ["run", "bench", "score", "serve"])
def test_an_unknown_executor_is_refused_with_exit_2(command: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(main, [command, "--executor", "dask"], env=_env(tmp_path))
    assert result.exit_code == 2, result.output
    assert "one of: local, ray" in result.output
    assert not (tmp_path / "data").exists()  # refused before anything was made


@pytest.mark.parametrize("command", ["run", "bench", "score", "serve"])
def test_executor_ray_without_ray_says_how_to_install_it(command: str, tmp_path: Path, no_ray: None) -> None:
    result = CliRunner().invoke(main, [command, "--executor", "ray"], env=_env(tmp_path))
    assert result.exit_code == 2, result.output
    assert "Ray is not installed" in result.output and "pip install -e '.[hf,ray]'" in result.output
    assert not (tmp_path / "data").exists()


def test_the_option_overrides_the_setting_before_it_is_checked(tmp_path: Path, no_ray: None) -> None:
    """`executor = ray` in the environment where Ray is missing is refused; with `--executor local` the command
    runs (and says, of an empty store, that there is nothing to score: exit 1, not a refusal of its setup)."""
    env = _env(tmp_path, GREBENCH_EXECUTOR="ray")
    refused = CliRunner().invoke(main, ["score", "--json"], env=env)
    assert refused.exit_code == 2 and "Ray is not installed" in refused.output
    ran = CliRunner().invoke(main, ["score", "--executor", "local", "--json"], env=env)
    assert ran.exit_code in (0, 1) and "Ray" not in ran.output, ran.output
    assert (tmp_path / "data").exists()  # it got past the checks: the store was opened

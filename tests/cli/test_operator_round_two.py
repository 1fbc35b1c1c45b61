"""Smaller points of an operator's second week (issue 64, item 7), each through the real CLI: an unknown command
names the closest one, a misspelt ``GREBENCH_*`` variable is warned about, and ``leaderboard --json`` carries the code
commit as the site's ``leaderboard.json`` does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from grebench.cli import main
from grebench.cli._main import closest_command
from grebench.settings import unknown_environment
from grebench.site import build_site
from tests.conftest import FAST_ENV
from tests.site.conftest import filled_file_store


@pytest.mark.parametrize(("typed", "meant"), [("panel", "judge"), ("scroe", "score"), ("leaderbord", "leaderboard"),
                                              ("boards", "leaderboard"), ("xyzzy", None)])
def test_an_unknown_command_names_the_closest_one(typed: str, meant: str | None) -> None:
    assert closest_command(typed) == meant
    result = CliRunner().invoke(main, [typed], env={**FAST_ENV, "GREBENCH_CONFIG": None})
    assert result.exit_code == 2
    [line] = result.output.splitlines()  # one line, no usage header
    assert line.startswith(f"Error: No such command '{typed}'.") and "Commands: app, bench" in line
    assert (f"Did you mean `grebench {meant}`?" in line) == (meant is not None)


def test_a_misspelt_environment_variable_is_warned_about(tmp_path: Path) -> None:
    env = {"GREBENCH_ESTIMTOR": "offline", "GREBENCH_PAPERS": "all", "GREBENCH_CONFIG": "x.toml",
           "GREBENCH_SECRET_KEY": "k", "GREBENCH_SUBMISSION_KEY_ABC": "k", "OTHER": "1"}
    assert unknown_environment(env) == [
        "GREBENCH_ESTIMTOR names no setting and is ignored; did you mean GREBENCH_ESTIMATOR?"]
    result = CliRunner().invoke(main, ["--data-dir", str(tmp_path / "data"), "stats"],
                                env={**FAST_ENV, "GREBENCH_CONFIG": None, "GREBENCH_BOOTSTRAP_SAMPEL": "10"})
    assert "Warning: GREBENCH_BOOTSTRAP_SAMPEL names no setting and is ignored; did you mean " \
           "GREBENCH_BOOTSTRAP_SAMPLES?" in result.output
    assert result.output.count("GREBENCH_BOOTSTRAP_SAMPEL") == 1  # said once


def test_leaderboard_json_carries_the_code_commit(tmp_path: Path) -> None:
    with filled_file_store(tmp_path / "data") as (store, settings):
        build_site(store, settings)
    site = json.loads((settings.site_path / "leaderboard.json").read_text(encoding="utf-8"))
    data = str(settings.data_path)
    live = CliRunner().invoke(main, ["leaderboard", "--json", "--data-dir", data])
    assert live.exit_code == 0, live.output
    code = json.loads(live.stdout)["provenance"]["code"]
    assert "git_commit" in code and code["git_commit"] == site["provenance"]["code"]["git_commit"]
    assert code["package_version"] == site["provenance"]["code"]["package_version"]
    version = site["version"]
    as_of = CliRunner().invoke(main, ["leaderboard", "--json", "--as-of", version["published_at"], "--data-dir", data])
    assert as_of.exit_code == 0, as_of.output
    assert json.loads(as_of.stdout)["provenance"] == site["provenance"]  # as published with the version

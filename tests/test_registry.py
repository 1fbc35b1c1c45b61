"""Registries: one place that resolves spec strings, refuses duplicates, and loads plugins without failing on them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from grebench.cli._main import main
from grebench.registry import Registry, UnknownPart


def make_one(arg: str) -> str:
    return f"one({arg})"


def test_resolve_splits_name_and_argument_once() -> None:
    reg: Registry[object] = Registry("widget")
    reg.add("one", make_one, spec="one:ARG")
    entry, arg = reg.resolve("one:https://x.example:8000/v1")
    assert entry.name == "one" and arg == "https://x.example:8000/v1"  # only the first colon splits
    assert reg.resolve(" one ")[1] == ""
    with pytest.raises(UnknownPart, match=r"unknown widget 'two' \(known: one:ARG\)"):
        reg.resolve("two:x")


def test_a_name_registered_twice_from_elsewhere_is_refused() -> None:
    reg: Registry[object] = Registry("widget")
    reg.add("one", make_one)
    reg.add("one", make_one)  # the same module again (a reload) is fine
    with pytest.raises(ValueError, match="registered twice"):
        reg.add("one", os.path.join)  # another module's object under a taken name
    with pytest.raises(ValueError, match="without ':'"):
        reg.add("a:b", make_one)


def test_a_broken_plugin_is_reported_and_the_rest_works(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "broken_plugin-0.1.dist-info").mkdir(parents=True)
    (site / "broken_plugin-0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\n"
                                                                   "Version: 0.1\n")
    (site / "broken_plugin-0.1.dist-info" / "entry_points.txt").write_text("[grebench]\nbroken = broken_plugin\n")
    (site / "broken_plugin.py").write_text("raise RuntimeError('plugin bug')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(Path(__file__).parents[1])])}
    code = ("from grebench.registry import load_plugins\nfrom grebench.scoring.estimators import ESTIMATORS\n"
            "print(ESTIMATORS.names()); print(load_plugins())")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert "'offline'" in out.stdout and "RuntimeError: plugin bug" in out.stdout


def test_settings_naming_an_unregistered_part_are_refused_before_any_work(tmp_path: Path) -> None:
    runner = CliRunner()
    for env, message in (({"GREBENCH_ESTIMATOR": "hf2:/x"}, "unknown estimator 'hf2'"),
                         ({"GREBENCH_PREPROCESSOR": "rulez"}, "unknown preprocessor 'rulez'"),
                         ({"GREBENCH_VENUES": "bundled,archiv:/x.jsonl"}, "unknown source 'archiv'")):
        result = runner.invoke(main, ["--data-dir", str(tmp_path / "d"), "stats"], env=env)
        assert result.exit_code == 2 and message in result.output, result.output
        assert not (tmp_path / "d").exists()

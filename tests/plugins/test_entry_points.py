"""A part added from outside the package: one module registered through a test distribution's entry point.

The toy distribution is written into a temporary directory (its ``*.dist-info/entry_points.txt`` names the module
in the ``grebench`` group) and put on ``PYTHONPATH`` of a real ``grebench`` process: the CLI lists the new parts, and
``grebench run`` ingests the toy venue, scores with the toy estimator, writes and validates the toy control, and the
toy judge takes the exam — all without a line of grebench changed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent


@pytest.fixture
def plugin_path(tmp_path: Path) -> Path:
    site = tmp_path / "site-packages"
    site.mkdir()
    shutil.copy(HERE / "grebench_toy.py", site / "grebench_toy.py")
    info = site / "grebench_toy-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: grebench-toy\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text("[grebench]\ntoy = grebench_toy\n", encoding="utf-8")
    return site


def _grebench(args: list[str], site: Path, data: Path) -> subprocess.CompletedProcess[str]:
    root = Path(__file__).parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(root)]), "GREBENCH_DATA_DIR": str(data)}
    return subprocess.run([sys.executable, "-m", "grebench.cli", *args], env=env, capture_output=True, text=True,
                          timeout=600)


def test_cli_help_lists_the_plugin_parts(plugin_path: Path, tmp_path: Path) -> None:
    out = _grebench(["run", "--help"], plugin_path, tmp_path / "data")
    assert out.returncode == 0, out.stderr
    assert "toy[:BONUS]" in out.stdout and "toy" in out.stdout.split("Paper source:")[1]


def test_run_ingests_scores_and_validates_with_the_plugin(plugin_path: Path, tmp_path: Path) -> None:
    out = _grebench(["run", "--source", "toy", "--estimator", "toy:0.5", "--json"], plugin_path, tmp_path / "data")
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads(out.stdout)
    assert summary["stages"]["ingest"]["papers_total"] == 6
    boards = summary["leaderboards"]
    assert boards and {b["estimator"] for b in boards} == {"toy:bonus=0.5"}
    rows = {r["candidate"]: r for r in boards[0]["rows"]}
    assert {"human", "toy-shout", "generic"} <= set(rows)
    # the toy model copies words: the human review shares words with its references, the constant review fewer
    assert rows["human"]["score"] > rows["generic"]["score"]
    checked = {r["transformation"]: r for r in summary["stages"]["validate"]["rows"]}
    assert checked["toy-shout"]["expected"] == "not rewarded"
    exam = {r["judge"] for r in summary["stages"]["panel"]["exam"]}
    assert "toy-judge" in exam


def test_without_the_distribution_the_parts_are_unknown(tmp_path: Path) -> None:
    out = _grebench(["run", "--source", "toy", "--json"], tmp_path, tmp_path / "data")
    assert out.returncode != 0
    assert "unknown source 'toy'" in out.stdout + out.stderr

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


CONFIG = """
[[candidates]]
name = "toy-writer-1"
kind = "toy-writer"
cutoff = "2020-01-01"

[[judges]]
name = "toy-debater-long"
kind = "toy-debater"
prefers = "longer"

[[judges]]
name = "toy-debater-short"
kind = "toy-debater"
prefers = "shorter"
"""


def test_a_plugin_kind_estimator_judge_kind_and_metric_are_on_the_board(plugin_path: Path, tmp_path: Path) -> None:
    """Every per-kind fact comes from the plugin's registrations: the board names the toy estimator and metric in its
    words, ranks the toy-writer's reviews as a contestant with its tag and colour, the toy-debater judges take the
    exam, and the site shows it all — without a line of grebench changed."""
    cfg = tmp_path / "toy.toml"
    cfg.write_text(CONFIG, encoding="utf-8")
    data = tmp_path / "data"
    out = _grebench(["--config", str(cfg), "run", "--source", "toy", "--estimator", "toy:0.5", "--metric", "gem-s",
                     "--metric", "toy-title", "--json"], plugin_path, data)
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads(out.stdout)
    boards = {b["metric"]: b for b in summary["leaderboards"]}
    assert set(boards) == {"gem-s", "toy-title"}
    title = boards["toy-title"]["title"]
    assert title == "Toy GEM-S (title) · scored by toy copy model (0.5 per copied word) · rules preprocessor", title
    for board in boards.values():
        rows = {r["candidate"]: r for r in board["rows"]}
        writer = rows["toy-writer-1"]
        assert (writer["kind"], writer["role"], writer["tag"], writer["colour"]) == (
            "toy-writer", "contestant", "toy writer", "#aa00aa")
        # ranked on clean papers only: its cutoff (2020) is before the toy venue's reviews were public (2030)
        assert writer["rank"] is not None and writer["clean_papers"] == writer["papers"] == rows["human"]["papers"] > 0
        assert writer["contaminated_papers"] == 0
        assert rows["human"]["role"] == "baseline" and rows["toy-shout"]["role"] == "reference"
    exam = {r["judge"] for r in summary["stages"]["panel"]["exam"]}
    assert {"toy-debater-long", "toy-debater-short"} <= exam

    site = data / "site"
    index = (site / "index.html").read_text(encoding="utf-8")
    assert "toy copy model (0.5 per copied word)" in index and "Toy GEM-S (title)" in index
    page = next(p for p in (site / "boards").glob("*.html") if "Toy GEM-S (title)" in p.read_text(encoding="utf-8"))
    assert "toy writer" in page.read_text(encoding="utf-8")
    assert "#aa00aa" in page.with_suffix(".svg").read_text(encoding="utf-8")


def test_a_plugin_judge_kind_declares_whether_its_judges_debate(plugin_path: Path, tmp_path: Path) -> None:
    code = """
from grebench.registry import load_plugins
from grebench.panel import JUDGE_KINDS, LengthJudge, can_debate, parse_judges
assert not load_plugins()
judges = parse_judges([{"name": "a", "kind": "toy-debater"}], None)
print(can_debate(judges[0]), can_debate(LengthJudge()), JUDGE_KINDS.get("toy-debater").info.debates)
"""
    root = Path(__file__).parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugin_path), str(root)])}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["True", "False", "True"]

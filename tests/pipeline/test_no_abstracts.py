"""Any archive gets a board (issue 64, item 2): an archive of reviews only, shaped like the GEM authors' ICLR 2023
release (no abstracts), used to score nothing with the default GEM-S checks and say rc 0; ``leaderboard`` then
said "no board in the store" and the panel ranked beside an empty GEM-S column.

Now the plan says the papers have no abstracts and the checks switch to GEM, the authors' setting, with its core
controls; a run that scores nothing (GEM-S named on such papers) fails with the reason.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from grebench.bench import core_controls, default_controls
from grebench.cli import main
from grebench.pipeline._stages import untested
from grebench.store import open_store
from tests.conftest import FAST_ENV
from tests.reliability.conftest import write_small_archive


def _cli(data: Path, *args: str) -> Result:
    return CliRunner().invoke(main, ["--data-dir", str(data), *args],
                              env={**FAST_ENV, "GREBENCH_CONFIG": None, "GREBENCH_BOOTSTRAP_SAMPLES": "50",
                                   "GREBENCH_EXAM_PAIRS": "6"})


@pytest.fixture(scope="module")
def reviews_only(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Five bundled ICLR 2020 papers with their reviews, no abstracts (the shape of the authors' release)."""
    root = tmp_path_factory.mktemp("reviews-only")
    lines = write_small_archive(root / "with.jsonl", 5).read_text(encoding="utf-8").splitlines()
    out = root / "reviews_only.jsonl"
    records = []
    for line in lines:
        record = json.loads(line)
        record["abstract"] = None
        records.append(json.dumps(record))
    out.write_text("\n".join(records) + "\n", encoding="utf-8")
    return out


def test_gem_core_controls_need_no_abstract() -> None:
    gem_core = core_controls(abstracts=False)
    assert gem_core == ["sentence-deletion", "elongation", "other-paper", "keyword-stuffing-title"]
    assert "abstract-restatement" not in default_controls(abstracts=False)
    rows = [{"transformation": c, "metric": "gem"} for c in gem_core]
    said = untested(rows, abstracts=False)  # type: ignore[arg-type]
    assert said["validation"] == "core" and said["metrics_not_tested"] == []
    assert "keyword-stuffing" not in said["controls_not_tested"]


def test_a_reviews_only_archive_gets_a_gem_board(reviews_only: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    result = _cli(data, "run", "--source", f"archive:{reviews_only}", "--validation", "core")
    assert result.exit_code == 0, result.output
    assert "none of the 5 papers has an abstract" in result.output
    assert "the checks switch to GEM, the GEM authors' setting, with its core controls (4: sentence-deletion, " \
           "elongation, other-paper, keyword-stuffing-title)" in result.output
    assert "pairs scored: 0" not in result.output
    # the panel ranks beside the metric it read, GEM, never an empty GEM-S column
    assert "beside gem" in result.output and "GEM-S" not in result.output.split("panel ranking", 1)[1]
    store = open_store(data / "grebench.duckdb", read_only=True)
    try:
        assert {r["metric"] for r in store.rows("SELECT DISTINCT metric FROM boards")} == {"gem"}
        assert store.scalar("SELECT count(*) FROM board_versions") == 1
        run = store.rows("SELECT status, summary_json FROM runs WHERE command = 'run'")[0]
        assert run["status"] == "ok"
        resolved = json.loads(run["summary_json"])["resolved"]
        assert resolved["metrics"] == ["gem"] and "no" in resolved["abstracts"]
    finally:
        store.close()

    board = _cli(data, "leaderboard")  # no GEM-S board: the GEM one, said on stderr
    assert board.exit_code == 0, board.output
    assert "showing the gem boards" in board.output and "human" in board.output
    assert "core controls of papers without abstracts (4:" in board.output

    validate = _cli(data, "validate")
    assert validate.exit_code == 0, validate.output
    assert "gem-s" not in validate.output.split("not tested here", 1)[-1].split("\n", 1)[0]


def test_a_run_that_scores_nothing_fails_with_the_reason(reviews_only: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    result = _cli(data, "run", "--source", f"archive:{reviews_only}", "--metric", "gem-s", "--validation", "core")
    assert result.exit_code == 1, result.output
    assert "failed: [score] nothing scored with gem-s: gem-s: 5 papers skipped (paper has no abstract" in result.output
    assert "run with --metric gem" in result.output
    store = open_store(data / "grebench.duckdb", read_only=True)
    try:
        assert store.scalar("SELECT status FROM runs WHERE command = 'run'") == "failed"
        assert store.scalar("SELECT count(*) FROM board_versions") == 0
    finally:
        store.close()

    score = _cli(data, "score", "--metric", "gem-s")
    assert score.exit_code == 1 and "nothing scored with gem-s" in score.output, score.output


def test_score_with_nothing_benched_fails(reviews_only: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert _cli(data, "ingest", "--source", f"archive:{reviews_only}").exit_code == 0
    score = _cli(data, "score")
    assert score.exit_code == 1 and "nothing to score" in score.output and "grebench bench" in score.output

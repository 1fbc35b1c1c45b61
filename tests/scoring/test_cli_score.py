"""`grebench score` and `grebench leaderboard` through click's CliRunner on a copy of the bundled store."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from grebench.cli._main import main
from grebench.scoring import RULES_ID
from grebench.store import open_store
from tests.scoring.conftest import seed_baseline

ROW_FIELDS = {"candidate", "kind", "metric", "estimator", "preprocessor", "score", "ci90_low", "ci90_high",
              "ci95_low", "ci95_high", "papers", "pairs", "rank", "rank_low", "rank_high", "clean_papers",
              "sealed_share", "diff_vs_human", "p_vs_human"}


@pytest.fixture
def data_dir(bundled_db: Path, tmp_path: Path) -> Path:
    target = tmp_path / "data"
    target.mkdir()
    shutil.copy2(bundled_db, target / "grebench.duckdb")
    store = open_store(target / "grebench.duckdb")
    seed_baseline(store, max_papers=60)
    store.close()
    return target


def _invoke(data_dir: Path, *args: str) -> dict:
    result = CliRunner().invoke(main, ["--data-dir", str(data_dir), *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_score_then_leaderboard(data_dir: Path) -> None:
    first = _invoke(data_dir, "score", "--json")
    assert first["metrics"] == ["gem", "gem-s"] and first["preprocessor"] == RULES_ID
    # 60 papers x 3 candidates x 2 references x 2 metrics, less the references without a judgment line
    skipped_refs = sum(s["count"] for s in first["skipped"] if "reference" in s["what"] + s["reason"])
    assert first["estimator"].startswith("offline") and first["pairs_scored"] + skipped_refs == 60 * 3 * 2 * 2
    assert first["pairs_scored"] > 0.9 * 60 * 3 * 2 * 2
    assert first["estimator_calls"] > 0 and first["cache_hits"] == 0 and first["status"] == "ok"
    again = _invoke(data_dir, "score", "--json", "--metric", "gem", "--metric", "gem-s")
    assert again["estimator_calls"] == 0 and again["pairs_scored"] == 0

    board = _invoke(data_dir, "leaderboard", "--json", "--metric", "gem", "--estimator", "offline",
                    "--preprocessor", "rules")
    assert board["preprocessor"] == RULES_ID
    rows = board["rows"]
    assert {r["candidate"] for r in rows} == {"human", "generic", "other-paper"}
    assert all(set(r) >= ROW_FIELDS for r in rows)
    by = {r["candidate"]: r for r in rows}
    assert by["human"]["kind"] == "human" and by["generic"]["kind"] == "control"
    # two references a paper, less the few with no judgment line (counted as skipped by score)
    assert by["human"]["papers"] == 60 and 110 <= by["human"]["pairs"] <= 120
    assert by["human"]["ci90_low"] <= by["human"]["score"] <= by["human"]["ci90_high"]

    text = CliRunner().invoke(main, ["--data-dir", str(data_dir), "leaderboard", "--metric", "gem-s"])
    assert text.exit_code == 0 and "[human baseline]" in text.output and "[control]" in text.output


def test_score_refuses_imported_without_lines(data_dir: Path) -> None:
    result = CliRunner().invoke(main, ["--data-dir", str(data_dir), "score", "--preprocessor", "imported", "--json"])
    assert result.exit_code != 0 and "no review in the store has imported judgment lines" in result.output


def test_leaderboard_without_scores_says_what_to_run(data_dir: Path) -> None:
    result = CliRunner().invoke(main, ["--data-dir", str(data_dir), "leaderboard", "--metric", "gem-raw"])
    assert result.exit_code != 0 and "grebench score --metric gem-raw" in result.output

"""Replay dates as an operator writes them (issue 51): ``Z``, offsets and reversed ranges.

Before, ``replay --from 2025-11-12T06:00Z --to 2025-11-12T07:00Z --step 1h`` failed every poll with "can't compare
offset-naive and offset-aware datetimes", published an empty board version, exited 1, and a rerun replayed the same
days again; ``--from 2025-11-30 --to 2025-11-01`` ended in a traceback.  Here the small test season (offline
estimator, no LLM) is replayed through the real CLI.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from grebench.cli import main
from grebench.store import open_store
from tests.conftest import FAST_ENV
from tests.scheduler.replay_season import write_season


def _cli(data: Path, *args: str) -> Result:
    return CliRunner().invoke(main, ["--data-dir", str(data), *args],
                              env={**FAST_ENV, "GREBENCH_CONFIG": None, "GREBENCH_BOOTSTRAP_SAMPLES": "50",
                                   "GREBENCH_EXAM_PAIRS": "10"})


@pytest.fixture(scope="module")
def season(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("season") / "season.jsonl"
    write_season(path)
    return path


def test_a_reversed_range_is_refused_before_anything_is_made(season: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    result = _cli(data, "replay", "--season", str(season), "--from", "2025-11-30", "--to", "2025-11-01")
    assert result.exit_code == 2, result.output
    [line] = result.output.strip().splitlines()
    assert line.startswith("Error: ") and "before the first" in line and "--from 2025-11-30 00:00:00 UTC" in line
    assert not (data / "grebench.duckdb").exists()
    late = _cli(data, "replay", "--season", str(season), "--from", "2026-01-01")  # after the season's last change
    assert late.exit_code == 2 and "the season runs from 2025-11-01" in late.output, late.output


@pytest.mark.parametrize("bad", ["2025-11-02T25:00Z", "2025-11-02T06:00+24:00", "02/11/2025", "2025-11-02Zulu"])
def test_a_malformed_time_is_a_usage_error(season: Path, tmp_path: Path, bad: str) -> None:
    result = _cli(tmp_path / "data", "replay", "--season", str(season), "--from", bad)
    assert result.exit_code == 2 and "--from" in result.output and "Traceback" not in result.output, result.output


def test_z_and_offsets_replay_once_publish_no_empty_version_and_read_back(season: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    # 11-01: papers posted, no review public yet: nothing to score, so no board version is published
    first = _cli(data, "replay", "--season", str(season), "--from", "2025-11-01Z", "--to", "2025-11-01Z")
    assert first.exit_code == 0, first.output
    early = _cli(data, "leaderboard", "--as-of", "2025-11-01")
    assert early.exit_code == 1 and "no board version was published yet" in early.output, early.output

    hours = _cli(data, "replay", "--season", str(season), "--from", "2025-11-02T06:00Z", "--to", "2025-11-02T07:00Z",
                 "--step", "1h")
    assert hours.exit_code == 0, hours.output
    assert "can't compare" not in hours.output
    store = open_store(data / "grebench.duckdb", read_only=True)
    try:
        days = store.rows("SELECT day, status, jobs_json FROM replay_days ORDER BY day")
        versions = store.rows("SELECT version_id, published_at, leaderboard_json FROM board_versions "
                              "ORDER BY published_at")
    finally:
        store.close()
    assert [d["day"] for d in days] == [datetime(2025, 11, 1), datetime(2025, 11, 2, 6), datetime(2025, 11, 2, 7)]
    assert all(d["status"] == "done" for d in days)
    assert all(job["status"] == "ok" for d in days for job in json.loads(d["jobs_json"])), days
    assert versions and all(json.loads(v["leaderboard_json"])["boards"] for v in versions)  # none empty
    assert versions[0]["published_at"].date() == datetime(2025, 11, 2).date()

    # the same hours written with an offset are the same days: replayed already, nothing run again
    again = _cli(data, "replay", "--season", str(season), "--from", "2025-11-02T08:00+02:00",
                 "--to", "2025-11-02T09:00+0200", "--step", "1h")
    assert again.exit_code == 0 and "was replayed already" in again.output, again.output

    # a date with Z is that UTC day (its end for --as-of), never its midnight
    as_of = _cli(data, "leaderboard", "--as-of", "2025-11-02Z", "--json")
    assert as_of.exit_code == 0, as_of.output
    assert json.loads(as_of.stdout)["board_version"]["version"] == versions[-1]["version_id"]
    morning = _cli(data, "leaderboard", "--as-of", "2025-11-02T08:30+02:00", "--json")  # 06:30 UTC
    assert morning.exit_code == 0, morning.output
    assert json.loads(morning.stdout)["board_version"]["version"] == versions[0]["version_id"]

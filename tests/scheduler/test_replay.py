"""`grebench replay`: a small season through the scheduler's jobs on a simulated clock, checked day by day against
what its records imply; deterministic; killed mid-day and run again, it resumes on that day."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from grebench import stop
from grebench.scheduler import history, replay
from grebench.settings import Settings, load_settings
from grebench.store import open_store
from tests.conftest import FAST_ENV
from tests.fakes.openai_server import FakeOpenAIServer
from tests.scheduler.conftest import CANDIDATE
from tests.scheduler.replay_season import DAYS, implied, write_season

SEASON_FACTS = ("papers", "papers_scoreable", "papers_scored", "sealed_generations", "review_versions")


def _config(tmp_path: Path, llm_url: str, name: str) -> Path:
    cfg = tmp_path / f"{name}.toml"
    cfg.write_text(f'data_dir = "{tmp_path / name}"\nbootstrap_samples = 50\nexam_pairs = 10\nllm_max_retries = 0\n'
                   f'bench_concurrency = 1\n\n[[candidates]]\nname = "{CANDIDATE}"\nmodel = "openai/fake-model"\n'
                   f'api_base = "{llm_url}"\ncutoff = "2024-06-01"\n', encoding="utf-8")
    return cfg


def _settings(cfg: Path) -> Settings:
    return load_settings(cfg, env=dict(FAST_ENV))


def _history(settings: Settings, season: str) -> dict[str, Any]:
    store = open_store(settings.db_path)
    try:
        out = history(store, season)
        out["generations"] = store.rows("SELECT paper_id, candidate, count(*) AS n FROM generations "
                                        "GROUP BY ALL ORDER BY ALL")
        out["board_versions"] = store.scalar("SELECT count(*) FROM board_versions")
        out["snapshots"] = store.scalar("SELECT count(*) FROM snapshots")
        return out
    finally:
        store.close()


def _comparable(out: dict[str, Any]) -> dict[str, Any]:
    """The history but the board version ids: a version's id hashes the published boards, and those carry the
    measured latency of the candidate's calls (wall time, not the simulated clock's)."""
    return {**out, "days": [{k: v for k, v in d.items() if k != "board_version"} for d in out["days"]]}


@dataclass
class Straight:
    """A season replayed once, straight through, in-process: what the other replays are compared with."""

    tmp: Path
    llm: FakeOpenAIServer
    papers: list[dict[str, Any]]
    season_file: Path
    season: str
    days: list[dict[str, Any]]
    history: dict[str, Any]
    site: Path


@pytest.fixture(scope="module")
def straight(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Straight]:
    tmp = tmp_path_factory.mktemp("replay")
    season_file = tmp / "season.jsonl"
    papers = write_season(season_file)
    season = f"season:{season_file}"
    with FakeOpenAIServer() as llm:
        settings = _settings(_config(tmp, llm.url, "straight"))
        store = open_store(settings.db_path)
        try:
            days = replay(settings, store, season, DAYS)
        finally:
            store.close()
        yield Straight(tmp, llm, papers, season_file, season, days, _history(settings, season), settings.site_path)


@pytest.mark.slow
def test_each_replayed_day_holds_what_the_records_imply(straight: Straight) -> None:
    seen = straight.days
    assert [d["day"] for d in seen] == DAYS
    for day in seen:
        assert all(status == "ok" for status in day["jobs"].values()), day
        facts = implied(straight.papers, day["day"])
        assert {k: day[k] for k in facts} == facts, day["day"]
        assert day["papers_scored"] == facts["papers_scoreable"]
    assert [d["sealed_generations"] for d in seen] == [4, 4, 6, 6, 6]  # made on the day each paper was posted
    assert [d["review_versions"] for d in seen][2] == [d["review_versions"] for d in seen][1] + 1  # the edit
    assert len({d["board_version"] for d in seen[1:]}) == 4  # new references every day from day 2 on
    assert straight.history["snapshots"] == 1
    ranked = {(r["day"], r["candidate"]) for r in straight.history["rows"] if r["rank"] is not None}
    assert (DAYS[-1], CANDIDATE) in ranked and (DAYS[-1], "human") not in ranked  # a reference line
    assert len(straight.llm.chat_requests) == 6  # one per paper, none repeated on later days
    # the site draws the history beside the headline board (its days as they were scored)
    index = (straight.site / "index.html").read_text(encoding="utf-8")
    drawn = re.findall(r'src="boards/([^"]+)-history\.svg"', index)
    assert len(drawn) == 1, index[:2000]
    svg = (straight.site / "boards" / f"{drawn[0]}-history.svg").read_text(encoding="utf-8")
    assert CANDIDATE in svg and "simulated day" in svg and "rank (band = 95%" in svg  # the rank panel
    # each ranked row keeps its rank interval, as the day's board had it (m0028)
    assert all(r["rank_low"] <= r["rank"] <= r["rank_high"] for r in straight.history["rows"] if r["rank"] is not None)


@pytest.mark.slow
def test_the_same_season_and_settings_give_the_same_history(straight: Straight) -> None:
    again = _settings(_config(straight.tmp, straight.llm.url, "again"))
    store = open_store(again.db_path)
    try:
        replay(again, store, straight.season, DAYS)
    finally:
        store.close()
    assert _comparable(_history(again, straight.season)) == _comparable(straight.history)


@pytest.mark.slow
def test_a_replay_killed_mid_day_resumes_on_that_day_and_ends_with_the_same_history(straight: Straight) -> None:
    # the CLI, killed with SIGKILL once day 2's line is out (it is then in day 3), and run the same way again
    cfg = _config(straight.tmp, straight.llm.url, "killed")
    env = {**os.environ, **FAST_ENV, "GREBENCH_CONFIG": str(cfg)}
    cmd = [sys.executable, "-m", "grebench.cli", "replay", "--season", str(straight.season_file),
           "--from", "2025-11-01", "--to", "2025-11-05"]
    first = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    lines = []
    try:
        assert first.stdout is not None
        for line in first.stdout:
            lines.append(line)
            if line.startswith("day 2025-11-02"):
                break
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    assert lines and lines[-1].startswith("day 2025-11-02"), lines
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stderr[-3000:]
    resumed = [line[4:14] for line in done.stdout.splitlines() if line.startswith("day ")]
    assert resumed == ["2025-11-03", "2025-11-04", "2025-11-05"]  # the done days are not run again
    assert _comparable(_history(_settings(cfg), straight.season)) == _comparable(straight.history)
    history_cli = subprocess.run([*cmd[:4], "--history", "--json"], env=env, capture_output=True, text=True,
                                 timeout=60)
    assert history_cli.returncode == 0, history_cli.stderr[-2000:]
    assert [d["status"] for d in json.loads(history_cli.stdout)["days"]] == ["done"] * len(DAYS)


@pytest.mark.slow
def test_a_stop_during_a_day_leaves_that_day_running_not_done(straight: Straight) -> None:
    settings = _settings(_config(straight.tmp, straight.llm.url, "stopped"))
    store = open_store(settings.db_path)
    try:
        with pytest.raises(stop.Interrupted):
            replay(settings, store, straight.season, DAYS[:2], on_day=lambda _day: stop.request_stop())
        days = store.rows("SELECT day, status FROM replay_days ORDER BY day")
    finally:
        stop.reset()
        store.close()
    assert [(d["day"], d["status"]) for d in days] == [(DAYS[0], "done"), (DAYS[1], "running")]

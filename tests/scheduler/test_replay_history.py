"""The board history keeps each day's rank interval with the rank (issue 34: ranks with their uncertainty), and
`grebench replay --history` shows it."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from grebench.cli import main
from grebench.scheduler import history
from grebench.scoring import rank_range
from grebench.store import Store, open_store
from tests.conftest import FAST_ENV
from tests.site.conftest import HISTORY_DAYS, fill_store, record_history


def _board_rows(store: Store) -> dict[tuple[str, str], dict]:
    return {(r["board_id"], r["candidate"]): r for r in store.rows("SELECT * FROM board_rows")}


def test_each_history_row_keeps_the_rank_interval_of_its_board_row() -> None:
    store = open_store(None)
    fill_store(store)
    record_history(store)
    boards = _board_rows(store)
    rows = history(store, "season:test")["rows"]
    assert len(rows) == len(boards) * len(HISTORY_DAYS)
    ranked = [r for r in rows if r["rank"] is not None]
    assert ranked and all(r["rank_low"] is not None and r["rank_low"] <= r["rank"] <= r["rank_high"] for r in ranked)
    for r in rows:
        row = boards[(r["board_id"], r["candidate"])]
        assert (r["rank"], r["rank_low"], r["rank_high"]) == (row["rank"], row["rank_low"], row["rank_high"])
    assert all(r["rank_low"] is None for r in rows if r["rank"] is None)  # controls: no rank, no interval


def test_replay_history_prints_each_rank_with_its_interval(tmp_path: Path) -> None:
    store = open_store(tmp_path / "data" / "grebench.duckdb")
    try:
        fill_store(store)
        record_history(store)
        expected = {(r["candidate"], rank_range(r)) for r in history(store)["rows"] if r["rank"] is not None}
    finally:
        store.close()
    env = {**FAST_ENV, "GREBENCH_DATA_DIR": str(tmp_path / "data")}
    result = CliRunner().invoke(main, ["replay", "--history"], env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    for candidate, span in expected:
        assert any(f"({span})" in line and f" {candidate} " in line for line in result.output.splitlines()), \
            (candidate, span, result.output[:2000])
    as_json = CliRunner().invoke(main, ["replay", "--history", "--json"], env=env, catch_exceptions=False)
    rows = json.loads(as_json.stdout)["rows"]
    assert {"rank_low", "rank_high"} <= set(rows[0]) and any(r["rank_low"] is not None for r in rows)

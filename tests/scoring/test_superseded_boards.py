"""A setup scored again under a new estimator id (the offline estimator refitted on the reviews public by then, a
model in another dtype) publishes one board, the latest fit's, and its history follows it across the refit.

Found on the shipped season's real edits: every day a review was edited, the offline estimator's id changed, the
previous fit's boards stayed published beside the new ones, and the history plot restarted at the edit."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from grebench.pipeline._resolve import record_scored
from grebench.scoring import ScoredSetup, compute_boards, superseded_estimators
from grebench.settings import load_settings
from grebench.site import board_histories, build_site
from grebench.store import SimulatedClock, Store, use_clock
from tests.conftest import FAST_ENV
from tests.store.test_snapshot import scored  # noqa: F401  (fixture)


def test_a_refitted_setup_publishes_only_its_latest_boards_and_one_history(scored: Store,  # noqa: F811
                                                                             tmp_path: Path) -> None:
    settings = load_settings(env={**FAST_ENV, "GREBENCH_DATA_DIR": str(tmp_path / "d"),
                                  "GREBENCH_BOOTSTRAP_SAMPLES": "50"})
    old, prep = scored.con.execute("SELECT any_value(estimator), any_value(preprocessor) FROM scores "
                                   "WHERE preprocessor <> 'none'").fetchone()
    new = old + "-refit"
    with use_clock(SimulatedClock(datetime(2025, 11, 12))):
        record_scored(scored, ScoredSetup("offline", "rules", old, prep), "run-1")
    compute_boards(scored, settings)
    first = {r["board_id"]: r for r in scored.rows("SELECT * FROM boards")}
    day1 = datetime(2025, 11, 12)
    with use_clock(SimulatedClock(day1)):  # the day's publish: a board version dated that day
        build_site(scored, settings, tmp_path / "site")
    # the next day's refit: the same spec scores under a new id (the old scores stay stored)
    scored.con.execute("INSERT INTO scores SELECT * REPLACE (? AS estimator) FROM scores WHERE estimator = ?",
                       [new, old])
    with use_clock(SimulatedClock(datetime(2025, 11, 13))):
        record_scored(scored, ScoredSetup("offline", "rules", new, prep), "run-2")
    assert superseded_estimators(scored) == {old}
    compute_boards(scored, settings)
    boards = {r["board_id"]: r for r in scored.rows("SELECT * FROM boards")}
    assert {b["estimator"] for b in boards.values()} == {new}  # yesterday's fit is not ranked beside today's
    assert len(boards) == len(first)
    scored.con.execute("UPDATE scores SET pmi = pmi + 0.5 WHERE estimator = ? AND candidate = 'human'", [new])
    compute_boards(scored, settings)  # the refit's numbers differ a little: the next day's version is a new one
    with use_clock(SimulatedClock(datetime(2025, 11, 13))):
        build_site(scored, settings, tmp_path / "site")
    histories = board_histories(scored)
    assert set(histories) == {b for b, row in boards.items() if row["scope"] == "all"}  # versions hold `all` boards
    for rows in histories.values():  # keyed by the published boards, the old fit's version folded in
        assert sorted({r["day"].date() for r in rows}) == [day1.date(), datetime(2025, 11, 13).date()]
    assert scored.scalar("SELECT count(*) FROM scores WHERE estimator = ?", [old]) > 0  # kept, not deleted

"""The shipped season's real edits through `grebench replay`: on the day after a reviewer edited a review, the store
holds a new version of it and the board version published that day names the edit."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from grebench.ingest import bundled_season_path
from grebench.ingest._archive import parse_time
from grebench.scheduler import replay
from grebench.settings import load_settings
from grebench.site import changes_text
from grebench.store import open_store
from tests.conftest import FAST_ENV

# A day around a real edit of the shipped season that changed a review's text (its weaknesses): review IJDhfVKL8s
# of ASPC2Ut0CB on 2025-11-14 14:52 UTC; a late review (27oJibuygA's) arrives the same day.  (An edit of a rating
# only adds a version: the scored text, and so the board, stay.)
BEFORE, AFTER = datetime(2025, 11, 14, 12), datetime(2025, 11, 15, 12)


def _changed_between(start: datetime, end: datetime) -> tuple[set[str], set[str]]:
    """The reviews the shipped season's records edit, and those that arrive late, in ``(start, end]``."""
    lines = bundled_season_path().read_text(encoding="utf-8").split("\n")  # texts hold U+2028: no splitlines()
    edited, late = set(), set()
    for paper in (json.loads(line) for line in lines[1:] if line.strip()):
        for review in paper["reviews"]:
            dates = [parse_time(v["modified_at"], "edit") for v in [*review.get("history", [])[1:], review]]
            if review.get("history") and any(start < d <= end for d in dates if d is not None):
                edited.add(review["id"])
            arrives = parse_time(review["visible_at"], "visible")
            if arrives is not None and start < arrives <= end:
                late.add(review["id"])
    return edited, late


@pytest.mark.slow
def test_a_real_edit_lands_as_a_new_version_on_its_day_and_the_board_change_names_it(tmp_path: Path) -> None:
    edited, late = _changed_between(BEFORE, AFTER)
    assert edited, "no edit of the shipped season between the replayed days"
    cfg = tmp_path / "grebench.toml"
    cfg.write_text(f'data_dir = "{tmp_path / "data"}"\nbootstrap_samples = 50\nexam_pairs = 10\n', encoding="utf-8")
    settings = load_settings(cfg, env=dict(FAST_ENV))
    store = open_store(settings.db_path)
    try:
        days = replay(settings, store, "season:bundled", [BEFORE, AFTER])
        versions = {r["review_id"]: (r["n"], r["last"]) for r in store.rows(
            "SELECT review_id, count(*) AS n, max(fetched_at) AS last FROM review_versions GROUP BY review_id")}
        changes = json.loads(store.scalar("SELECT changes_json FROM board_versions WHERE version_id = ?",
                                          [days[1]["board_version"]]))
    finally:
        store.close()
    assert all(status == "ok" for day in days for status in day["jobs"].values()), days
    assert days[1]["review_versions"] == days[0]["review_versions"] + len(edited) + len(late)
    for rid in edited:  # the version public on the first day, then the edit, stored on the edit's day
        assert versions[rid][0] == 2 and AFTER <= versions[rid][1] < AFTER + timedelta(minutes=1), versions[rid]
    assert days[1]["board_version"] != days[0]["board_version"]
    assert {r["review_id"] for r in changes["edited_reviews"]} == edited
    assert changes["rows"], "the board did not change"
    # the change names the edit; the rows' reasons include it (the offline estimator is fitted on the reviews, so an
    # edited text makes a new estimator id, and its boards come in as new boards: "1 edited review(s)" among the why)
    text = changes_text(changes)
    assert all(rid in text for rid in edited) and "edited review(s)" in text

"""Season files read at the clock's now: papers once posted, reviews once public, each as edited by then."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any

from grebench.ingest import SeasonSource, SourceFailure, bundled_season_path, season_span
from grebench.ingest._archive import parse_time
from grebench.store import PaperRecord, SimulatedClock, WallClock, use_clock, utcnow
from tests.scheduler.replay_season import write_season


def _at(source: SeasonSource, day: str) -> dict[str, PaperRecord]:
    with use_clock(SimulatedClock(datetime.fromisoformat(day))):
        out = list(source.fetch())
    assert not [p for p in out if isinstance(p, SourceFailure)]
    return {p.paper_id: p for p in out if isinstance(p, PaperRecord)}


def test_a_season_shows_what_was_public_on_each_day(tmp_path: Path) -> None:
    papers = write_season(tmp_path / "s.jsonl")
    source = SeasonSource(tmp_path / "s.jsonl")
    ids = [p["id"] for p in papers]
    assert _at(source, "2025-10-31") == {}
    day1 = _at(source, "2025-11-01")
    assert list(day1) == ids[:4] and all(p.reviews == [] for p in day1.values())
    day2 = _at(source, "2025-11-02")
    edited = papers[0]["reviews"][0]["id"]
    first = next(r for r in day2[ids[0]].reviews if r.review_id == edited)
    assert first.text.count("An earlier summary") == 1 and first.modified_at == datetime(2025, 11, 2)
    assert [len(day2[i].reviews) for i in ids[:4]] == [len(p["reviews"]) for p in papers[:3]] + [0]
    day3 = _at(source, "2025-11-03")
    later = next(r for r in day3[ids[0]].reviews if r.review_id == edited)
    assert "An earlier summary" not in later.text and later.content_sha256 != first.content_sha256
    day4 = _at(source, "2025-11-04")
    assert len(day4[ids[3]].reviews) == len(papers[3]["reviews"]) - 1  # the late review is not out yet
    assert len(_at(source, "2025-11-05")[ids[3]].reviews) == len(papers[3]["reviews"])
    assert season_span(source) == (datetime(2025, 11, 1), datetime(2025, 11, 5))


def test_a_season_record_without_a_posting_date_is_a_failure_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text('{"id": "p1", "venue_id": "V/2025/C", "title": "t", "reviews": []}\n', encoding="utf-8")
    out = list(SeasonSource(path).fetch())
    assert len(out) == 1 and isinstance(out[0], SourceFailure)
    assert out[0].item == "s.jsonl:1" and "submitted_at" in out[0].reason


def test_the_wall_clock_is_the_default_and_a_simulated_one_ticks_forward() -> None:
    clock = SimulatedClock(datetime(2025, 11, 1))
    with use_clock(clock):
        a, b = utcnow(), utcnow()
        assert datetime(2025, 11, 1) < a < b < datetime(2025, 11, 1, 0, 0, 1)
    assert abs((utcnow() - WallClock().now()).total_seconds()) < 60


def _shipped() -> list[dict[str, Any]]:
    lines = bundled_season_path().read_text(encoding="utf-8").split("\n")  # texts hold U+2028: no splitlines()
    return [json.loads(line) for line in lines[1:] if line.strip()]


def test_the_shipped_season_holds_real_edits_in_date_order() -> None:
    edited = [(p["id"], r) for p in _shipped() for r in p["reviews"] if r.get("history")]
    assert edited, "the shipped season has no edited review"
    for _paper, review in edited:
        versions = [*review["history"], {"modified_at": review["modified_at"], "content": review["content"]}]
        dates = [parse_time(v["modified_at"], "version") for v in versions]
        assert parse_time(review["created_at"], "created") <= dates[0]
        assert dates == sorted(dates) and len(set(dates)) == len(dates), review["id"]
        contents = [json.dumps(v["content"], sort_keys=True) for v in versions]
        assert all(a != b for a, b in pairwise(contents)), review["id"]  # each version changed the form


def test_the_shipped_season_shows_each_edit_and_late_review_on_its_day() -> None:
    source = SeasonSource(bundled_season_path())
    papers = _shipped()
    paper_id, review = next((p["id"], r) for p in papers for r in p["reviews"] if r.get("history"))
    edit = parse_time(review["modified_at"], "edit")
    assert edit is not None

    def shown(day: datetime, pid: str, rid: str) -> Any:
        return next((r for r in _at(source, day.isoformat())[pid].reviews if r.review_id == rid), None)

    before, after = shown(edit - timedelta(seconds=1), paper_id, review["id"]), shown(edit, paper_id, review["id"])
    assert before is not None and after is not None and before.content_sha256 != after.content_sha256
    assert before.modified_at == parse_time(review["history"][-1]["modified_at"], "previous")
    assert after.modified_at == edit
    # a late review: written after the release (2025-11-12), public from then on
    paper_id, late = next((p["id"], r) for p in papers for r in p["reviews"] if r["visible_at"] != "2025-11-12")
    arrives = parse_time(late["visible_at"], "late")
    assert arrives is not None and arrives > datetime(2025, 11, 12)
    assert shown(arrives - timedelta(seconds=1), paper_id, late["id"]) is None
    assert shown(arrives, paper_id, late["id"]) is not None
    # the default days end on the first midnight after the season's last change (an edit in the afternoon)
    last = max(d for p in papers for r in p["reviews"] for v in [r, *r.get("history", [])]
               for d in (parse_time(v["modified_at"], "m"), parse_time(r["visible_at"], "v")) if d is not None)
    assert last.time() != datetime.min.time()
    assert season_span(source)[1] == datetime.combine(last.date(), datetime.min.time()) + timedelta(days=1)

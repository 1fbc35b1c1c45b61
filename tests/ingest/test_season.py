"""Season files read at the clock's now: papers once posted, reviews once public, each as edited by then."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from grebench.ingest import SeasonSource, SourceFailure, season_span
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

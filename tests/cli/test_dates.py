"""The one parser of date options (issue 51): dates, date-times, ``Z`` and offsets, timezone-aware."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from grebench.cli._dates import parse_day, parse_when, shown
from grebench.store import SimulatedClock, naive_utc


@pytest.mark.parametrize(("text", "day_end", "expected"), [
    ("2025-11-12", False, datetime(2025, 11, 12, tzinfo=UTC)),
    ("2025-11-12", True, datetime(2025, 11, 12, 23, 59, 59, 999999, tzinfo=UTC)),
    ("2025-11-12Z", True, datetime(2025, 11, 12, 23, 59, 59, 999999, tzinfo=UTC)),  # the day, not its midnight
    ("2025-11-12+02:00", False, datetime(2025, 11, 11, 22, tzinfo=UTC)),  # stdlib alone reads this as 02:00
    ("2025-11-12T06:00", False, datetime(2025, 11, 12, 6, tzinfo=UTC)),
    # with day_end a time is the end of the minute or second it is written to (issue 64: a replay stamps a version
    # 00:00:00.000145, and --as-of 00:00:00Z must find it); a fraction is that instant
    ("2025-11-12T06:00Z", True, datetime(2025, 11, 12, 6, 0, 59, 999999, tzinfo=UTC)),
    ("2025-11-14T00:00:00Z", True, datetime(2025, 11, 14, 0, 0, 0, 999999, tzinfo=UTC)),
    ("2025-11-14T00:00:00.5Z", True, datetime(2025, 11, 14, 0, 0, 0, 500000, tzinfo=UTC)),
    ("2025-11-12 06:00:30.5z", False, datetime(2025, 11, 12, 6, 0, 30, 500000, tzinfo=UTC)),
    ("2025-11-12T08:00+02:00", False, datetime(2025, 11, 12, 6, tzinfo=UTC)),
    ("2025-11-12T00:30-0530", False, datetime(2025, 11, 12, 6, tzinfo=UTC)),
])
def test_every_form_is_an_aware_utc_instant(text: str, day_end: bool, expected: datetime) -> None:
    when = parse_when(text, day_end=day_end)
    assert when == expected and when.tzinfo is UTC


@pytest.mark.parametrize("text", ["", "yesterday", "2025-13-01", "2025-11-12T24:00", "2025-11-12T06:00+25:00",
                                  "12/11/2025", "2025-11-12T06", "2025-11-12Zulu"])
def test_anything_else_is_refused_with_the_accepted_forms(text: str) -> None:
    with pytest.raises(ValueError, match=r"YYYY-MM-DD|valid date"):
        parse_when(text)


def test_a_day_option_takes_a_calendar_date_only() -> None:
    assert parse_day(" 2024-06-01 ") == date(2024, 6, 1)
    with pytest.raises(ValueError, match="not a date"):
        parse_day("2024-06-01T00:00")


def test_aware_times_meet_the_store_and_the_clock_as_naive_utc() -> None:
    aware = parse_when("2025-11-12T08:00+02:00")
    assert naive_utc(aware) == datetime(2025, 11, 12, 6)
    assert naive_utc(datetime(2025, 11, 12, 6)) == datetime(2025, 11, 12, 6)  # naive is UTC already
    clock = SimulatedClock(aware)
    clock.set(parse_when("2025-11-12T07:00Z"))  # an aware time no longer breaks a comparison with the clock
    assert clock.now().tzinfo is None and clock.now() > datetime(2025, 11, 12, 7)


def test_times_are_printed_to_the_second() -> None:
    assert shown(datetime(2025, 11, 12, 6, 0, 0, 123456)) == "2025-11-12 06:00:00 UTC"
    assert shown(parse_when("2025-11-12T08:00+02:00")) == "2025-11-12 06:00:00 UTC"


def test_as_of_a_whole_second_finds_a_version_stamped_within_it() -> None:
    """The replay's clock ticks a microsecond per reading: a version of 2025-11-14 is stamped 00:00:00.000145."""
    from grebench.site import version
    from grebench.store import open_store

    store = open_store(None)
    try:
        for vid, at in (("20251113T000000Z-aaaaaaaa", datetime(2025, 11, 13, 0, 0, 0, 120)),
                        ("20251114T000000Z-bbbbbbbb", datetime(2025, 11, 14, 0, 0, 0, 145))):
            store.con.execute("INSERT INTO board_versions (version_id, published_at, content_sha256, previous_id, "
                              "leaderboard_json, basis_json, changes_json, page_html) VALUES (?, ?, ?, NULL, '{}', "
                              "'{}', NULL, '')", [vid, at, vid[-8:]])
        found = version(store, as_of=parse_when("2025-11-14T00:00:00Z", day_end=True))
        assert found is not None and found["version_id"] == "20251114T000000Z-bbbbbbbb"
        before = version(store, as_of=parse_when("2025-11-13T23:59:59Z", day_end=True))
        assert before is not None and before["version_id"] == "20251113T000000Z-aaaaaaaa"
    finally:
        store.con.close()

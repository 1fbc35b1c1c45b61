"""An unchanged panel rerun returns the stored results without asking a judge or writing a row; a change reruns."""

from __future__ import annotations

from typing import Any

from grebench.panel import run_panel
from grebench.settings import Settings
from grebench.store import Store, utcnow
from tests.panel.builders import UNSCORED, VENUE, build_venue

TABLES = ("judges", "judge_exams", "panel_votes", "panel_verdicts", "panel_rankings", "panel_agreement",
          "machine_metrics", "debates")


def _dump(store: Store) -> dict[str, Any]:
    return {t: sorted(map(repr, store.con.execute(f"SELECT * FROM {t}").fetchall())) for t in TABLES}


def _settings(settings: Settings, **values: Any) -> Settings:
    return Settings(values={**settings.values, "bootstrap_samples": 30, "exam_pairs": 6, **values}, tables={})


def test_unchanged_rerun_writes_nothing_and_returns_the_same_summary(settings: Settings, store: Store) -> None:
    build_venue(store)
    settings = _settings(settings)
    first = run_panel(store, settings, None, **UNSCORED)
    assert first["votes"] > 0 and first["skipped_venues"] == []
    before = _dump(store)
    again = run_panel(store, settings, None, **UNSCORED)
    assert again["skipped_venues"] == [VENUE] and again["votes"] == 0 and again["calls_made"] == 0
    assert again["machine_metrics"] == 0
    for key in ("exam", "rankings", "agreement", "verdicts", "flagged", "debated", "votes_total"):
        assert again[key] == first[key], key
    assert _dump(store) == before  # not even a timestamp was rewritten


def test_a_new_generation_is_judged_and_only_its_pairs_are_asked(settings: Settings, store: Store) -> None:
    build_venue(store)
    settings = _settings(settings)
    run_panel(store, settings, None, **UNSCORED)
    old_votes = set(store.con.execute("SELECT generation_a, generation_b, judge, order_ab FROM panel_votes").fetchall())
    store.con.execute("INSERT INTO generations (generation_id, candidate, paper_id, prompt_version, params_json, "
                      "status, text, generated_at) VALUES ('generic-new', 'generic', 'paper0', 'v2', '{}', 'ok', ?, ?)",
                      ["Summary: a new constant review.\nStrengths: none given.\nWeaknesses: none given.", utcnow()])
    again = run_panel(store, settings, None, **UNSCORED)
    assert again["skipped_venues"] == [] and again["votes"] > 0
    new = set(store.con.execute("SELECT generation_a, generation_b, judge, order_ab FROM panel_votes").fetchall())
    added = new - old_votes
    assert len(added) == again["votes"]
    assert all("generic-new" in (a, b) for a, b, _, _ in added)  # nothing else was asked again
    verdicts = store.rows("SELECT * FROM panel_verdicts WHERE paper_id = 'paper0' AND "
                          "(candidate_a = 'generic' OR candidate_b = 'generic')")
    assert len(verdicts) == 1  # generic (a control) is judged against the one contestant, the human baseline
    third = run_panel(store, settings, None, **UNSCORED)
    assert third["skipped_venues"] == [VENUE] and third["votes"] == 0


def test_changed_settings_or_judges_recompute(settings: Settings, store: Store) -> None:
    build_venue(store)
    run_panel(store, _settings(settings), None, **UNSCORED)
    more = run_panel(store, _settings(settings, bootstrap_samples=40), None, **UNSCORED)
    assert more["skipped_venues"] == [] and more["votes"] == 0  # recomputed from the stored votes
    only = run_panel(store, _settings(settings, bootstrap_samples=40), None, **UNSCORED,
                     judge_names=["overlap", "length"])
    assert only["skipped_venues"] == [] and {r["judge"] for r in only["exam"]} == {"overlap", "length"}
    back = run_panel(store, _settings(settings, bootstrap_samples=40), None, **UNSCORED)
    assert back["skipped_venues"] == [] and len(back["exam"]) == 4  # the subset run replaced the exam table

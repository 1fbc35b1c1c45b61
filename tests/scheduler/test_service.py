"""The scheduler service in-process: sealed generations before reviews, scores after, restarts repeat nothing."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from pathlib import Path

from grebench.pipeline import venue_sources
from grebench.scheduler import SchedulerService
from grebench.scoring import leaderboard
from grebench.settings import load_settings
from grebench.site import versions
from grebench.store import utcnow
from tests.conftest import FAST_ENV
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.openreview_server import FakeOpenReview
from tests.scheduler.conftest import CANDIDATE, add_papers, add_reviews, make_settings

COUNTED = ("papers", "reviews", "review_versions", "generations", "scores", "llm_calls", "baseline_splits",
           "judgments", "snapshots")


def _counts(service: SchedulerService) -> dict[str, int]:
    return {t: service.store.scalar(f"SELECT count(*) FROM {t}") for t in COUNTED}


def test_venue_sources_accept_ids_and_specs() -> None:
    s = load_settings(env={**FAST_ENV, "GREBENCH_VENUES": "ICLR.cc/2025/Conference, archive:/x.jsonl,bundled,,"})
    assert venue_sources(s) == ["openreview:ICLR.cc/2025/Conference", "archive:/x.jsonl", "bundled"]


def test_cycle_generates_sealed_before_reviews_scores_after_and_restart_repeats_nothing(
        tmp_path: Path, openreview: FakeOpenReview, llm: FakeOpenAIServer) -> None:
    settings = make_settings(tmp_path, openreview, llm)
    papers = add_papers(openreview, 4)
    service = SchedulerService(settings)
    for kind in ("poll", "generate", "score"):
        done = service.run_job(kind)
        assert done["status"] == "ok", done.get("error")
    assert len(llm.chat_requests) == 4  # one call per paper, made while no review is public
    assert service.store.scalar("SELECT count(*) FROM scores") == 0
    assert service.store.scalar("SELECT count(*) FROM generations WHERE candidate = ? AND status = 'ok'",
                                [CANDIDATE]) == 4

    add_reviews(openreview, papers)
    time.sleep(1.1)  # the reviews' public date is in the past now
    results = {r["job"]: r for r in service.run_all_once()}
    assert all(r["status"] == "ok" for r in results.values()), results
    assert results["generate"]["summary"]["resealed"] == 4
    assert len(llm.chat_requests) == 4  # bench found the sealed generations: no second call
    sealed = service.store.rows("SELECT sealed FROM generations WHERE candidate = ?", [CANDIDATE])
    assert [r["sealed"] for r in sealed] == [True] * 4
    board = leaderboard(service.store, "gem-s", *service.store.con.execute(
        "SELECT estimator, preprocessor FROM scores LIMIT 1").fetchone(), samples=50, seed=1)
    row = next(r for r in board if r["candidate"] == CANDIDATE)
    assert row["papers"] == 4 and row["sealed_share"] == 1.0
    assert (settings.data_path / "export" / "scores.parquet").is_file()
    assert (settings.site_path / "index.html").is_file()
    # the site job published the boards as a board version, its files under versions/<id>/
    published = versions(service.store)
    assert len(published) == 1 and results["site"]["summary"]["version"] == \
        published[0]["version_id"]
    site_json = json.loads((settings.site_path / "leaderboard.json").read_text(encoding="utf-8"))
    assert site_json["version"]["id"] == published[0]["version_id"] and site_json["boards"]
    assert (settings.site_path / site_json["version"]["href"]).read_bytes() == \
        (settings.site_path / "leaderboard.json").read_bytes()
    # the yearly snapshot of 2020 was due on snapshot_date 2021: cut once, verified, registered
    cut = results["snapshot"]["summary"]["cut"]
    assert [c["reason"] for c in cut] == ["yearly"]
    assert (Path(cut[0]["path"]) / "manifest.json").is_file()
    before = _counts(service)
    service.close()

    again = SchedulerService(settings)
    assert again.recovered == []
    assert all(r["status"] == "ok" for r in again.run_all_once())
    assert _counts(again) == before  # no duplicate rows, no second snapshot
    assert versions(again.store) == published  # unchanged boards: no second board version
    assert len(llm.chat_requests) == 4
    states = {s["job_id"]: s for s in again.states()}
    assert states["poll"]["runs"] == 3 and states["snapshot"]["runs"] == 2
    again.close()


def test_restart_after_a_crash_marks_the_job_interrupted_and_runs_it_first(tmp_path: Path) -> None:
    settings = load_settings(env={**FAST_ENV, "GREBENCH_DATA_DIR": str(tmp_path / "data"),
                                  "GREBENCH_SCORE_INTERVAL_MIN": "30"})
    service = SchedulerService(settings)
    store = service.store
    run_id = store.start_run("scheduler:generate", {})
    finished = utcnow() - timedelta(minutes=10)
    store.con.execute("UPDATE jobs SET status = 'running', last_started_at = ? WHERE job_id = 'generate'", [utcnow()])
    store.con.execute("UPDATE jobs SET status = 'ok', last_finished_at = ? WHERE job_id = 'score'", [finished])
    service.close()  # as if killed: the rows say 'running'
    from grebench.store import _store
    _store._LIVE_RUNS.pop(run_id, None)  # ... and the process that owned the run is gone

    restarted = SchedulerService(settings)
    assert restarted.recovered == ["generate"]
    assert restarted.store.scalar("SELECT status FROM runs WHERE run_id = ?", [run_id]) == "interrupted"
    now = utcnow()
    due = restarted.next_runs(now)
    assert due["generate"] - now < timedelta(seconds=1)  # interrupted: at once
    assert due["score"] == finished + timedelta(minutes=30)  # resumes its interval
    assert due["queue"] < due["poll"] < due["generate"]  # same-moment jobs keep their order
    restarted.close()


def test_apscheduler_runs_the_jobs_on_their_intervals(tmp_path: Path, openreview: FakeOpenReview,
                                                      llm: FakeOpenAIServer) -> None:
    settings = make_settings(tmp_path, openreview, llm, poll_interval_min=0.01, generate_interval_min=0.01,
                             misfire_grace_s=120.0)
    add_papers(openreview, 2)
    service = SchedulerService(settings, kinds=["poll", "generate"])
    service.start()
    try:
        jobs = {j.id: j for j in service.scheduler.get_jobs()}
        assert set(jobs) == {"poll", "generate"}
        assert all(j.max_instances == 1 and j.coalesce and j.misfire_grace_time == 120 for j in jobs.values())
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            runs = {s["job_id"]: s["runs"] for s in service.states()}
            if runs["poll"] >= 2 and runs["generate"] >= 2:
                break
            time.sleep(0.2)
        assert runs["poll"] >= 2 and runs["generate"] >= 2, runs
    finally:
        service.close()
    store_check = SchedulerService(settings, kinds=["poll"])
    assert store_check.store.scalar("SELECT count(*) FROM generations WHERE status = 'ok'") == 2
    assert len(llm.chat_requests) == 2  # repeated generate runs made no new call
    store_check.close()

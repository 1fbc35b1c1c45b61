"""The stop token (grebench.stop) and what it leaves behind: no run stays `running`, progress says `aborted`, each
layer stops at its own request boundary (ingest per paper, score per batch, snapshot per member, LLM calls)."""

from __future__ import annotations

import io
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grebench import stop
from grebench.progress import PlainProgress
from grebench.store import open_store


@pytest.fixture(autouse=True)
def clear_token() -> Iterator[None]:
    stop.reset()
    yield
    stop.reset()


def test_check_wait_and_sleep_end_at_a_stop() -> None:
    stop.check()  # nothing asked: no exception
    never = threading.Event()
    assert stop.wait(never, 0.05) is False
    threading.Timer(0.1, stop.request_stop, args=[signal.SIGTERM]).start()
    started = time.monotonic()
    with pytest.raises(stop.Interrupted, match="stopped by SIGTERM"):
        stop.wait(never, 60)  # would wait a minute: the stop ends it
    with pytest.raises(stop.Interrupted):
        stop.sleep(60)
    assert time.monotonic() - started < 30
    assert stop.exit_status() == 0


def test_exit_status_follows_the_convention() -> None:
    stop.request_stop(signal.SIGINT)
    assert stop.exit_status() == 130 and stop.reason_text() == "stopped by SIGINT"
    stop.reset()
    stop.request_stop()
    assert stop.exit_status(7) == 7 and stop.reason_text() == "stopped on request"
    assert not issubclass(stop.Interrupted, Exception)  # never swallowed by `except Exception` of one item


def test_an_aborted_task_says_aborted_never_done() -> None:
    out = io.StringIO()
    with pytest.raises(stop.Interrupted), PlainProgress(out).task("score", 12, "requests") as task:
        task.advance(2)
        stop.request_stop()
        stop.check()
    last = out.getvalue().splitlines()[-1]
    assert last.startswith("score: 2/12 requests (17%)") and last.endswith("(aborted)") and "(done)" not in last


def test_a_writer_marks_a_gone_writers_runs_interrupted(tmp_path: Path) -> None:
    db = tmp_path / "grebench.duckdb"
    first = open_store(db)
    dead = first.start_run("run", {})
    first.con.close()  # the process "died": no finish_run, no checkpoint
    from grebench.store import _store
    _store._LIVE_RUNS.pop(dead, None)  # as after a real death: no live run of this process owns it
    second = open_store(db)  # any writer, not only the scheduler
    try:
        live = second.start_run("run", {})
        assert second.scalar("SELECT status FROM runs WHERE run_id = ?", [dead]) == "interrupted"
        assert "killed" in second.scalar("SELECT summary_json FROM runs WHERE run_id = ?", [dead])
        third = open_store(db)  # a second writer in this process never marks a live run of the process
        assert third.scalar("SELECT status FROM runs WHERE run_id = ?", [live]) == "running"
        third.con.close()
        second.finish_run(live, {})
    finally:
        second.close()


def test_a_stopped_job_records_an_interrupted_run(tmp_path: Path) -> None:
    from contextlib import nullcontext

    from grebench.pipeline import BaseStage, Job, StageContext, run_job
    from grebench.settings import load_settings
    from tests.conftest import FAST_ENV

    class Asks(BaseStage):
        name = "bench"

        def run(self, ctx: StageContext) -> dict[str, object]:
            stop.request_stop(signal.SIGINT)  # the signal arrives mid-stage
            stop.check()
            return {}

    settings = load_settings(env={**FAST_ENV, "GREBENCH_DATA_DIR": str(tmp_path)})
    store = open_store(tmp_path / "g.duckdb")
    try:
        import grebench.pipeline._jobs as jobs

        original = jobs._stages
        jobs._stages = lambda spec: [Asks()]  # type: ignore[assignment]
        try:
            with pytest.raises(stop.Interrupted):
                run_job(settings, Job.of("bench"), open_store=lambda: nullcontext(store))
        finally:
            jobs._stages = original
        row = store.rows("SELECT status, summary_json FROM runs")[0]
        assert row["status"] == "interrupted" and "stopped by SIGINT" in row["summary_json"]
        assert store.scalar("SELECT count(*) FROM run_failures") == 0  # a stop is no failure
    finally:
        store.close()


def test_ingest_stops_between_papers_and_keeps_what_it_read(tmp_path: Path) -> None:
    from grebench.ingest import resolve_source, run_ingest
    from grebench.settings import load_settings
    from tests.conftest import FAST_ENV

    settings = load_settings(env={**FAST_ENV, "GREBENCH_DATA_DIR": str(tmp_path)})
    store = open_store(None)
    seen: list[str] = []

    def on_item(paper_id: str) -> None:
        seen.append(paper_id)
        if len(seen) == 5:
            stop.request_stop(signal.SIGTERM)

    with pytest.raises(stop.Interrupted):
        run_ingest(resolve_source("bundled", settings), store, settings, "r1", on_item=on_item)
    stored = int(store.scalar("SELECT count(*) FROM papers"))
    total = 300
    assert 5 <= stored < total  # what was read before the boundary is written; nothing after it is read
    stop.reset()
    again = run_ingest(resolve_source("bundled", settings), store, settings, "r2")
    assert store.scalar("SELECT count(*) FROM papers") == total and again.papers_added == total - stored


def test_a_snapshot_stops_between_members_and_leaves_nothing_half_cut(tmp_path: Path) -> None:
    from grebench.ingest import resolve_source, run_ingest
    from grebench.settings import load_settings
    from grebench.store import export_snapshot
    from tests.conftest import FAST_ENV

    settings = load_settings(env={**FAST_ENV, "GREBENCH_DATA_DIR": str(tmp_path)})
    store = open_store(None)
    run_ingest(resolve_source("bundled", settings), store, settings, "r1", limit=3)
    venue = store.scalar("SELECT venue_id FROM papers LIMIT 1")
    out = tmp_path / "snap"
    stop.request_stop(signal.SIGINT)
    with pytest.raises(stop.Interrupted):
        export_snapshot(store, venue, out)
    assert not out.exists() and list(tmp_path.glob(".snap.tmp-*")) == []
    stop.reset()
    assert export_snapshot(store, venue, out)["files"]  # resumes: the whole snapshot is cut


def test_stats_never_shows_a_gone_writers_run_as_running(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from grebench.cli._main import main

    store = open_store(tmp_path / "grebench.duckdb")
    run_id = store.start_run("run", {})  # a writer killed mid-run: the row says running
    store.close()
    result = CliRunner().invoke(main, ["--data-dir", str(tmp_path), "stats"])
    assert result.exit_code == 0, result.output
    line = next(line for line in result.output.splitlines() if run_id in line)
    assert "run: interrupted" in line and "running" not in line


def test_the_terminal_bar_leaves_an_aborted_line(capsys: pytest.CaptureFixture[str]) -> None:
    from grebench.progress import RichProgress

    with pytest.raises(stop.Interrupted), RichProgress().task("bench: LLM reviews", 12, "reviews") as task:
        task.advance(6)
        stop.request_stop()
        stop.check()
    err = capsys.readouterr().err
    assert "bench: LLM reviews: 6/12 reviews (aborted)" in err and "(done)" not in err


def test_call_hands_back_the_result_or_the_error_and_abandons_a_blocked_call_at_a_stop() -> None:
    assert stop.call(lambda: 41 + 1) == 42
    with pytest.raises(KeyError, match="nope"):
        stop.call(lambda: {}["nope"])
    entered, never = threading.Event(), threading.Event()

    def blocked() -> None:  # a socket read the token cannot reach
        entered.set()
        never.wait(600)

    def stop_once_blocked() -> None:
        entered.wait(60)
        stop.request_stop(signal.SIGTERM)

    threading.Thread(target=stop_once_blocked, daemon=True).start()
    started = time.monotonic()
    with pytest.raises(stop.Interrupted, match="stopped by SIGTERM"):
        stop.call(blocked)
    assert entered.is_set() and time.monotonic() - started < 60  # the call would have blocked 600 s
    with pytest.raises(stop.Interrupted):
        stop.call(lambda: 1)  # after a stop nothing new is called


def test_a_stopped_site_build_leaves_the_published_site_and_no_new_version(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 64: the stop lands after the build recorded a new board version (its boards changed) and before the
    site is swapped in: the version is withdrawn, the old site stays, nothing of the build is left."""
    from grebench.site import _build, build_site, versions
    from tests.site.conftest import data_settings, fill_store

    settings = data_settings(tmp_path / "data")
    store = open_store(settings.db_path)
    try:
        fill_store(store)
        first = build_site(store, settings)
        before = versions(store)
        assert before and first["version"] == before[0]["version_id"]
        store.con.execute("UPDATE board_rows SET score = score + 0.5")  # new boards: the next build publishes
        published = {p.relative_to(settings.site_path): p.read_bytes() for p in settings.site_path.rglob("*")
                     if p.is_file()}
        write_versions = _build._write_versions

        def stopped_midway(*args: Any) -> Any:
            stop.request_stop()  # as SIGTERM does; the next page is the boundary
            return write_versions(*args)

        monkeypatch.setattr(_build, "_write_versions", stopped_midway)
        with pytest.raises(stop.Interrupted):
            build_site(store, settings)
        assert versions(store) == before  # the version this build recorded is withdrawn
    finally:
        stop.reset()
        store.close()
    assert not settings.site_path.with_name("site.building").exists()
    assert {p.relative_to(settings.site_path): p.read_bytes() for p in settings.site_path.rglob("*")
            if p.is_file()} == published

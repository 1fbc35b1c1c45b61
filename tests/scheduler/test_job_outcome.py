"""Issue 34: the ``jobs`` table and serve's stderr say what a job really did.

A poll whose venue cannot be read (nothing listens at the OpenReview address) is recorded ``failed`` with its first
failure as ``last_error`` (it was recorded ``ok`` with no error), serve logs one line per job with that outcome, and
APScheduler's own INFO lines ("executed successfully", also for failed and interrupted jobs) stay off its stderr.
"""

from __future__ import annotations

import logging
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grebench.scheduler import SchedulerService
from grebench.settings import load_settings
from grebench.store import open_store
from tests.conftest import FAST_ENV
from tests.reliability.conftest import cli_env, write_config

VENUE = "openreview:Fake.cc/2026/Conference"


def _refused_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"  # closed again: nothing listens there


def _values() -> dict[str, object]:
    url = _refused_url()
    return {"openreview_baseurl_v1": url, "openreview_baseurl_v2": url, "openreview_max_retries": 0,
            "fetch_pdfs": False, "venues": VENUE}


def test_a_poll_that_cannot_read_its_venue_is_recorded_failed_with_the_reason(tmp_path: Path) -> None:
    env = {**FAST_ENV, "GREBENCH_DATA_DIR": str(tmp_path / "data"),
           **{f"GREBENCH_{k.upper()}": str(v) for k, v in _values().items()}}
    service = SchedulerService(load_settings(env=env), kinds=["poll"])
    try:
        result = service.run_job("poll")
        row = next(r for r in service.states() if r["job_id"] == "poll")
    finally:
        service.close()
    assert result["status"] == "failed" and result["run_status"] == "failed"
    assert result["error"].startswith(f"[ingest] {VENUE}: SourceError: listing")
    assert "cannot talk to OpenReview" in result["error"] and "connection refused" in result["error"]
    assert (row["status"], row["last_error"]) == ("failed", result["error"])


def test_a_job_refused_by_its_setup_is_recorded_failed_in_one_line_without_a_traceback(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket() as other:  # another program holds the fixed port of the local model servers
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        env = {**FAST_ENV, "GREBENCH_DATA_DIR": str(tmp_path / "data"), "GREBENCH_LOCAL_SERVER_PORT": str(port),
               "GREBENCH_LOCAL_CANDIDATES": "smollm2-135m"}
        service = SchedulerService(load_settings(env=env), kinds=["generate"])
        try:
            with caplog.at_level(logging.INFO, logger="grebench.scheduler"):
                result = service.run_job("generate")
            row = next(r for r in service.states() if r["job_id"] == "generate")
        finally:
            service.close()
    assert result["status"] == "failed" and result["run_id"] is None  # refused before its run started
    assert result["error"].startswith(f"SetupError: local_server_port = {port}: port {port} on 127.0.0.1 is in use")
    assert (row["status"], row["last_error"]) == ("failed", result["error"])
    lines = [r for r in caplog.records if r.name == "grebench.scheduler._service" and "job generate" in r.message]
    said = [r.getMessage() for r in lines]
    assert said[0] == "job generate started" and len(said) == 2, said
    assert re.fullmatch(rf"job generate finished \(failed: {re.escape(result['error'])}\) in \d+\.\d s", said[1]), said
    assert not any(r.exc_info for r in caplog.records)  # a setting to fix, not a bug: no traceback


def test_serve_logs_one_line_per_job_with_its_outcome_and_none_of_apschedulers(tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "grebench.toml", tmp_path / "data", **_values())
    err = tmp_path / "serve.err"
    with err.open("wb") as stream:
        proc = subprocess.Popen([sys.executable, "-m", "grebench.cli", "serve", "--no-app", "--job", "poll"],
                                env=cli_env(cfg), stdout=subprocess.DEVNULL, stderr=stream)
    try:
        deadline = time.monotonic() + 120
        while "job poll finished" not in err.read_text(encoding="utf-8", errors="replace"):
            assert proc.poll() is None and time.monotonic() < deadline, err.read_text()[-3000:]
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    log = err.read_text(encoding="utf-8")
    job_lines = [line.split(" ", 1)[1] for line in log.splitlines() if "job poll" in line]  # after the time
    assert len(job_lines) == 2 and job_lines[0] == "INFO grebench.scheduler._service: job poll started", log
    assert job_lines[1].startswith(
        f"WARNING grebench.scheduler._service: job poll finished (failed: [ingest] {VENUE}: "), log
    assert "executed successfully" not in log and "apscheduler" not in log, log
    store = open_store(tmp_path / "data" / "grebench.duckdb", read_only=True)
    try:
        status, error = store.rows("SELECT status, last_error FROM jobs WHERE job_id = 'poll'")[0].values()
    finally:
        store.close()
    assert status == "failed" and "connection refused" in error

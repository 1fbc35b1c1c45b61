"""A service an operator can watch (issue 64): a timestamp on every log line (ISO-8601 UTC; JSON lines with
``log_format = "json"``), a "started" and an "ended (outcome, duration)" line for every job, `grebench status` (the
jobs table, next due times, the last error, the age of the last board) while the service runs and after it."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from grebench.cli._logging import JsonFormatter, TextFormatter
from grebench.store import open_store
from tests.bench.conftest import tiny_papers
from tests.conftest import FAST_ENV

STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (DEBUG|INFO|WARNING|ERROR|CRITICAL) \S+: ")


def _record(message: str, **extra: Any) -> logging.LogRecord:
    record = logging.LogRecord("grebench.scheduler._service", logging.INFO, __file__, 1, message, None, None)
    record.__dict__.update(extra)
    return record


def test_log_lines_start_with_their_utc_time_and_json_lines_carry_the_job_fields() -> None:
    record = _record("job poll finished (ok) in 1.5 s", job="poll", event="job ended", outcome="ok", duration_s=1.5)
    record.created = 1_796_000_000.25  # 2026-11-30T00:53:20.250Z
    assert TextFormatter().format(record) == \
        "2026-11-30T00:53:20.250Z INFO grebench.scheduler._service: job poll finished (ok) in 1.5 s"
    line = json.loads(JsonFormatter().format(record))
    assert line == {"ts": "2026-11-30T00:53:20.250Z", "level": "INFO", "logger": "grebench.scheduler._service",
                    "message": "job poll finished (ok) in 1.5 s", "job": "poll", "event": "job ended",
                    "outcome": "ok", "duration_s": 1.5}


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """A data dir with a few papers: the site job runs in seconds."""
    root = tmp_path / "data"
    store = open_store(root / "grebench.duckdb")
    with store.transaction():
        for paper in tiny_papers():
            store.upsert_paper(paper)
    store.close()
    return root


def _env(data: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("GREBENCH_CONFIG",)}
    return {**env, **{k: v for k, v in FAST_ENV.items() if v is not None}, "GREBENCH_DATA_DIR": str(data),
            "PYTHONUNBUFFERED": "1", **extra}


def _grebench(data: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "grebench.cli", *args], env=_env(data, **env), capture_output=True,
                          text=True, timeout=300)


@pytest.mark.slow
def test_a_running_service_logs_every_job_with_its_time_and_status_shows_its_jobs(data: Path, tmp_path: Path) -> None:
    err = tmp_path / "serve.err"
    with err.open("wb") as stream:
        proc = subprocess.Popen([sys.executable, "-m", "grebench.cli", "serve", "--no-app", "--job", "site"],
                                env=_env(data), stdout=subprocess.DEVNULL, stderr=stream)
    try:
        deadline = time.monotonic() + 240
        while "job site finished" not in err.read_text(encoding="utf-8", errors="replace"):
            assert proc.poll() is None and time.monotonic() < deadline, err.read_text()[-3000:]
            time.sleep(0.05)
        status = _grebench(data, "status", "--json")  # the service holds the store: what it wrote
        text = _grebench(data, "status")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    log = err.read_text(encoding="utf-8")
    logged = [line for line in log.splitlines() if re.match(r"^\d{4}-", line)]
    assert logged and all(STAMP.match(line) for line in logged), log
    assert all(STAMP.match(line) for line in log.splitlines() if " grebench." in line and ": " in line), log
    for job in ("check", "site"):
        assert any(line.endswith(f"job {job} started") for line in logged), log
        assert any(re.search(rf"job {job} finished \(ok.*\) in \d+\.\d s$", line) for line in logged), log

    assert status.returncode == 0, status.stderr
    shown = json.loads(status.stdout)
    assert "grebench serve" in shown["source"], shown["source"]
    jobs = {j["job_id"]: j for j in shown["jobs"]}
    assert jobs["site"]["status"] == "ok" and jobs["site"]["runs"] == 1 and jobs["site"]["next_due"]
    assert jobs["check"]["status"] == "ok" and jobs["check"]["next_due"]
    assert "poll" not in jobs  # not scheduled in this service
    assert text.returncode == 0 and "next due" in text.stdout and "last board:" in text.stdout, text.stdout

    # after the service: the store's own jobs table, a failed job's last error, due times from the intervals
    store = open_store(data / "grebench.duckdb")
    store.con.execute("UPDATE jobs SET status = 'failed', last_error = 'boom: the venue could not be read', "
                      "last_finished_at = now()::TIMESTAMP WHERE job_id = 'poll'")
    store.close()
    after = json.loads(_grebench(data, "status", "--json").stdout)
    jobs = {j["job_id"]: j for j in after["jobs"]}
    assert jobs["poll"]["last_error"] == "boom: the venue could not be read"
    assert jobs["poll"]["next_due"] > jobs["poll"]["last_finished_at"]  # its interval after the failure
    assert after["source"].startswith("no service holds the store")
    assert "boom: the venue could not be read" in _grebench(data, "status").stdout


@pytest.mark.slow
def test_json_logs_are_one_object_per_line_with_the_jobs_duration_and_outcome(data: Path) -> None:
    done = _grebench(data, "serve", "--once", "--job", "site", GREBENCH_LOG_FORMAT="json")
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    ended = [entry for entry in lines if entry.get("event") == "job ended"]
    assert {e["job"] for e in ended} == {"check", "site"}, lines
    assert all(e["outcome"] == "ok" and e["duration_s"] >= 0 and e["ts"].endswith("Z") for e in ended)
    assert any(entry.get("event") == "job started" and entry["job"] == "site" for entry in lines)

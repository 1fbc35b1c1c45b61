"""Issue 34: a stop signal while OpenReview is being retried is honoured at once (a new operator, offline).

``ingest``/``run --source openreview:…`` and ``serve``'s poll, with nothing listening at the OpenReview address
(every request refused, retried with a growing back-off) or with a server that accepts and never answers: SIGTERM
after the first retry is logged (or once the request is provably in flight) ends the command long before the
back-off or the request's timeout would have, with the "stopped by SIGTERM" line and exit status 0; the run (and
the job) is recorded ``interrupted``, never ``failed``.  ``stop_grace_s`` is set far beyond the test's limit, so the
watchdog that ends a stuck process cannot be what ends it: the stop is honoured by the code, in the back-off.
Before the fix the retries slept through the signal and the run ended ``failed`` when they ran out (rc 1).
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pytest

from tests.reliability.conftest import cli_env, write_config

VENUE = "Fake.cc/2026/Conference"
RETRIES = 10  # back-offs of 0.5, 1, 2, 4, 8, 16 and 30 s each after: about 150 s in all
LIMIT_S = 30.0  # well before the back-off (or the 600 s request timeout) would have ended


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _config(tmp_path: Path, url: str) -> Path:
    return write_config(tmp_path / "grebench.toml", tmp_path / "data", openreview_baseurl_v1=url,
                        openreview_baseurl_v2=url, openreview_max_retries=RETRIES, openreview_max_wait_s=3600.0,
                        openreview_timeout_s=600.0, stop_grace_s=600.0, fetch_pdfs=False,
                        venues=f"openreview:{VENUE}")


def _start(cfg: Path, err: Path, *args: str) -> subprocess.Popen[bytes]:
    with err.open("wb") as stream:
        return subprocess.Popen([sys.executable, "-m", "grebench.cli", *args], env=cli_env(cfg),
                                stdout=subprocess.DEVNULL, stderr=stream)


def _wait_for(err: Path, text: str, proc: subprocess.Popen[bytes]) -> None:
    """Until ``text`` shows on the command's stderr (polled; generous deadline)."""
    deadline = time.monotonic() + 120
    while text not in err.read_text(encoding="utf-8", errors="replace"):
        assert proc.poll() is None, err.read_text()[-3000:]
        assert time.monotonic() < deadline, f"never saw {text!r}\n" + err.read_text()[-3000:]
        time.sleep(0.05)


def _sigterm(proc: subprocess.Popen[bytes]) -> tuple[float, int]:
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        rc = proc.wait(timeout=LIMIT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail(f"still running {LIMIT_S:g} s after SIGTERM (the back-off ignores the stop)")
    return time.monotonic() - started, rc


def _rows(db: Path, sql: str) -> list[tuple[object, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def _assert_interrupted(tmp_path: Path, rc: int, command: str) -> None:
    log = (tmp_path / "err.txt").read_text(encoding="utf-8", errors="replace")
    assert rc == 0, log[-3000:]  # SIGTERM: the service stopped as asked
    assert "stopped by SIGTERM" in log and "did not stop within its grace" not in log, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
    db = tmp_path / "data" / "grebench.duckdb"
    assert _rows(db, "SELECT command, status FROM runs") == [(command, "interrupted")]
    assert _rows(db, "SELECT count(*) FROM run_failures") == [(0,)]  # not a failed ingest


@pytest.mark.parametrize("command", ["ingest", "run"])
def test_sigterm_during_the_back_off_ends_the_command_at_once(tmp_path: Path, command: str) -> None:
    cfg = _config(tmp_path, f"http://127.0.0.1:{_closed_port()}")  # nothing listens: every request is refused
    proc = _start(cfg, tmp_path / "err.txt", command, "--source", f"openreview:{VENUE}")
    try:
        _wait_for(tmp_path / "err.txt", "backing off; waiting 1.0 s", proc)  # the second retry's back-off
        seconds, rc = _sigterm(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    print({"command": command, "seconds_to_exit": round(seconds, 2)})
    _assert_interrupted(tmp_path, rc, command)


@contextmanager
def _silent_server() -> Iterator[socket.socket]:
    """A listening socket whose connections are accepted by the test and never answered."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.settimeout(120)
        yield server


def test_sigterm_while_a_request_hangs_ends_ingest_at_once(tmp_path: Path) -> None:
    with _silent_server() as server:
        cfg = _config(tmp_path, f"http://127.0.0.1:{server.getsockname()[1]}")
        proc = _start(cfg, tmp_path / "err.txt", "ingest", "--source", f"openreview:{VENUE}")
        try:
            conn, _ = server.accept()  # the listing request is in flight; it is never answered
            with conn:
                assert conn.recv(4096).startswith(b"GET /notes")
                seconds, rc = _sigterm(proc)
        finally:
            if proc.poll() is None:
                proc.kill()
    print({"hung request": True, "seconds_to_exit": round(seconds, 2)})
    _assert_interrupted(tmp_path, rc, "ingest")


def test_sigterm_during_the_back_off_of_serves_poll_records_the_job_interrupted(tmp_path: Path) -> None:
    cfg = _config(tmp_path, f"http://127.0.0.1:{_closed_port()}")
    proc = _start(cfg, tmp_path / "err.txt", "serve", "--no-app", "--job", "poll")
    try:
        _wait_for(tmp_path / "err.txt", "backing off; waiting 1.0 s", proc)
        seconds, rc = _sigterm(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    print({"command": "serve", "seconds_to_exit": round(seconds, 2)})
    _assert_interrupted(tmp_path, rc, "scheduler:poll")
    db = tmp_path / "data" / "grebench.duckdb"
    assert _rows(db, "SELECT status, last_error FROM jobs WHERE job_id = 'poll'") == [
        ("interrupted", "stopped by SIGTERM")]
    log = (tmp_path / "err.txt").read_text(encoding="utf-8")
    assert "job poll interrupted (stopped by SIGTERM)" in log and "executed successfully" not in log

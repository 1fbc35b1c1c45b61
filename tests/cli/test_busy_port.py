"""Issue 34: a busy app port is found before any work starts.

``serve`` (and ``app``) with another program listening on the app's port: one line naming the port and what to
change, exit status 2 like every bad setting, no traceback, and nothing recorded (no run, no job) — it used to
start the jobs, then fail in Gradio with 7 tracebacks and leave the score run ``interrupted``.  Should the port be
taken between the check and the launch, the app is launched before the scheduler starts, so no job runs either.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from grebench.cli import main
from grebench.store import open_store
from tests.conftest import FAST_ENV
from tests.reliability.conftest import cli_env, write_config


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A port another program listens on (127.0.0.1, the app's default host)."""
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        yield int(other.getsockname()[1])


def _store_rows(data: Path) -> dict[str, int]:
    store = open_store(data / "grebench.duckdb", read_only=True)
    try:
        return {table: int(store.scalar(f"SELECT count(*) FROM {table}")) for table in ("runs", "jobs")}
    finally:
        store.close()


def _empty_store(data: Path) -> None:
    data.mkdir()
    open_store(data / "grebench.duckdb").close()


def test_serve_refuses_a_busy_app_port_before_any_job(tmp_path: Path, busy_port: int) -> None:
    _empty_store(tmp_path / "data")
    cfg = write_config(tmp_path / "grebench.toml", tmp_path / "data", app_port=busy_port)
    done = subprocess.run([sys.executable, "-m", "grebench.cli", "serve"], env=cli_env(cfg), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    assert errors == [f"Error: app_port = {busy_port}: port {busy_port} on 127.0.0.1 is in use (another program "
                      "listens there); free it or choose another port with the setting "
                      "app_port (GREBENCH_APP_PORT), or run `grebench serve --no-app`"], done.stderr
    assert "Traceback" not in done.stderr and "serve plan" not in done.stderr  # refused before the plan
    assert _store_rows(tmp_path / "data") == {"runs": 0, "jobs": 0}


def test_app_refuses_a_busy_port_naming_its_option(tmp_path: Path, busy_port: int) -> None:
    result = CliRunner().invoke(main, ["--data-dir", str(tmp_path / "data"), "app", "--port", str(busy_port)],
                                env=FAST_ENV)
    assert result.exit_code == 2, result.output
    assert f"port {busy_port} on 127.0.0.1 is in use" in result.output and "--port or the setting app_port" in (
        result.output)


def test_a_port_taken_after_the_check_fails_serve_before_any_job(tmp_path: Path, busy_port: int,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    _empty_store(tmp_path / "data")
    monkeypatch.setattr("grebench.pipeline.check_app_port", lambda *_args: None)  # another program was quicker
    result = CliRunner().invoke(main, ["--data-dir", str(tmp_path / "data"), "serve"],
                                env={**FAST_ENV, "GREBENCH_APP_PORT": str(busy_port)})
    assert result.exit_code == 1, result.output
    assert result.output.strip().splitlines()[-1] == (
        f"Error: the app could not listen on 127.0.0.1:{busy_port} (Cannot find empty port in range: "
        f"{busy_port}-{busy_port}); free the port or choose another with the setting app_port (GREBENCH_APP_PORT); "
        "no job was started")
    assert _store_rows(tmp_path / "data")["runs"] == 0  # the scheduler never started


def test_a_busy_fixed_local_server_port_is_refused_before_a_job_that_would_use_it(tmp_path: Path,
                                                                                  busy_port: int) -> None:
    env = {**FAST_ENV, "GREBENCH_LOCAL_SERVER_PORT": str(busy_port), "GREBENCH_LOCAL_CANDIDATES": "smollm2-135m"}
    run = CliRunner().invoke(main, ["--data-dir", str(tmp_path / "data"), "run"], env=env)
    assert run.exit_code == 2, run.output
    assert run.output.strip().splitlines()[-1] == (
        f"Error: local_server_port = {busy_port}: port {busy_port} on 127.0.0.1 is in use (another program listens "
        "there); free it, or set local_server_port = 0 to let the OS choose a free port")
    assert not (tmp_path / "data" / "grebench.duckdb").exists()  # refused before the store was opened
    ingest = CliRunner().invoke(main, ["--data-dir", str(tmp_path / "data"), "ingest", "--limit", "2"], env=env)
    assert ingest.exit_code == 0, ingest.output  # a job that starts no local server is not refused


def test_a_vllm_local_estimator_named_on_the_command_line_gets_its_port_checked(tmp_path: Path,
                                                                               busy_port: int) -> None:
    """The port check reads the job's estimator (``--estimator`` over the setting), not the setting alone: the
    setting here is the offline estimator, which starts no server (issue 49)."""
    env = {**FAST_ENV, "GREBENCH_LOCAL_SERVER_PORT": str(busy_port), "GREBENCH_ESTIMATOR": "offline"}
    args = ["--data-dir", str(tmp_path / "data"), "score"]
    named = CliRunner().invoke(main, [*args, "--estimator", "vllm-local:smollm2-135m"], env=env)
    assert named.exit_code == 2, named.output
    assert f"Error: local_server_port = {busy_port}: port {busy_port} on 127.0.0.1 is in use" in named.output
    assert not (tmp_path / "data" / "grebench.duckdb").exists()  # refused before the store was opened

"""`grebench run` stopped by SIGINT (Ctrl-C) or SIGTERM during bench, with concurrent streamed LLM calls in flight:
it exits within 5 s (130 after SIGINT, 0 after SIGTERM), the run is recorded `interrupted`, the aborted progress line
says so, and a rerun ends with the same store as an uninterrupted run (the kill-chain comparison of
``_store_content``).  The fake holds one call open until the process has exited: the stop cannot wait for it.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import duckdb
import pytest

from tests.fakes.openai_server import CallGate, FakeOpenAIServer
from tests.reliability._store_content import content_diff, store_content
from tests.reliability.conftest import cli, cli_popen, write_config

CONCURRENCY = 4  # the case: 4 concurrent streamed requests


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_run_stops_mid_bench_within_10_s_and_resumes_to_the_clean_store(tmp_path: Path, small_archive: Path,
                                                                         signum: int) -> None:
    gate = CallGate()
    source = f"archive:{small_archive}"
    with FakeOpenAIServer(reply=gate) as llm:
        clean_cfg = write_config(tmp_path / "clean.toml", tmp_path / "clean", llm.url, llm_max_retries=0,
                                 bench_concurrency=CONCURRENCY)
        clean = cli(clean_cfg, "run", "--source", source, "--json")
        assert clean.returncode == 0, clean.stderr[-3000:]
        clean_calls = len(llm.chat_requests)

        cfg = write_config(tmp_path / "stopped.toml", tmp_path / "stopped", llm.url, llm_max_retries=0,
                           bench_concurrency=CONCURRENCY)
        gate.arm(clean_calls + 3)  # the third call of the second run waits: calls are in flight, one held
        err = tmp_path / "run.err"
        proc = cli_popen(cfg, "run", "--source", source, stderr=err)
        try:
            assert gate.reached.wait(timeout=300), err.read_text()[-3000:]
            assert proc.poll() is None
            started = time.monotonic()
            proc.send_signal(signum)
            rc = proc.wait(timeout=60)
            seconds = time.monotonic() - started
        finally:
            if proc.poll() is None:
                proc.kill()
            gate.released.set()
        log = err.read_text(encoding="utf-8", errors="replace")
        print(json.dumps({"signal": signal.Signals(signum).name, "seconds_to_exit": round(seconds, 2), "rc": rc}))
        assert seconds < 5, log[-3000:]  # every stop within 5 s (issue 64)
        assert rc == (130 if signum == signal.SIGINT else 0), log[-3000:]
        assert f"stopped by {signal.Signals(signum).name}" in log and "[score]" not in log  # nothing new started
        bench_lines = [line for line in log.splitlines() if line.startswith("bench: LLM reviews")]
        assert bench_lines and bench_lines[-1].endswith("(aborted)"), log[-2000:]
        db = tmp_path / "stopped" / "grebench.duckdb"
        con = duckdb.connect(str(db), read_only=True)
        try:
            assert con.execute("SELECT status FROM runs").fetchall() == [("interrupted",)]
        finally:
            con.close()

        stats = cli(cfg, "stats")
        assert "run: interrupted" in stats.stdout, stats.stdout
        final = cli(cfg, "run", "--source", source, "--json")
        assert final.returncode == 0, final.stderr[-3000:]
        # only the calls in flight at the signal were asked again
        assert len(llm.chat_requests) - clean_calls <= clean_calls + CONCURRENCY
    assert content_diff(store_content(db), store_content(tmp_path / "clean" / "grebench.duckdb")) == []

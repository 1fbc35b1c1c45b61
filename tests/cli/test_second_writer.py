"""A second writer on one data dir is told who holds it, at once (issue 51).

Before, a second ``grebench serve`` waited about a minute, then exited 1 with DuckDB's raw lock text naming
``python3.11``.  Now ``serve`` takes the writer lock before anything slow, and the refusal names the holder as the
command it runs (```grebench serve` (PID N)``) and what to do.  The first serve is a real process; the test waits for
its "scheduler running" line (observed progress), then times the second.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grebench.cli import _common
from grebench.settings import load_settings
from grebench.store import StoreLocked
from tests.conftest import FAST_ENV

#: Far below the minute it took; the second process's start-up (imports) is most of it.
REFUSED_WITHIN_S = 15


def test_a_second_serve_names_the_first_and_exits_at_once(tmp_path: Path) -> None:
    env = {**os.environ, **FAST_ENV, "GREBENCH_DATA_DIR": str(tmp_path / "data"), "GREBENCH_VENUES": ""}
    env.pop("GREBENCH_CONFIG", None)
    argv = [sys.executable, "-m", "grebench.cli", "serve", "--no-app"]
    first = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        assert first.stderr is not None
        deadline = time.monotonic() + 120
        for line in first.stderr:  # the lock is held from before this line
            if "scheduler running" in line or time.monotonic() > deadline:
                break
        started = time.monotonic()
        second = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
        took = time.monotonic() - started
    finally:
        first.send_signal(signal.SIGTERM)
        first.wait(timeout=60)
    assert second.returncode == 1, second.stderr
    [line] = [x for x in second.stderr.splitlines() if x.startswith("Error: ")]
    assert f"`grebench serve` (PID {first.pid}) holds it" in line and "only one grebench writer" in line, line
    assert "python3" not in line and "Conflicting lock" not in line
    assert took < REFUSED_WITHIN_S, took



def test_docs_quote_the_second_writer_message(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/store.md quotes the refusal word for word (issue 64: it quoted an older one)."""
    monkeypatch.setattr(_common, "holder_name", lambda pid: f"`grebench serve` (PID {pid})")
    settings = load_settings(env={"GREBENCH_DATA_DIR": "DATA_DIR"})
    message = _common.locked_message(settings.db_path, StoreLocked(settings.db_path, "Conflicting lock (PID 123)"))
    doc = " ".join((Path(__file__).parents[2] / "docs" / "store.md").read_text(encoding="utf-8").split())
    assert f'"Error: {" ".join(message.split())}"' in doc, message
    assert "Only one grebench writer may run at a time" not in doc

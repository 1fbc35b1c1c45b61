"""Readers while `grebench serve` holds the store for writing: a short wait, then one clear line, no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from grebench.cli import _common
from grebench.cli._main import main
from grebench.store import open_store

HOLD = """
import sys, duckdb
con = duckdb.connect(sys.argv[1])
con.execute("SELECT 1")
print("locked", flush=True)
sys.stdin.readline()
"""


@pytest.mark.parametrize("command", [["stats"], ["leaderboard"]])
def test_reader_says_the_store_is_busy(tmp_path: Path, command: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    open_store(data / "grebench.duckdb").close()
    waits: list[int] = []
    monkeypatch.setattr(_common, "_pause", lambda: waits.append(1))  # count the waits; never sleep in a test
    child = subprocess.Popen([sys.executable, "-c", HOLD, str(data / "grebench.duckdb")], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "locked"  # observed, not timed
        result = CliRunner().invoke(main, [*command, "--data-dir", str(data)])
    finally:
        assert child.stdin is not None
        child.stdin.write("\n")
        child.stdin.close()
        child.wait(timeout=60)
    assert result.exit_code == 1
    assert "the store is busy (serve is writing); try again" in result.output
    assert "Traceback" not in result.output and isinstance(result.exception, SystemExit)
    assert len(waits) == _common.READER_ATTEMPTS - 1  # it waited briefly before giving up

"""Readers while another process holds the store for writing: they read the last published state (the export the
site stage writes with every publish), say which board version and which writer, and exit 0; with nothing
published yet, one clear line naming the writer, no traceback.

The writer is a real second process holding the DuckDB file open for writing; its command line reads
``grebench run`` (a script file named ``grebench``), so the readers' naming of the writer is checked too.  The
tests wait for the file it writes once it holds the lock (observed progress, never a fixed sleep).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner

from grebench.cli import _common
from grebench.cli._main import main
from grebench.settings import Settings
from grebench.site import build_site
from grebench.store import open_store
from tests.site.conftest import data_settings, filled_file_store

HOLD = """
import sys, duckdb
from pathlib import Path
con = duckdb.connect(sys.argv[2])
con.execute("SELECT 1")
Path(sys.argv[3]).write_text("locked")
sys.stdin.readline()
"""
DEADLINE_S = 60


@contextmanager
def writer_holding(tmp_path: Path, db: Path) -> Iterator[int]:
    """A second process that holds ``db`` for writing, its argv ``… grebench run …``; yields its PID once it holds
    the lock (it says so in a file) and lets it go at the end."""
    script = tmp_path / "bin" / "grebench"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(HOLD)
    flag = tmp_path / "holding"
    child = subprocess.Popen([sys.executable, str(script), "run", str(db), str(flag)], stdin=subprocess.PIPE,
                             text=True)
    try:
        deadline = time.monotonic() + DEADLINE_S
        while not flag.exists():  # polled: the holder says when it holds the lock
            assert child.poll() is None and time.monotonic() < deadline, "the holder never took the lock"
            time.sleep(0.05)
        yield child.pid
    finally:
        assert child.stdin is not None
        child.stdin.write("\n")
        child.stdin.close()
        child.wait(timeout=DEADLINE_S)


@pytest.fixture
def published(tmp_path: Path) -> dict[str, object]:
    """A store whose boards were published once (site and export, as the site stage does), then closed."""
    with filled_file_store(tmp_path / "data") as (store, settings):
        summary = build_site(store, settings)
        store.export_parquet(settings.export_path)
    board = CliRunner().invoke(main, ["leaderboard", "--data-dir", str(settings.data_path)])
    assert board.exit_code == 0, board.output
    return {"settings": settings, "version": summary["version"], "board": board.stdout}


@pytest.fixture
def no_waits(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    waits: list[int] = []
    monkeypatch.setattr(_common, "_pause", lambda: waits.append(1))  # count the waits; never sleep in a test
    return waits


def test_readers_show_the_last_published_board_while_a_writer_holds_the_store(
        tmp_path: Path, published: dict[str, object], no_waits: list[int]) -> None:
    settings = published["settings"]
    assert isinstance(settings, Settings)
    data, version = str(settings.data_path), str(published["version"])
    runner = CliRunner()
    with writer_holding(tmp_path, settings.db_path) as pid:
        board = runner.invoke(main, ["leaderboard", "--data-dir", data])
        stats = runner.invoke(main, ["stats", "--json", "--data-dir", data])
        out = tmp_path / "copy"
        export = runner.invoke(main, ["export", "--out", str(out), "--json", "--data-dir", data])
        site = runner.invoke(main, ["site", "build", "--out", str(tmp_path / "site-copy"), "--data-dir", data])
        in_place = runner.invoke(main, ["site", "build", "--data-dir", data])
        changes = runner.invoke(main, ["leaderboard", "--changes", "--data-dir", data])
        ingest = runner.invoke(main, ["ingest", "--data-dir", data])
    writer = f"`grebench run` (PID {pid})"
    assert board.exit_code == 0, board.output
    assert board.stdout == published["board"]  # the board as published, byte for byte
    assert f"{writer} is writing the store; showing the last published state: board version {version}" \
        in board.stderr
    assert stats.exit_code == 0, stats.output
    facts = json.loads(stats.stdout)
    assert facts["published"]["version"] == version and facts["published"]["writer"] == writer
    assert facts["tables"]["papers"] == 6 and facts["tables"]["board_versions"] == 1
    assert export.exit_code == 0, export.output
    exported = json.loads(export.stdout)
    assert exported["published"]["version"] == version
    assert (out / "boards.parquet").read_bytes() == (settings.export_path / "boards.parquet").read_bytes()
    assert exported["tables"]["papers"]["rows"] == 6
    assert site.exit_code == 0, site.output
    assert (tmp_path / "site-copy" / "leaderboard.json").read_bytes() == \
        (settings.site_path / "leaderboard.json").read_bytes()
    assert f"board version {version}" in site.stdout
    assert in_place.exit_code == 0 and f"the site in {settings.site_path} is its last publish (board version " \
        f"{version})" in in_place.stdout
    assert changes.exit_code == 0 and f"version {version}: the first published version" in changes.stdout
    assert ingest.exit_code == 1 and writer in ingest.output  # a second writer is refused, naming the first
    assert "Traceback" not in board.output + stats.output + export.output + site.output + ingest.output
    assert len(no_waits) == 3 * (_common.READER_ATTEMPTS - 1)  # the readers waited briefly first


@pytest.mark.parametrize("command", [["stats"], ["leaderboard"], ["export"]])
def test_with_nothing_published_a_reader_says_who_writes(tmp_path: Path, command: list[str],
                                                        no_waits: list[int]) -> None:
    settings = data_settings(tmp_path / "data")
    open_store(settings.db_path).close()
    with writer_holding(tmp_path, settings.db_path) as pid:
        result = CliRunner().invoke(main, [*command, "--data-dir", str(settings.data_path)])
    assert result.exit_code == 1
    assert f"the store is busy (`grebench run` (PID {pid}) is writing) and nothing was published yet" \
        in result.output
    assert "serve" not in result.output  # it was `run`: the old message named serve for any writer
    assert "Traceback" not in result.output and isinstance(result.exception, SystemExit)

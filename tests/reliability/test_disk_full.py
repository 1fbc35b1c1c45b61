"""Disk full during a write: a 2 MiB tmpfs as the data dir. The run stops with one clear error line and a non-zero
exit (no traceback); after space is freed (the tmpfs grown), the store opens and a rerun completes and resumes.

Needs ``mount`` (root, or a container allowed to mount tmpfs); skipped with the reason otherwise.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from grebench.store import open_store
from tests.reliability.conftest import cli, tmpfs, write_config


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs mounted on tmp_path/full (unmounted afterwards)."""
    with tmpfs(tmp_path / "full", "2m", "disk-full test") as mount:
        yield mount


@pytest.mark.slow
def test_disk_full_fails_cleanly_then_resumes(small_tmpfs: Path, small_archive: Path) -> None:
    cfg = write_config(small_tmpfs.parent / "full.toml", small_tmpfs / "data")
    full = cli(cfg, "run", "--source", f"archive:{small_archive}", "--json")
    assert full.returncode != 0
    assert "no space left on device" in full.stderr and "free space" in full.stderr, full.stderr[-2000:]
    assert "Traceback" not in full.stderr

    subprocess.run(["mount", "-o", "remount,size=64m", str(small_tmpfs)], check=True)  # space freed
    store = open_store(small_tmpfs / "data" / "grebench.duckdb", read_only=True)  # not corrupt: opens
    store.close()
    again = cli(cfg, "run", "--source", f"archive:{small_archive}", "--json")
    assert again.returncode == 0, again.stderr[-2000:]
    summary = json.loads(again.stdout)
    assert summary["stages"]["ingest"]["papers_total"] == 20 and summary["leaderboards"]
    store = open_store(small_tmpfs / "data" / "grebench.duckdb", read_only=True)
    try:
        assert store.scalar("SELECT count(*) FROM scores") > 0
        assert store.scalar("SELECT count(*) FROM runs WHERE status = 'ok'") == 1
        # the run the full disk stopped keeps its reason (issue 51: it used to read "killed")
        [first] = store.rows("SELECT status, summary_json FROM runs WHERE status <> 'ok'")
        assert first["status"] == "failed" and "no space left on device" in first["summary_json"], first
    finally:
        store.close()

"""A store that knows it is damaged (issue 64): a truncated file, and random bytes written mid-file.

`grebench check` reads every table whole (DuckDB checks a block's checksum only when it reads the block; `count(*)`
reads none, which is why `stats` and `leaderboard` did not notice) and exits 1 naming the damage and the remedy;
every command then says the store is damaged and what to do; the readers show the published export instead, with
exit status 1 (never rc 0 with data from a damaged file).  The service's check keeps backups, and the remedy names
the newest one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from grebench.cli import main
from grebench.settings import load_settings
from grebench.store import Store, check_connection, open_store
from tests.conftest import FAST_ENV


def _cli(data: Path, *args: str) -> Result:
    return CliRunner().invoke(main, ["--data-dir", str(data), *args], env={**FAST_ENV, "GREBENCH_CONFIG": None})


@pytest.fixture
def published(bundled_db: Path, tmp_path: Path) -> Path:
    """A data dir: the bundled store (300 papers) and its published export."""
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy2(bundled_db, data / "grebench.duckdb")
    store = open_store(data / "grebench.duckdb")
    try:
        store.export_parquet(data / "export")
    finally:
        store.close()
    return data


def _truncate(db: Path) -> None:
    with db.open("r+b") as f:
        f.truncate(db.stat().st_size // 3)


def _flip_mid_file(db: Path) -> None:
    """64 random bytes in the middle of the file: inside a data block of a table (past the header and the
    metadata, which DuckDB reads on open)."""
    size = db.stat().st_size
    with db.open("r+b") as f:
        f.seek(size // 2)
        f.write(os.urandom(64))


def _remedy(text: str, data: Path) -> None:
    assert "is damaged" in text, text
    assert "restore" in text and str(data / "backups") in text, text  # the backups serve keeps
    assert "grebench snapshot import" in text and str(data / "snapshots") in text, text  # or the snapshots


@pytest.mark.parametrize("damage", [_truncate, _flip_mid_file], ids=["truncated", "bytes-flipped"])
def test_check_and_every_reader_say_the_store_is_damaged_with_the_remedy(published: Path, damage: object) -> None:
    healthy = _cli(published, "stats", "--json")
    assert healthy.exit_code == 0, healthy.output
    counts = json.loads(healthy.stdout)["tables"]
    assert _cli(published, "check").exit_code == 0
    damage(published / "grebench.duckdb")  # type: ignore[operator]

    checked = _cli(published, "check")
    assert checked.exit_code == 1, checked.output
    assert "DAMAGED" in checked.stdout
    _remedy(checked.stderr, published)

    stats = _cli(published, "stats", "--json")
    assert stats.exit_code == 1, stats.output  # not rc 0
    _remedy(stats.stderr, published)
    shown = json.loads(stats.stdout)
    assert shown["damaged"] and shown["tables"] == counts  # the published export, whole

    board = _cli(published, "leaderboard")
    assert board.exit_code == 1 and "is damaged" in board.stderr, board.output
    assert "showing the last published state" in board.stderr

    out = published.parent / "copy"
    export = _cli(published, "export", "--out", str(out))
    assert export.exit_code == 1 and "is damaged" in export.stderr, export.output
    assert (out / "papers.parquet").is_file()  # the published export, copied

    score = _cli(published, "score")  # a writer: refused with the remedy, nothing written
    assert score.exit_code == 1, score.output
    _remedy(score.output, published)

    (published / "grebench.duckdb.damaged").unlink()  # as a fresh start would find it: serve's own check says it
    serve = _cli(published, "serve", "--once", "--job", "site")
    assert serve.exit_code == 1, serve.output
    _remedy(serve.output, published)
    assert "site:" not in serve.stdout  # no job ran on the damaged store


def test_the_service_check_keeps_a_backup_that_the_remedy_names(published: Path) -> None:
    from grebench.scheduler import SchedulerService

    settings = load_settings(env={**FAST_ENV, "GREBENCH_DATA_DIR": str(published), "GREBENCH_BACKUP_KEEP": "2"})
    service = SchedulerService(settings, kinds=["site"], checks=True)
    try:
        for _ in range(3):
            report = service.check_store()
            assert report.ok, report.problems
        row = next(r for r in service.states() if r["job_id"] == "check")
        # the backup never opened the store's file in this process: the writer's lock still holds
        probe = subprocess.run([sys.executable, "-c", "import duckdb, sys; duckdb.connect(sys.argv[1], read_only=True)",
                                str(published / "grebench.duckdb")], capture_output=True, text=True, timeout=120)
        assert probe.returncode != 0 and "lock" in probe.stderr.lower(), probe.stderr[-500:]
    finally:
        service.close()
    assert (row["status"], row["runs"]) == ("ok", 3)
    kept = sorted((published / "backups").glob("grebench-*.duckdb"))
    assert 1 <= len(kept) <= 2  # the oldest beyond backup_keep removed (two in one second share a name)
    _flip_mid_file(published / "grebench.duckdb")
    checked = _cli(published, "check")
    assert checked.exit_code == 1
    assert str(kept[-1]) in checked.stderr  # "cp <the newest backup> <the store>"
    restored = open_store(kept[-1], read_only=True)  # the backup itself is whole
    try:
        assert check_connection(restored.con, kept[-1]).ok
    finally:
        restored.con.close()


def test_check_finds_rows_the_last_board_version_stands_on_missing(store: Store) -> None:
    from tests.bench.conftest import tiny_papers

    paper = tiny_papers()[0]
    store.upsert_paper(paper)
    basis = {"papers": {paper.venue_id: [paper.paper_id, "p-lost"]}, "references": {}}
    store.con.execute("INSERT INTO board_versions (version_id, published_at, content_sha256, previous_id, "
                      "leaderboard_json, basis_json, changes_json, page_html) VALUES ('v1', now(), 'x', NULL, '{}', "
                      "?, '{}', '')", [json.dumps(basis)])
    report = check_connection(store.con, ":memory:")
    assert not report.ok and not report.damaged
    assert any("papers: 1 of the 2 rows the last board version (v1)" in p for p in report.problems), report.problems

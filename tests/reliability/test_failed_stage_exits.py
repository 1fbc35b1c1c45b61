"""A failed stage is the command's outcome (issue 64, item 1): on a full disk at any stage, the command exits 1 with
one line naming the file and the cause, the run is recorded failed, no board version is published for it, and no
half-built folder is left behind.

Before: ``grebench score`` printed "scored 0 pairs" and exited 0 while its boards stage had failed on the WAL; a
failed run had already recorded a board version; ``[site] OSError: [Errno 28] Error writing bytes to file`` named
no file; a 2.5 MB ``site.building`` stayed until the next build.

A full disk is made two ways.  At each stage's own write point (ingest, bench, score, boards, the site's pages, the
app's export) the write raises what a full disk raises there (DuckDB's ``IOException`` naming the WAL, Python's
``OSError`` without a file name, pyarrow's ``OSError(28, "Error writing bytes to file...")``): deterministic and
run everywhere.  And a real one: a small tmpfs as the site folder (needs ``mount``; skipped with the reason
otherwise; ``test_disk_full.py`` fills a tmpfs data dir during the main job).
"""

from __future__ import annotations

import errno
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from click.testing import CliRunner, Result

from grebench.cli import main
from grebench.store import Store, open_store
from tests.conftest import FAST_ENV
from tests.reliability.conftest import tmpfs, write_small_archive

PAPERS = 5


def _cli(data: Path, *args: str) -> Result:
    return CliRunner().invoke(main, ["--data-dir", str(data), *args],
                              env={**FAST_ENV, "GREBENCH_CONFIG": None, "GREBENCH_BOOTSTRAP_SAMPLES": "50",
                                   "GREBENCH_EXAM_PAIRS": "6"})


def _wal_full(data: Path) -> duckdb.IOException:
    """What DuckDB raises when the WAL cannot grow."""
    return duckdb.IOException(f'IO Error: Could not write file "{data / "grebench.duckdb.wal"}": '
                              "No space left on device")


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Data dirs of a small archive: ``benched`` (ingested, bench run) and ``scored`` (scored, boards stored, no
    site built yet), and the archive itself."""
    root = tmp_path_factory.mktemp("stages")
    archive = write_small_archive(root / "small.jsonl", PAPERS)
    benched = root / "benched"
    for args in (["ingest", "--source", f"archive:{archive}"], ["bench"]):
        done = _cli(benched, *args)
        assert done.exit_code == 0, done.output
    scored = root / "scored"
    shutil.copytree(benched, scored)
    done = _cli(scored, "score")
    assert done.exit_code == 0, done.output
    return {"benched": benched, "scored": scored, "archive": archive}


def _copy(stores: dict[str, Path], which: str, tmp_path: Path) -> Path:
    data = tmp_path / "data"
    shutil.copytree(stores[which], data)
    return data


def _state(data: Path) -> dict[str, Any]:
    store = open_store(data / "grebench.duckdb", read_only=True)
    try:
        last = store.rows("SELECT run_id, command, status FROM runs ORDER BY started_at DESC LIMIT 1")[0]
        return {"status": last["status"], "failures": store.run_failures(last["run_id"]),
                "versions": store.scalar("SELECT count(*) FROM board_versions"),
                "boards": store.scalar("SELECT count(*) FROM boards")}
    finally:
        store.close()


def _failed(result: Result, *needles: str) -> None:
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    for needle in needles:
        assert needle in result.output, result.output


@pytest.fixture
def full_at(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """``full_at(table, error)``: inserting rows into ``table`` raises ``error`` (a full disk at that write)."""
    real = Store.insert_rows

    def install(table: str, error: BaseException) -> None:
        def insert_rows(self: Store, name: str, columns: Any, rows: Any) -> int:
            if name == table:
                raise error
            return real(self, name, columns, rows)

        monkeypatch.setattr(Store, "insert_rows", insert_rows)

    yield install


def test_ingest_on_a_full_disk_exits_1_naming_the_wal(stores: dict[str, Path], tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"

    def upsert_papers(self: Store, papers: Any) -> Any:
        raise _wal_full(data)

    monkeypatch.setattr(Store, "upsert_papers", upsert_papers)
    result = _cli(data, "ingest", "--source", f"archive:{stores['archive']}")
    _failed(result, f"no space left on device writing {data / 'grebench.duckdb.wal'}")
    state = _state(data)
    assert state["status"] == "failed" and state["versions"] == 0


def test_bench_on_a_full_disk_exits_1(stores: dict[str, Path], tmp_path: Path, full_at: Any) -> None:
    data = _copy(stores, "benched", tmp_path)
    store = open_store(data / "grebench.duckdb")
    store.con.execute("DELETE FROM generations")  # the bench has something to write
    store.close()
    full_at("generations", _wal_full(data))
    result = _cli(data, "bench")
    _failed(result, "no space left on device writing", "grebench.duckdb.wal")
    assert _state(data)["status"] == "failed"


def test_score_on_a_full_disk_exits_1_and_its_boards_are_skipped(stores: dict[str, Path], tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    data = _copy(stores, "benched", tmp_path)

    def write_scores(*_: Any) -> None:
        raise _wal_full(data)

    monkeypatch.setattr("grebench.scoring._engine._write_scores", write_scores)
    result = _cli(data, "score")
    _failed(result, f"no space left on device writing {data / 'grebench.duckdb.wal'}")
    state = _state(data)
    assert state["status"] == "failed" and state["boards"] == 0 and state["versions"] == 0
    assert [f["stage"] for f in state["failures"]] == ["score"]


def test_boards_on_a_full_disk_fail_the_score_command(stores: dict[str, Path], tmp_path: Path, full_at: Any) -> None:
    """The issue's case: the score stage is fine, the boards stage cannot write; it printed its usual line and
    exited 0.  Now its line is followed by the boards' error and exit status 1."""
    data = _copy(stores, "benched", tmp_path)
    full_at("boards", _wal_full(data))
    result = _cli(data, "score")
    _failed(result, "scored ", f"Error: [boards] no space left on device writing {data / 'grebench.duckdb.wal'}")
    state = _state(data)
    assert state["status"] == "failed" and state["boards"] == 0 and state["versions"] == 0
    assert [f["stage"] for f in state["failures"]] == ["boards"]
    as_json = _cli(data, "score", "--json")
    assert as_json.exit_code == 1 and '"status": "failed"' in as_json.output


def test_site_pages_on_a_full_disk_leave_nothing_and_publish_no_version(stores: dict[str, Path], tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from grebench.site import _build

    data = _copy(stores, "scored", tmp_path)
    real = _build._Writer.page
    written: list[str] = []

    def page(self: Any, name: str, *args: Any, **kwargs: Any) -> Any:
        if len(written) >= 3:  # a few pages in: the folder holds a half-built site
            raise OSError(errno.ENOSPC, "No space left on device")  # what write_text raises: no file name
        written.append(name)
        return real(self, name, *args, **kwargs)

    monkeypatch.setattr(_build._Writer, "page", page)
    result = _cli(data, "site", "build")
    _failed(result, f"no space left on device writing {data / 'site.building'}")
    assert not (data / "site.building").exists() and not (data / "site").exists()
    state = _state(data)
    assert state["status"] == "failed" and state["versions"] == 0  # the version is rolled back with the build

    monkeypatch.setattr(_build._Writer, "page", real)  # space freed: the next build publishes it
    again = _cli(data, "site", "build")
    assert again.exit_code == 0, again.output
    assert _state(data)["versions"] == 1 and (data / "site" / "index.html").is_file()


def test_the_export_on_a_full_disk_names_its_file_and_keeps_the_previous_site(
        stores: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pyarrow.parquet as pq

    data = _copy(stores, "scored", tmp_path)
    assert _cli(data, "site", "build").exit_code == 0
    before = (data / "site" / "index.html").read_bytes()
    exported = sorted(p.name for p in (data / "export").iterdir())
    store = open_store(data / "grebench.duckdb")  # the boards change: the next build would publish a new version
    store.con.execute("UPDATE board_rows SET score = score + 1")
    store.close()

    def write_table(table: Any, where: Any, *args: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, "Error writing bytes to file. Detail: [errno 28] No space left on device")

    monkeypatch.setattr(pq, "write_table", write_table)
    result = _cli(data, "site", "build", "--force")
    _failed(result, "no space left on device writing", f"{data / 'export'}/", ".parquet.tmp")
    assert (data / "site" / "index.html").read_bytes() == before  # the previous site, whole
    assert sorted(p.name for p in (data / "export").iterdir()) == exported  # no .tmp left, none replaced
    assert not list(data.glob("site.*"))
    state = _state(data)
    assert state["status"] == "failed" and state["versions"] == 1


def test_a_failed_main_job_publishes_no_board_version(stores: dict[str, Path], tmp_path: Path, full_at: Any) -> None:
    """The main job goes on after a failed stage (later stages work on what is stored), but its site stage
    publishes no version: a run that failed is not a board."""
    data = tmp_path / "data"
    full_at("boards", _wal_full(data))
    result = _cli(data, "run", "--source", f"archive:{stores['archive']}")
    _failed(result, "failed: [boards] no space left on device writing", "no new board version: this run failed at")
    state = _state(data)
    assert state["status"] == "failed" and state["versions"] == 0
    assert (data / "site" / "index.html").is_file()  # the site is still built, from what is stored


@pytest.fixture
def tiny_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 256 KiB tmpfs on tmp_path/full (unmounted afterwards)."""
    with tmpfs(tmp_path / "full", "256k", "real full disk") as mount:
        yield mount


def test_a_site_folder_on_a_real_full_disk(stores: dict[str, Path], tmp_path: Path, tiny_tmpfs: Path) -> None:
    data = _copy(stores, "scored", tmp_path)
    result = _cli(data, "site", "build", "--out", str(tiny_tmpfs / "site"))
    _failed(result, f"no space left on device writing {tiny_tmpfs / 'site.building'}")
    assert list(tiny_tmpfs.iterdir()) == []  # nothing left on the full disk
    state = _state(data)
    assert state["status"] == "failed" and state["versions"] == 0
    assert json.loads(json.dumps(state["failures"], default=str))[0]["stage"] == "site"

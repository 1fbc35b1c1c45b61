"""The store: migrations recorded once, backups before upgrades, review versions, exports for readers."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from grebench.store import PaperRecord, ReviewRecord, Store, _migrate, open_store


def _paper(text: str = "Good paper.", judgments: list[str] | None = None) -> PaperRecord:
    review = ReviewRecord(review_id="r1", paper_id="p1", kind="official_review", text=text,
                          sections=[("Review", text)], content={"review": text}, judgments=judgments)
    return PaperRecord(paper_id="p1", venue_id="V.cc/2024/Conference", title="T", source="test", reviews=[review])


def test_migrations_are_recorded_and_run_once(tmp_path: Path) -> None:
    path = tmp_path / "g.duckdb"
    store = open_store(path)
    numbers = [r["number"] for r in store.rows("SELECT number FROM migrations ORDER BY number")]
    assert numbers == [m.number for m in _migrate.all_migrations()]
    assert numbers[0] == 1
    store.close()
    again = open_store(path)  # reopening applies nothing new and keeps data
    assert again.scalar("SELECT count(*) FROM migrations") == len(numbers)
    again.close()


def test_backup_is_made_before_a_pending_migration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "g.duckdb"
    open_store(path).close()
    extra = _migrate.Migration(9999, "test_extra", lambda con: con.execute("CREATE TABLE extra (x INTEGER)"))
    real = _migrate.all_migrations()
    monkeypatch.setattr(_migrate, "all_migrations", lambda: [*real, extra])
    store = open_store(path)
    assert store.scalar("SELECT count(*) FROM extra") == 0
    store.close()
    backups = list(tmp_path.glob("g.duckdb.bak-*"))
    assert len(backups) == 1
    con = duckdb.connect(str(backups[0]), read_only=True)
    assert con.execute("SELECT max(number) FROM migrations").fetchone()[0] == real[-1].number
    con.close()


def test_failed_migration_rolls_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "g.duckdb"
    open_store(path).close()

    def broken(con: duckdb.DuckDBPyConnection) -> None:
        con.execute("CREATE TABLE half (x INTEGER)")
        raise RuntimeError("boom")

    real = _migrate.all_migrations()
    monkeypatch.setattr(_migrate, "all_migrations", lambda: [*real, _migrate.Migration(9998, "broken", broken)])
    with pytest.raises(RuntimeError, match="boom"):
        open_store(path)
    monkeypatch.setattr(_migrate, "all_migrations", lambda: real)
    store = open_store(path)
    assert "half" not in store.counts()
    assert store.scalar("SELECT count(*) FROM migrations WHERE number = 9998") == 0
    store.close()


def test_changed_review_is_a_new_version_never_an_overwrite(store: Store) -> None:
    with store.transaction():
        first = store.upsert_paper(_paper("Good paper."))
    with store.transaction():
        same = store.upsert_paper(_paper("Good paper."))
    with store.transaction():
        edited = store.upsert_paper(_paper("Good paper. After rebuttal: raised my score."))
    assert (first.paper_added, first.reviews_added, first.versions_added) == (True, 1, 1)
    assert (same.paper_added, same.reviews_added, same.versions_added) == (False, 0, 0)
    assert (edited.reviews_added, edited.versions_added) == (0, 1)
    versions = store.rows("SELECT version, text FROM review_versions WHERE review_id = 'r1' ORDER BY version")
    assert [v["version"] for v in versions] == [1, 2]
    assert versions[0]["text"] == "Good paper."
    assert store.scalar("SELECT latest_version FROM reviews WHERE review_id = 'r1'") == 2
    # imported judgments are part of a version too
    with store.transaction():
        judged = store.upsert_paper(
            _paper("Good paper. After rebuttal: raised my score.", ["The reviewer appreciates x"]))
    assert judged.versions_added == 1


def test_transaction_rolls_back_a_half_written_paper(store: Store) -> None:
    with pytest.raises(RuntimeError), store.transaction():
        store.upsert_paper(_paper())
        raise RuntimeError("crash between writes")
    assert store.scalar("SELECT count(*) FROM papers") == 0
    assert store.scalar("SELECT count(*) FROM review_versions") == 0


def test_runs_record_failures_and_status(store: Store) -> None:
    ok = store.start_run("ingest", {"source": "x"})
    assert store.finish_run(ok, {"n": 1}) == "ok"
    bad = store.start_run("ingest", {})
    store.record_failure(bad, "ingest", "line 3", "invalid JSON")
    assert store.finish_run(bad, {}) == "failed"
    assert store.run_failures(bad) == [{"stage": "ingest", "item": "line 3", "reason": "invalid JSON"}]
    assert json.loads(store.scalar("SELECT summary_json FROM runs WHERE run_id = ?", [ok])) == {"n": 1}


def test_readers_get_parquet_exports_and_read_only_copies(tmp_path: Path) -> None:
    store = open_store(tmp_path / "g.duckdb")
    with store.transaction():
        store.upsert_paper(_paper())
    written = store.export_parquet(tmp_path / "export")
    copy = store.copy_to(tmp_path / "reader.duckdb")
    # the writer is still open: readers use the exports and the copy, never the live file
    assert duckdb.sql(f"SELECT count(*) FROM '{written['papers']}'").fetchone()[0] == 1
    reader = open_store(copy, read_only=True)
    assert reader.scalar("SELECT title FROM papers") == "T"
    with pytest.raises(duckdb.Error):
        reader.con.execute("DELETE FROM papers")
    reader.con.close()
    store.close()


def test_upsert_papers_in_one_batch_equals_one_by_one() -> None:
    def paper(pid: str, text: str, title: str = "T") -> PaperRecord:
        review = ReviewRecord(f"{pid}-r", pid, "official_review", text, [("Review", text)], {"review": text})
        return PaperRecord(pid, "V/2024", title, "test", reviews=[review])

    items = [paper("a", "one"), paper("b", "x"), paper("a", "two", "T2"), paper("b", "x")]
    batch, single = open_store(None), open_store(None)
    with batch.transaction():
        writes = batch.upsert_papers(items)
    one_by_one = []
    for item in items:
        with single.transaction():
            one_by_one.append(single.upsert_paper(item))
    assert writes == one_by_one
    assert [(w.paper_added, w.paper_updated, w.versions_added) for w in writes] == [
        (True, False, 1), (True, False, 1), (False, True, 1), (False, False, 0)]
    for sql in ("SELECT paper_id, title, content_sha256 FROM papers ORDER BY 1",
                "SELECT review_id, latest_version FROM reviews ORDER BY 1",
                "SELECT review_id, version, text FROM review_versions ORDER BY 1, 2"):
        assert batch.con.execute(sql).fetchall() == single.con.execute(sql).fetchall()


def test_rows_of_boards_stored_before_roles_get_the_role_their_kind_had(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "g.duckdb"
    real = _migrate.all_migrations()
    monkeypatch.setattr(_migrate, "all_migrations", lambda: [m for m in real if m.number < 16])
    open_store(path).close()
    con = duckdb.connect(str(path))
    for name, kind in [("human", "human"), ("generic", "control"), ("m1", "llm"), ("up", "imported")]:
        con.execute("INSERT INTO board_rows (board_id, candidate, kind, score, papers, pairs) "
                    "VALUES ('b', ?, ?, 1, 1, 1)", [name, kind])
    con.close()
    monkeypatch.setattr(_migrate, "all_migrations", lambda: real)
    store = open_store(path)
    roles = {r["candidate"]: r["role"] for r in store.rows("SELECT candidate, role FROM board_rows")}
    assert roles == {"human": "baseline", "generic": "reference", "m1": "contestant", "up": "contestant"}
    store.close()

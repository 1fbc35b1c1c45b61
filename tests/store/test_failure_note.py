"""A run the store could not finish keeps its reason (issue 51): a disk-full run later showed as "killed".

A full disk invalidates DuckDB's connection, so the run's row cannot be closed; the next writer used to mark it
``interrupted`` with "the process ended during this run (killed, ...)".  The writer now leaves the reason in the data
dir's failure note, made at its full size when the store opened (writing it needs no new block), and the next
writer records the run ``failed`` with that reason.
"""

from __future__ import annotations

from pathlib import Path

from grebench.store import open_store
from grebench.store._store import _LIVE_RUNS, FAILURE_NOTE_BYTES

REASON = "the store could not be written: no space left on device. Work committed before this point is kept"


def test_a_noted_failure_becomes_the_runs_reason_for_the_next_writer(tmp_path: Path) -> None:
    db = tmp_path / "grebench.duckdb"
    store = open_store(db)
    note = db.with_name(db.name + ".failure")
    assert note.stat().st_size == FAILURE_NOTE_BYTES  # reserved while there is room
    failed, killed = store.start_run("run", {}), store.start_run("ingest", {})
    store.checkpoint()
    del _LIVE_RUNS[killed]  # a run of another process that died without a word
    store.note_failure(REASON)
    assert note.stat().st_size == FAILURE_NOTE_BYTES  # written in place, never grown
    store.con.close()  # the invalidated connection: nothing more is written through it
    del _LIVE_RUNS[failed]

    again = open_store(db)
    try:
        runs = {r["run_id"]: r for r in again.rows("SELECT run_id, status, summary_json FROM runs")}
        assert runs[failed]["status"] == "failed" and "no space left on device" in runs[failed]["summary_json"]
        assert [f["reason"] for f in again.run_failures(failed)] == [REASON]
        assert runs[killed]["status"] == "interrupted" and "killed" in runs[killed]["summary_json"]
    finally:
        again.close()
    reopened = open_store(db)  # the note was cleared once read: nothing is marked twice
    try:
        assert len(reopened.run_failures(failed)) == 1
    finally:
        reopened.close()

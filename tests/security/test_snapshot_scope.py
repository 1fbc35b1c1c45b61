"""A snapshot speaks only of its own venue-year, and its paper sample is never this store's (issue 34 review).

A snapshot is hostile input.  Import used to add any row it held beside the store's own: a ``paper_samples`` row
for another paper enlarged the sample that ``validate``, ``exam``, ``judge`` and the boards say this store's
numbers were made on, and a ``scores`` or ``baseline_splits`` row naming a paper of another venue-year added to
what the store says about a paper it ingested itself.  Each test edits a real exported snapshot as an attacker
would (members rewritten, manifest rehashed: the manifest is theirs) and imports it into the live store.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from grebench.pipeline._sample import draw_sample, recorded_sample
from grebench.scoring import compute_boards
from grebench.settings import load_settings
from grebench.store import Store
from grebench.store._snapshot import SnapshotError, export_snapshot, import_snapshot
from tests.conftest import FAST_ENV
from tests.security.test_snapshot_attacks import VENUE, _rehash
from tests.store.test_snapshot import scored  # noqa: F401  (fixture)

OTHER = "Other.cc/2020/Conference"


def _edit(snap: Path, table: str, change: dict[str, object]) -> None:
    """Append to a member a copy of its first row with ``change`` applied."""
    path = snap / f"{table}.parquet"
    rows = pq.read_table(path).to_pylist()
    rows.append({**rows[0], **change})
    pq.write_table(pa.Table.from_pylist(rows, schema=pq.read_schema(path)), path)


def _counts(store: Store) -> dict[str, int]:
    return {t: int(store.scalar(f"SELECT count(*) FROM {t}")) for t in
            ("papers", "scores", "baseline_splits", "paper_samples", "reviews", "board_rows")}


@pytest.fixture
def sampled(scored: Store, tmp_path: Path) -> Store:  # noqa: F811
    """The scored store with a recorded two-paper sample, its boards computed on it, and a paper of another
    venue-year it ingested itself."""
    draw_sample(scored, 2, seed=7)
    scored.con.execute("CREATE TEMP TABLE other AS SELECT * FROM papers LIMIT 1")
    scored.con.execute("UPDATE other SET paper_id = 'other0', venue_id = ?, venue = 'Other 2020'", [OTHER])
    scored.con.execute("INSERT INTO papers SELECT * FROM other")
    settings = load_settings(env={**FAST_ENV, "GREBENCH_DATA_DIR": str(tmp_path / "src"),
                                  "GREBENCH_BOOTSTRAP_SAMPLES": "50"})
    compute_boards(scored, settings)
    return scored


def test_an_imported_sample_never_becomes_this_stores_sample(sampled: Store, tmp_path: Path) -> None:
    before = recorded_sample(sampled)
    boards = sampled.rows("SELECT board_id, sample_json, papers FROM boards ORDER BY ALL")
    assert before.paper_ids is not None and len(before.paper_ids) == 2
    export_snapshot(sampled, VENUE, tmp_path / "snap")
    outside = sampled.scalar("SELECT min(paper_id) FROM papers WHERE venue_id = ? AND paper_id NOT IN "
                             "(SELECT paper_id FROM paper_samples)", [VENUE])
    _edit(tmp_path / "snap", "paper_samples", {"paper_id": outside})  # the attacker's bigger sample
    _rehash(tmp_path / "snap")
    report = import_snapshot(sampled, tmp_path / "snap")
    assert report["rows_added"]["paper_samples"] == 3  # kept for the record, as the snapshot's
    assert recorded_sample(sampled) == before  # what validate, exam and judge read
    settings = load_settings(env={**FAST_ENV, "GREBENCH_DATA_DIR": str(tmp_path / "src"),
                                  "GREBENCH_BOOTSTRAP_SAMPLES": "50"})
    compute_boards(sampled, settings)
    assert sampled.rows("SELECT board_id, sample_json, papers FROM boards ORDER BY ALL") == boards
    assert draw_sample(sampled, 2, seed=7).paper_ids == before.paper_ids  # the next job redraws its own only
    assert sampled.scalar("SELECT count(*) FROM paper_samples WHERE origin = 'snapshot'") == 3


@pytest.mark.parametrize(("table", "change"), [
    ("scores", {"paper_id": "other0"}),            # a score for another venue's paper
    ("baseline_splits", {"paper_id": "other0"}),   # which of its reviews is held out
    ("papers", {"paper_id": "planted", "venue_id": OTHER}),  # a paper of another venue-year
    ("paper_samples", {"paper_id": "other0", "venue_id": OTHER}),
    ("review_versions", {"review_id": "not-in-this-snapshot"}),
])
def test_rows_about_anything_but_the_snapshots_own_venue_year_are_refused(
        sampled: Store, tmp_path: Path, table: str, change: dict[str, object]) -> None:
    export_snapshot(sampled, VENUE, tmp_path / "snap")
    _edit(tmp_path / "snap", table, change)
    _rehash(tmp_path / "snap")
    before = _counts(sampled)
    with pytest.raises(SnapshotError, match="not this snapshot's own") as caught:
        import_snapshot(sampled, tmp_path / "snap")
    assert "nothing imported" in str(caught.value) and f"{table}.parquet" in str(caught.value)
    assert _counts(sampled) == before


def test_an_honest_snapshot_still_imports_whole(sampled: Store, tmp_path: Path) -> None:
    manifest = export_snapshot(sampled, VENUE, tmp_path / "snap")
    from grebench.store import open_store

    fresh = open_store(tmp_path / "fresh.duckdb")
    try:
        report = import_snapshot(fresh, tmp_path / "snap")
        assert all(report["rows_added"][name.removesuffix(".parquet")] == info["rows"]
                   for name, info in manifest["files"].items())
    finally:
        fresh.close()

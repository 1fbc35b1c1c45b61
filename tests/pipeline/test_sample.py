"""The main job's paper sample: drawn on a fresh store too, seeded, stratified, and what every stage works on."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from grebench.ingest._archive import bundled_path
from grebench.settings import Settings
from tests.conftest import FAST_ENV


def _cli(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GREBENCH_")}
    env.update(FAST_ENV, GREBENCH_DATA_DIR=str(data))
    return subprocess.run([sys.executable, "-m", "grebench.cli", *args], env=env, capture_output=True, text=True,
                          timeout=600)


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    with bundled_path().open(encoding="utf-8") as src:
        lines = [next(src) for _ in range(30)]
    path = tmp_path_factory.mktemp("archive") / "thirty.jsonl"
    path.write_text("".join(lines), encoding="utf-8")
    return path


@pytest.mark.slow
def test_a_fresh_store_benches_only_the_sample(tmp_path: Path, archive: Path) -> None:
    data = tmp_path / "data"
    assert _cli(data, "ingest", "--source", f"archive:{archive}", "--json").returncode == 0
    out = _cli(data, "bench", "--papers", "6", "--json")  # the first bench on this store: no splits existed yet
    assert out.returncode == 0, out.stderr[-2000:]
    con = duckdb.connect(str(data / "grebench.duckdb"), read_only=True)
    try:
        per_candidate = dict(con.execute("SELECT candidate, count(DISTINCT paper_id) FROM generations "
                                         "GROUP BY candidate").fetchall())
        sample = con.execute("SELECT paper_id FROM paper_samples ORDER BY paper_id").fetchall()
        eligible = con.execute("SELECT count(*) FROM baseline_splits").fetchone()[0]
    finally:
        con.close()
    assert eligible > 6
    assert per_candidate["human"] == 6 and set(per_candidate.values()) == {6}, per_candidate
    assert len(sample) == 6

    again = tmp_path / "again"  # the same seed and data choose the same papers on another store
    assert _cli(again, "ingest", "--source", f"archive:{archive}", "--json").returncode == 0
    assert _cli(again, "bench", "--papers", "6", "--json").returncode == 0
    con = duckdb.connect(str(again / "grebench.duckdb"), read_only=True)
    try:
        assert con.execute("SELECT paper_id FROM paper_samples ORDER BY paper_id").fetchall() == sample
    finally:
        con.close()


def test_a_sample_is_kept_across_jobs_while_the_store_changes_under_it(settings: Settings) -> None:
    """A continuously updated store (the replay's edits): rating edits that move papers between terciles do not
    reshuffle the sample; a paper that is no longer eligible is replaced and the rest stay; a larger size adds papers
    to the sampled ones, a smaller one keeps a subset of them; a new seed draws afresh."""
    from grebench.ingest import resolve_source, run_ingest
    from grebench.pipeline._sample import _stratified, draw_sample
    from grebench.store import open_store

    store = open_store(None)
    try:
        run_ingest(resolve_source("bundled", settings), store, settings, store.start_run("ingest", {}), limit=60)
        first = draw_sample(store, 12, settings.seed)
        assert first.paper_ids is not None and len(first.paper_ids) == 12
        store.con.execute("UPDATE review_versions SET rating = '0' WHERE review_id IN (SELECT review_id FROM "
                          "reviews WHERE paper_id IN (SELECT unnest(?::VARCHAR[])))", [list(first.paper_ids)])

        def eligible() -> list[dict]:
            return store.rows("""SELECT p.paper_id, p.venue_id, list(v.rating) AS ratings FROM papers p
                                 JOIN reviews r ON r.paper_id = p.paper_id AND r.kind = 'official_review'
                                 LEFT JOIN review_versions v ON v.review_id = r.review_id
                                      AND v.version = r.latest_version
                                 GROUP BY ALL HAVING count(DISTINCT r.review_id) >= 3 ORDER BY p.paper_id""")

        redrawn = sorted(_stratified(eligible(), 12, settings.seed))
        assert redrawn != list(first.paper_ids)  # the edit moves the sampled papers into one tercile: a redraw differs
        assert draw_sample(store, 12, settings.seed).paper_ids == first.paper_ids

        gone = first.paper_ids[0]
        store.con.execute("UPDATE reviews SET kind = 'withdrawn_review' WHERE paper_id = ?", [gone])
        third = draw_sample(store, 12, settings.seed)
        assert third.paper_ids is not None and len(third.paper_ids) == 12 and gone not in third.paper_ids
        assert set(first.paper_ids) - {gone} <= set(third.paper_ids)

        larger = draw_sample(store, 16, settings.seed)
        assert larger.paper_ids is not None and len(larger.paper_ids) == 16
        assert set(third.paper_ids) < set(larger.paper_ids)
        smaller = draw_sample(store, 8, settings.seed)
        assert smaller.paper_ids is not None and len(smaller.paper_ids) == 8
        assert set(smaller.paper_ids) < set(larger.paper_ids)
        other_seed = draw_sample(store, 8, settings.seed + 1)
        assert other_seed.paper_ids == tuple(sorted(_stratified(eligible(), 8, settings.seed + 1)))
    finally:
        store.con.close()


def test_a_venue_that_appears_later_gets_its_share_of_a_kept_sample(settings: Settings) -> None:
    """serve polls several venues: one whose reviews become public after the sample was drawn enters it with its
    share of the size (in proportion to its eligible papers), the others keep a subset of their sampled papers."""
    from grebench.ingest import resolve_source, run_ingest
    from grebench.pipeline._sample import draw_sample
    from grebench.store import open_store

    store = open_store(None)
    try:
        run_ingest(resolve_source("bundled", settings), store, settings, store.start_run("ingest", {}), limit=60)
        later = [r["paper_id"] for r in store.rows("SELECT paper_id FROM papers ORDER BY paper_id DESC LIMIT 20")]
        store.con.execute("UPDATE papers SET venue_id = 'Later.cc/2027/Conference' WHERE paper_id IN "
                          "(SELECT unnest(?::VARCHAR[]))", [later])
        store.con.execute("UPDATE reviews SET kind = 'hidden' WHERE kind = 'official_review' AND paper_id IN "
                          "(SELECT unnest(?::VARCHAR[]))", [later])
        first = draw_sample(store, 12, settings.seed)
        assert first.paper_ids is not None and not set(first.paper_ids) & set(later)
        store.con.execute("UPDATE reviews SET kind = 'official_review' WHERE kind = 'hidden'")  # released
        second = draw_sample(store, 12, settings.seed)
        assert second.paper_ids is not None
        new = set(second.paper_ids) & set(later)
        assert 3 <= len(new) <= 5  # about 12 × 20 / 60
        assert set(second.paper_ids) - new < set(first.paper_ids)  # the first venue keeps a subset of its papers
    finally:
        store.con.close()

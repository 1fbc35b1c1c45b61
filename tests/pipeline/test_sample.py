"""The main job's paper sample: drawn on a fresh store too, seeded, stratified, and what every stage works on."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from grebench.ingest._archive import bundled_path
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

"""An ingest killed with SIGKILL half-way and started again ends with exactly the rows of an uninterrupted run.

The kill is driven by observed progress, not by time: the fake OpenReview holds one PDF download after the first
ingest batch (``BATCH`` papers, one transaction) and the test kills the process only once that download has arrived,
so the kill provably lands mid-ingest on any machine speed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from tests.conftest import FAST_ENV
from tests.fakes.openreview_server import FakeOpenReview
from tests.ingest.test_openreview import tiny_pdf
from tests.scheduler.conftest import VENUE, add_reviews, config_text

BATCH = 25  # grebench.ingest._run.BATCH: papers per transaction
PAPERS = BATCH + 7
HELD = BATCH + 3  # the PDF request that waits: the first batch is committed, the second is not

CONTENT = {
    "papers": "SELECT paper_id, title, abstract, content_sha256 FROM papers ORDER BY paper_id",
    "reviews": "SELECT review_id, paper_id, latest_version FROM reviews ORDER BY review_id",
    "review_versions": "SELECT review_id, version, content_sha256 FROM review_versions ORDER BY review_id, version",
    "paper_texts": "SELECT paper_id, pdf_ref, pdf_sha256, md5(text), status FROM paper_texts ORDER BY paper_id",
}


def _ingest(cfg: Path) -> subprocess.Popen[bytes]:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("GREBENCH_")}, **FAST_ENV}
    return subprocess.Popen([sys.executable, "-m", "grebench.cli", "--config", str(cfg), "ingest", "--source",
                             f"openreview:{VENUE}", "--json"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)


def _content(db: Path) -> dict[str, list[tuple]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        return {name: con.execute(sql).fetchall() if name in tables else [] for name, sql in CONTENT.items()}
    finally:
        con.close()


def _finish(proc: subprocess.Popen[bytes]) -> None:
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err.decode(errors="replace")[-3000:]


@pytest.mark.slow
def test_sigkill_mid_ingest_then_rerun_matches_uninterrupted(tmp_path: Path) -> None:
    with FakeOpenReview("v1") as fake:
        ids = [fake.add_paper(VENUE, title=f"Paper {i} on topic {i}", abstract=f"We study problem {i}.",
                              pdf=tiny_pdf(f"Paper {i}: method {i} improves benchmark {i}.")) for i in range(PAPERS)]
        add_reviews(fake, ids, per_paper=2)
        configs = {}
        for name in ("clean", "killed"):
            configs[name] = tmp_path / f"{name}.toml"
            configs[name].write_text(config_text(tmp_path / name, fake.url, "http://127.0.0.1:9", fetch_pdfs=True),
                                     encoding="utf-8")
        _finish(_ingest(configs["clean"]))
        expected = _content(tmp_path / "clean" / "grebench.duckdb")
        assert len(expected["papers"]) == PAPERS and len(expected["paper_texts"]) == PAPERS

        hold = fake.hold("/pdf", HELD)
        proc = _ingest(configs["killed"])
        try:
            reached = hold.reached.wait(timeout=300)  # a failure guard, not a timing assumption
            assert reached, "the ingest never reached the held download"
            assert proc.poll() is None, "the ingest ended before the kill: the test did not exercise resume"
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        finally:
            hold.release()
        db = tmp_path / "killed" / "grebench.duckdb"
        partial = _content(db)  # the file opens after a SIGKILL
        assert 0 < len(partial["papers"]) < PAPERS, f"killed with {len(partial['papers'])} papers written"
        assert len(partial["papers"]) == BATCH  # exactly the committed batch: nothing of the open one

        _finish(_ingest(configs["killed"]))
        assert _content(db) == expected

"""kill -9 in the middle of the per-line attribution (issue 64): what was answered before the kill is kept, a rerun
asks only the rest (a lost batch is at most the one in flight: :data:`grebench.scoring._engine.REQUESTS_PER_BATCH`
requests), and the numbers are the uninterrupted run's, value for value.

Before, the offline estimator's batch was 40 papers: the whole 12-paper sample's 13,592 attribution requests were
one call, cached only when it ended, so a kill lost all of them; and the progress line stayed silent until then.
The kill follows observed progress (the first attribution progress line), never the clock."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from tests.reliability.conftest import cli, cli_env, write_config, write_small_archive

ENV = {"estimator": "offline", "local_candidates": "", "local_judges": "", "attribution": "leave-one-out"}


def _rows(db: Path, query: str) -> list[tuple[object, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(query).fetchall()
    finally:
        con.close()


SCORES = ("SELECT metric, estimator, preprocessor, candidate, paper_id, reference_review_id, generation_id, "
          "conditional, marginal, pmi FROM scores ORDER BY ALL")
LINES = ("SELECT metric, estimator, preprocessor, candidate, paper_id, reference_review_id, generation_id, line_no, "
         "line, contribution, method FROM line_attribution ORDER BY ALL")


@pytest.fixture(scope="module")
def benched(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data dir with 20 bundled papers ingested and benched (controls and the human baseline)."""
    root = tmp_path_factory.mktemp("kill-attribution")
    config = write_config(root / "grebench.toml", root / "data", **ENV)
    archive = write_small_archive(root / "small.jsonl")
    for args in (("ingest", "--source", f"archive:{archive}"), ("bench",)):
        done = cli(config, *args)
        assert done.returncode == 0, done.stderr
    return root


def _copy(benched: Path, name: str) -> Path:
    root = benched.parent / f"{benched.name}-{name}"
    shutil.copytree(benched / "data", root / "data")
    return write_config(root / "grebench.toml", root / "data", **ENV)


def test_a_kill_during_attribution_loses_at_most_the_batch_in_flight(benched: Path) -> None:
    clean_cfg = _copy(benched, "clean")
    clean = cli(clean_cfg, "score", "--json")
    assert clean.returncode == 0, clean.stderr
    summary = json.loads(clean.stdout)
    total = summary["estimator_calls"]  # every request of the stage: the scores' and the attribution's
    scored = total - summary["attribution"]["requests"]
    assert summary["attribution"]["requests"] > 2_000  # many batches of at most 512 requests

    cfg = _copy(benched, "killed")
    proc = subprocess.Popen([sys.executable, "-m", "grebench.cli", "score"], env=cli_env(cfg),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    reported = None
    lines = []
    for line in proc.stderr:  # the first attribution progress line: some batches are cached, most are not
        lines.append(line)
        if line.lstrip().startswith("attribute") and "%" in line:
            os.kill(proc.pid, signal.SIGKILL)
            reported = int(line.split(":", 1)[1].split("/", 1)[0])
            break
    proc.wait(timeout=120)
    assert reported is not None, "no attribution progress line before the end: " + "".join(lines[-5:])
    assert proc.returncode == -signal.SIGKILL
    db = cfg.parent / "data" / "grebench.duckdb"
    cached = _rows(db, "SELECT count(*) FROM logprob_cache")[0][0]
    assert isinstance(cached, int)
    # everything the progress line reported as done was cached before it was reported
    assert cached >= scored + reported
    assert cached < total  # the kill landed before the end

    rerun = cli(cfg, "score", "--json")
    assert rerun.returncode == 0, rerun.stderr
    again = json.loads(rerun.stdout)
    # a rerun asks exactly what was not cached: no answer kept is asked again, and the work lost to the kill is
    # only the batch in flight (never more than REQUESTS_PER_BATCH requests)
    assert again["estimator_calls"] == total - cached
    clean_db = clean_cfg.parent / "data" / "grebench.duckdb"
    assert _rows(db, SCORES) == _rows(clean_db, SCORES)
    assert _rows(db, LINES) == _rows(clean_db, LINES)

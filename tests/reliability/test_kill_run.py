"""`grebench run` SIGKILLed N times in a row at seeded points spread over the run, each time restarted: the final
store equals an uninterrupted run's, and no LLM or estimator call was repeated beyond what was in flight.

N = ``GREBENCH_RELIABILITY_KILLS`` (default 4 in CI); seed = ``GREBENCH_RELIABILITY_SEED`` (default 20200426).
Kill plan: a seeded order of the stages (each once before any repeats), and for each kill a seeded number of
progress lines to see after that stage's ``[stage]`` marker: kills follow observed progress, not the clock.
Bounds asserted (c = ``bench_concurrency``, K = kills that landed in the bench stage):

* LLM: every (candidate, paper) request reaches the fake server at most 1 + K times, and all requests together
  at most P + c·K times (P = LLM generations of the clean run): a kill loses at most the c calls in flight.
* estimator: in every run that completes, ``estimator_calls`` equals the rows it added to ``logprob_cache``
  (a cached answer is never asked again), and the final cache equals the clean run's.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.fakes.openai_server import DEFAULT_REVIEW, FakeOpenAIServer
from tests.reliability._store_content import content_diff, migration_ids, store_content
from tests.reliability.conftest import cli, cli_popen, write_config

KILLS = int(os.environ.get("GREBENCH_RELIABILITY_KILLS", "4"))
SEED = int(os.environ.get("GREBENCH_RELIABILITY_SEED", "20200426"))
CONCURRENCY = 2
STAGE_LINE = re.compile(r"^\[(ingest|bench|score|boards|validate|panel|site)\]$", re.M)


def _slow_reply(_messages: list[Any]) -> str:
    time.sleep(0.05)  # a call takes long enough to be in flight at some kills
    return DEFAULT_REVIEW


def request_key(request: dict[str, Any]) -> str:
    """What identifies one (candidate, paper) call on the fake: its messages."""
    return hashlib.sha256(json.dumps(request["body"].get("messages"), sort_keys=True).encode()).hexdigest()


def cache_rows(db: Path) -> int:
    """Rows of the estimator cache (0 before the table exists)."""
    if not db.exists():
        return 0
    con = duckdb.connect(str(db), read_only=True)
    try:
        tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        return int(con.execute("SELECT count(*) FROM logprob_cache").fetchone()[0]) if "logprob_cache" in tables else 0
    finally:
        con.close()


STAGES = ("ingest", "bench", "score", "boards", "validate", "panel", "site")


def kill_plan(n: int, seed: int) -> list[tuple[str, int]]:
    """n (stage, lines) kills: seeded stages (each stage once before any repeats), and a seeded number of the
    stage's own progress lines to wait for after its ``[stage]`` marker (0: kill as the stage starts)."""
    rng = random.Random(seed)
    order: list[str] = []
    while len(order) < n:
        order += rng.sample(STAGES, len(STAGES))
    return [(stage, rng.randint(0, 4)) for stage in order[:n]]


def kill_in_stage(proc: subprocess.Popen[bytes], err: Path, stage: str, lines: int, limit_s: float = 300) -> str:
    """SIGKILL ``proc`` once it has printed ``[stage]`` and then ``lines`` more lines (or a later stage's marker,
    when the stage prints fewer): kills follow observed progress, never the clock. Returns the stage it was in
    ('finished' if the run ended first)."""
    deadline = time.monotonic() + limit_s  # a guard against a hung run, not a timing assumption
    marker = f"[{stage}]\n"
    while proc.poll() is None and time.monotonic() < deadline:
        text = err.read_text(encoding="utf-8", errors="replace")
        if marker in text:
            after = text.split(marker, 1)[1]
            if after.count("\n") >= lines or STAGE_LINE.search(after):
                break
        time.sleep(0.01)
    if proc.poll() is not None:
        return "finished"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    seen = STAGE_LINE.findall(err.read_text(encoding="utf-8", errors="replace"))
    return seen[-1] if seen else "startup"


def run_with_kills(tmp_path: Path, source: str, kills: int, seed: int) -> dict[str, Any]:
    """Clean run, then a killed-and-restarted chain; returns what the assertions and the docs need."""
    with FakeOpenAIServer(reply=_slow_reply) as llm:  # one server: api_base is part of the stored content
        clean_cfg = write_config(tmp_path / "clean.toml", tmp_path / "clean", llm.url, llm_max_retries=0,
                                 bench_concurrency=CONCURRENCY)
        started = time.monotonic()
        clean = cli(clean_cfg, "run", "--source", source, "--json")
        clean_s = time.monotonic() - started
        assert clean.returncode == 0, clean.stderr[-3000:]
        clean_summary = json.loads(clean.stdout)
        clean_requests = [request_key(r) for r in llm.chat_requests]

        cfg = write_config(tmp_path / "killed.toml", tmp_path / "killed", llm.url, llm_max_retries=0,
                           bench_concurrency=CONCURRENCY)
        db = tmp_path / "killed" / "grebench.duckdb"
        stages_hit: list[str] = []
        for i, (stage, lines) in enumerate(kill_plan(kills, seed)):
            err = tmp_path / f"kill{i}.err"
            stages_hit.append(kill_in_stage(cli_popen(cfg, "run", "--source", source, stderr=err), err, stage, lines))
            if db.exists():  # the file opens after every kill, even one during the migrations
                duckdb.connect(str(db), read_only=True).close()
        before_final = cache_rows(db)
        final = cli(cfg, "run", "--source", source, "--json")
        assert final.returncode == 0, final.stderr[-3000:]
        summary = json.loads(final.stdout)
        rerun_before = len(llm.chat_requests)
        rerun = cli(cfg, "run", "--source", source, "--json")
        assert rerun.returncode == 0, rerun.stderr[-3000:]
        return {
            "clean_db": tmp_path / "clean" / "grebench.duckdb", "db": db, "clean_s": clean_s,
            "clean_summary": clean_summary, "final_summary": summary, "rerun_summary": json.loads(rerun.stdout),
            "stages_hit": stages_hit, "cache_before_final": before_final,
            "clean_requests": clean_requests,
            "requests": [request_key(r) for r in llm.chat_requests[len(clean_requests):rerun_before]],
            "rerun_requests": len(llm.chat_requests) - rerun_before,
        }


def check(result: dict[str, Any], kills: int) -> None:
    """Every assertion of the fault-injection run (shared with the long variant)."""
    got, want = store_content(result["db"]), store_content(result["clean_db"])
    assert not content_diff(got, want), "\n".join(content_diff(got, want))
    assert migration_ids(result["db"]) == migration_ids(result["clean_db"])
    assert want["generations"]["rows"] > 0 and want["scores"]["rows"] > 0
    # LLM: the clean run asked each paper once; the killed chain at most once more per kill that hit bench
    clean_counts = Counter(result["clean_requests"])
    assert set(clean_counts.values()) == {1}
    counts = Counter(result["requests"])
    assert set(counts) == set(clean_counts), "every (candidate, paper) asked, nothing else"
    bench_kills = result["stages_hit"].count("bench")
    assert max(counts.values()) <= 1 + bench_kills
    assert sum(counts.values()) <= len(clean_counts) + CONCURRENCY * bench_kills, (counts, result["stages_hit"])
    assert result["rerun_requests"] == 0  # a completed store asks nothing again
    # estimator: each call of a completed run is a new cache row; the final cache is the clean one
    stages = result["final_summary"]["stages"]  # the score stage, and the panel scoring its exam texts
    calls = sum(int(stages.get(name, {}).get("estimator_calls", 0)) for name in ("score", "panel"))
    assert result["cache_before_final"] + calls == got["logprob_cache"]["rows"]
    assert result["rerun_summary"]["stages"]["score"]["estimator_calls"] == 0
    assert result["rerun_summary"]["stages"].get("panel", {}).get("estimator_calls", 0) == 0
    assert result["rerun_summary"]["stages"]["bench"]["calls_made"] == 0
    # the published board is the clean one (leaderboard.json without its generated_at stamp and version id)
    boards = [json.loads((db.parent / "site" / "leaderboard.json").read_text(encoding="utf-8"))
              for db in (result["db"], result["clean_db"])]
    for board in boards:
        board.pop("generated_at")
        board.pop("version")
        for row in (r for b in board["boards"] for r in b["rows"]):
            row.pop("latency_s", None)  # mean wall time of the candidate's calls: measured, not content
    assert boards[0] == boards[1] and boards[0]["boards"]
    assert len(result["stages_hit"]) == kills


@pytest.mark.slow
def test_sigkill_chain_during_run_loses_and_repeats_nothing(tmp_path: Path, small_archive: Path) -> None:
    result = run_with_kills(tmp_path, f"archive:{small_archive}", KILLS, SEED)
    print(json.dumps({"kills": KILLS, "seed": SEED, "stages_hit": result["stages_hit"],
                      "llm_requests": len(result["requests"]), "llm_pairs": len(set(result["requests"])),
                      "clean_s": round(result["clean_s"], 1)}))
    check(result, KILLS)
    # the seeded plan spreads the kills over the stages: most kills interrupted a stage
    assert len(set(result["stages_hit"]) - {"finished", "startup"}) >= min(2, KILLS)


@pytest.mark.long
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_sigkill_chain_long(tmp_path: Path, small_archive: Path, seed: int) -> None:
    kills = max(KILLS, 12)
    result = run_with_kills(tmp_path, f"archive:{small_archive}", kills, seed)
    print(json.dumps({"kills": kills, "seed": seed, "stages_hit": result["stages_hit"],
                      "llm_requests": len(result["requests"]), "llm_pairs": len(set(result["requests"]))}))
    check(result, kills)

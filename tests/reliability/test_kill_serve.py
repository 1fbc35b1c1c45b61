"""`grebench serve` killed with SIGKILL N times at seeded moments, restarted each time: nothing lost, nothing repeated.

The venue (fake OpenReview) has papers with public reviews and one LLM candidate (fake OpenAI server, slow enough
that kills land mid-job). A clean data dir gets one uninterrupted ``serve --once``; another gets the kill chain and
then the same ``serve --once``. Both must end with the same store content (see ``_store_content``), every
(candidate, paper) generation asked at most ``1 + kills`` times, and a final rerun making no call at all.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.fakes.openai_server import DEFAULT_REVIEW, FakeOpenAIServer
from tests.fakes.openreview_server import FakeOpenReview
from tests.reliability._store_content import content_diff, store_content
from tests.scheduler.conftest import add_papers, add_reviews, config_text

PAPERS = 5
KILLS = int(os.environ.get("GREBENCH_RELIABILITY_SERVE_KILLS", "3"))
SEED = int(os.environ.get("GREBENCH_RELIABILITY_SEED", "20200426"))
JOBS = ["--job", "poll", "--job", "generate", "--job", "score", "--job", "site"]


def _slow_reply(messages: list) -> str:
    time.sleep(0.3)
    return DEFAULT_REVIEW


def _paper_of(request: dict) -> str:
    body = request.get("body") or {}
    text = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
    found = re.search(r"Paper \d+ on topic \d+", text)
    return found.group(0) if found else text[-80:]


def _serve(cfg: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "grebench.cli", "--config", str(cfg), "serve", "--no-app", *JOBS, *extra]


@pytest.mark.slow
def test_serve_killed_repeatedly_ends_like_an_uninterrupted_run(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    with FakeOpenReview("v1") as openreview, FakeOpenAIServer(reply=_slow_reply) as llm:
        add_reviews(openreview, add_papers(openreview, PAPERS))
        configs = {}
        for name in ("clean", "killed"):
            configs[name] = tmp_path / f"{name}.toml"
            configs[name].write_text(config_text(
                tmp_path / name, openreview.url, llm.url, bench_concurrency=1, poll_interval_min=0.005,
                generate_interval_min=0.005, score_interval_min=0.005, site_interval_min=0.005), encoding="utf-8")

        clean = subprocess.run(_serve(configs["clean"], "--once"), capture_output=True, text=True, timeout=240)
        assert clean.returncode == 0, clean.stderr[-2000:]
        clean_calls = len(llm.chat_requests)
        assert clean_calls >= PAPERS
        want = store_content(tmp_path / "clean" / "grebench.duckdb")

        landed = 0
        for _ in range(KILLS):
            proc = subprocess.Popen(_serve(configs["killed"]), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(rng.uniform(2.0, 9.0))  # startup is ~2-4 s; jobs then run back to back
            landed += proc.poll() is None
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
        assert landed == KILLS, "serve exited before a kill: the chain did not exercise crashes"

        final = subprocess.run(_serve(configs["killed"], "--once"), capture_output=True, text=True, timeout=240)
        assert final.returncode == 0, final.stderr[-2000:]
        got = store_content(tmp_path / "killed" / "grebench.duckdb")  # opens after every SIGKILL
        assert content_diff(got, want) == []

        killed_requests = llm.chat_requests[clean_calls:]
        per_paper = Counter(_paper_of(r) for r in killed_requests)
        assert max(per_paper.values()) <= 1 + KILLS
        assert len(killed_requests) <= clean_calls + KILLS  # only calls in flight at a kill are repeated

        before = len(llm.chat_requests)
        rerun = subprocess.run(_serve(configs["killed"], "--once"), capture_output=True, text=True, timeout=240)
        assert rerun.returncode == 0 and len(llm.chat_requests) == before

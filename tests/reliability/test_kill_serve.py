"""`grebench serve` killed with SIGKILL N times at seeded moments, restarted each time: nothing lost, nothing repeated.

The venue (fake OpenReview) has papers with public reviews and one LLM candidate (fake OpenAI server). Kills follow
observed progress, never the clock: the first kill (and a seeded share of the others) while the fake holds an LLM
call open, the others right after the log says a seeded job finished. A clean data dir gets one uninterrupted
``serve --once``; another gets the kill chain and then the same ``serve --once``. Both must end with the same store
content (see ``_store_content``), every (candidate, paper) generation asked at most ``1 + kills`` times, and a final
rerun making no call at all.
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

from tests.fakes.openai_server import CallGate, FakeOpenAIServer
from tests.fakes.openreview_server import FakeOpenReview
from tests.reliability._store_content import content_diff, store_content
from tests.scheduler.conftest import add_papers, add_reviews, config_text

PAPERS = 5
KILLS = int(os.environ.get("GREBENCH_RELIABILITY_SERVE_KILLS", "3"))
SEED = int(os.environ.get("GREBENCH_RELIABILITY_SEED", "20200426"))
JOBS = ["--job", "poll", "--job", "generate", "--job", "score", "--job", "site"]


def _paper_of(request: dict) -> str:
    body = request.get("body") or {}
    text = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
    found = re.search(r"Paper \d+ on topic \d+", text)
    return found.group(0) if found else text[-80:]


def _serve(cfg: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "grebench.cli", "-v", "--config", str(cfg), "serve", "--no-app", *JOBS, *extra]


def _popen(cfg: Path, err: Path) -> subprocess.Popen[bytes]:
    with err.open("wb") as stream:
        return subprocess.Popen(_serve(cfg), stdout=subprocess.DEVNULL, stderr=stream)


def wait_for_line(proc: subprocess.Popen[bytes], err: Path, text: str, limit_s: float = 300) -> None:
    """Until ``text`` is in the process's log (the limit guards against a hung process; it is not a timing)."""
    deadline = time.monotonic() + limit_s
    while text not in err.read_text(encoding="utf-8", errors="replace"):
        assert proc.poll() is None, f"serve ended before logging {text!r}"
        assert time.monotonic() < deadline, f"serve never logged {text!r}"
        time.sleep(0.01)


@pytest.mark.slow
def test_serve_killed_repeatedly_ends_like_an_uninterrupted_run(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    gate = CallGate(paper_of=_paper_of)
    with FakeOpenReview("v1") as openreview, FakeOpenAIServer(reply=gate) as llm:
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

        gate.calls = 0  # the kill chain counts its own calls
        gate.done.clear()
        landed, held = 0, 0
        for i in range(KILLS):
            err = tmp_path / f"kill{i}.err"
            pending = PAPERS - len(gate.done)
            # kills follow observed progress: the first (and a seeded share of the rest) while an LLM call is
            # provably in flight; the others right after a seeded job has finished (the next job is mid-way)
            if i == 0 or (pending >= 2 and rng.random() < 0.5):
                gate.arm(gate.calls + rng.randint(1, min(2, pending)))
                proc = _popen(configs["killed"], err)
                assert gate.reached.wait(timeout=300), "serve never made the held LLM call"
                held += 1
            else:
                proc = _popen(configs["killed"], err)
                wait_for_line(proc, err, f"job {rng.choice(['poll', 'generate', 'score'])} finished")
            landed += proc.poll() is None
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            gate.released.set()
        assert landed == KILLS, "serve exited before a kill: the chain did not exercise crashes"
        assert held >= 1

        final = subprocess.run(_serve(configs["killed"], "--once"), capture_output=True, text=True, timeout=240)
        assert final.returncode == 0, final.stderr[-2000:]
        got = store_content(tmp_path / "killed" / "grebench.duckdb")  # opens after every SIGKILL
        assert content_diff(got, want) == []

        killed_requests = llm.chat_requests[clean_calls:]
        per_paper = Counter(_paper_of(r) for r in killed_requests)
        assert max(per_paper.values()) <= 1 + KILLS
        # only calls in flight at a kill are repeated: the generate and the score job (APScheduler runs them in
        # parallel threads) may each have bench_concurrency = 1 call in flight
        assert len(killed_requests) <= clean_calls + 2 * KILLS

        before = len(llm.chat_requests)
        rerun = subprocess.run(_serve(configs["killed"], "--once"), capture_output=True, text=True, timeout=240)
        assert rerun.returncode == 0 and len(llm.chat_requests) == before

"""How long one hanging submitted endpoint holds the scheduler's worker, under the submission budgets.

Usage: PYTHONPATH=. .venv/bin/python benchmarks/submission_budget.py [--timeout 2] [--papers 5]

Loopback only: a fake OpenAI-compatible endpoint that accepts the connection and never answers (``hang``), the tiny
test papers in an in-memory store, and the submissions stage's own loop (``_generate_within_budget``) with the
default settings except ``llm_timeout_s`` (the operator's deadline; the submission's is the smaller of it and
``submission_call_timeout_s``).  Prints the seconds until the submission is stopped and why, as one JSON line.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from datetime import date

from grebench.bench import Candidate
from grebench.settings import load_settings
from grebench.store import open_store
from grebench.submissions import _evaluate
from tests.bench.conftest import tiny_papers
from tests.fakes.openai_server import FakeOpenAIServer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=2.0, help="llm_timeout_s (seconds)")
    parser.add_argument("--papers", type=int, default=5, help="papers to generate for (at most 5)")
    args = parser.parse_args()
    settings = load_settings(None, env={"GREBENCH_DATA_DIR": tempfile.mkdtemp()}).replace(llm_timeout_s=args.timeout)
    store = open_store(None)
    with store.transaction():
        for paper in tiny_papers():
            store.upsert_paper(paper)
    with FakeOpenAIServer(mode="hang") as server:
        candidate = Candidate(name="Hanging", kind="llm", model="openai/fake-model", api_base=server.url,
                              cutoff=date(2000, 1, 1),
                              params={"temperature": 0, "max_tokens": 64, "context_tokens": 8192})
        started = time.monotonic()
        summary = _evaluate._generate_within_budget(store, settings, "bench", candidate,
                                                    [f"paper{i}" for i in range(min(args.papers, 5))],
                                                    _evaluate.NoProgress())
        elapsed = time.monotonic() - started
    print(json.dumps({"seconds": round(elapsed, 1), "stopped": summary.get("stopped"),
                      "failed": summary["failed"], "bench_concurrency": settings.bench_concurrency}))


if __name__ == "__main__":
    main()

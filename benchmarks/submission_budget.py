"""How long an honest submission waits behind hostile ones in one queue pass, before and after turns (issue 31 §5).

Usage: PYTHONPATH=. .venv/bin/python benchmarks/submission_budget.py [--hanging 2] [--slow 1] [--papers 24]
       [--real-deadline S]

Loopback only: fake OpenAI-compatible endpoints on 127.0.0.1, queued hostile ones first -- ``--hanging`` of them
hang on 3 prompts of every 4 and answer the 4th, ``--slow`` of them answer every prompt in 110 s (just under the
120 s call deadline) -- then one honest endpoint that answers in 30 s; ``--papers`` made-up papers with baseline
splits in an in-memory store; and the queue job's own evaluation (:func:`grebench.submissions.evaluate_queued`:
turns, budgets, the store, litellm calls over HTTP), run twice on fresh stores:

- **before**: one submission after another, each to completion, as the queue job did before issue 31 -- the same
  code with settings that reproduce that policy: one turn as long as the wall budget (``submission_slice_s`` =
  ``submission_max_wall_s`` = 3600 s) and no failure-rate rule (``submission_max_failure_rate`` = 0.95, which needs 8
  failures of 8);
- **after**: the default settings (turns of ``submission_slice_s`` = 300 s; more than 0.5 of the last 8 calls
  failed stops a submission; ``submission_max_wall_s`` = 3600 s of its own turns).

Time: by default an injected clock (the one the turns and the wall budget read) in modelled seconds: each call
charges what it would take at the defaults (a hanging prompt: 2 attempts of 120 s and a 1 s back-off, answered here
at once with an HTTP 500 so that the pass runs in seconds; a slow answer 110 s; an honest one 30 s), and the calls
of one batch run at once, so a batch costs its longest call.  ``--real-deadline S`` runs real hangs instead: the
call deadline is S real seconds standing for 120 s, every duration and the budgets' clock scaled by 120 / S (the
machine's own overhead per call is scaled too, and a loaded machine may time out honest calls under a short S).
Prints one JSON line per policy, then the two side by side.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from contextlib import ExitStack
from typing import Any

from grebench.bench import make_splits
from grebench.endpoints import KeyVault
from grebench.settings import Settings, load_settings
from grebench.store import PaperRecord, ReviewRecord, open_store
from grebench.submissions import SubmissionForm, SubmissionQueue, _evaluate, _turns, evaluate_queued
from tests.fakes.openai_server import DEFAULT_REVIEW, FakeOpenAIServer

DEFAULT_DEADLINE_S = 120.0  # submission_call_timeout_s
HANG_S = 2 * DEFAULT_DEADLINE_S + 1.0  # a hanging prompt at the defaults: 2 attempts (1 retry) and the back-off
SLOW_S = 110.0
HONEST_S = 30.0


class ModelledClock:
    """The budgets' clock in modelled seconds: each call charges how long it would take; the calls of one batch run
    at once, so a batch costs its longest call.  The turns read the clock only between batches, which commits the
    batch's cost."""

    def __init__(self) -> None:
        self.now = 0.0
        self._batch = 0.0
        self._lock = threading.Lock()

    def charge(self, seconds: float) -> None:
        with self._lock:
            self._batch = max(self._batch, seconds)

    def __call__(self) -> float:
        with self._lock:
            self.now += self._batch
            self._batch = 0.0
            return self.now


def _papers(n: int) -> list[PaperRecord]:
    out = []
    for i in range(n):
        pid = f"bench{i:03d}"
        body = f"Summary:\nThe paper studies topic {i}.\n\nWeaknesses:\nFew baselines for topic {i}."
        reviews = [ReviewRecord(review_id=f"{pid}-r{j}", paper_id=pid, kind="official_review", text=f"{body} R{j}.",
                                sections=[("Review", body)], content={"review": body}) for j in range(3)]
        out.append(PaperRecord(paper_id=pid, venue_id="Bench.cc/2019/Conference", title=f"Bench paper {i:03d}",
                               source="bench", abstract=f"We study topic {i}.", reviews=reviews))
    return out


def _three_of_four(hang: Any) -> Any:
    """``mode_of``: hang on 3 of every 4 prompts (in the order they first arrive), answer the 4th; ``hang(first)``
    says what a hanging prompt does (``first``: its first attempt)."""
    seen: dict[str, int] = {}
    lock = threading.Lock()

    def mode_of(body: dict[str, Any]) -> str:
        key = json.dumps(body.get("messages"), sort_keys=True)
        with lock:
            first = key not in seen
            index = seen.setdefault(key, len(seen))
        return hang(first) if index % 4 != 3 else "ok"

    return mode_of


def _answer_in(wait: Any) -> Any:
    def reply(messages: list[dict[str, Any]]) -> str:
        wait()
        return DEFAULT_REVIEW

    return reply


def _endpoints(kind: str, clock: ModelledClock | None, scale: float) -> FakeOpenAIServer:
    """The fake endpoint of one kind: modelled (``clock``: each call charges its cost) or real (hangs and sleeps,
    durations divided by ``scale``)."""
    if clock is not None:
        def hang(first: bool) -> str:
            if first:
                clock.charge(HANG_S)
            return "http500"

        costs = {"slow": SLOW_S, "honest": HONEST_S}
        if kind == "hanging":
            return FakeOpenAIServer(mode_of=_three_of_four(hang))
        return FakeOpenAIServer(reply=_answer_in(lambda: clock.charge(costs[kind])))
    if kind == "hanging":
        return FakeOpenAIServer(mode_of=_three_of_four(lambda first: "hang"))
    seconds = (SLOW_S if kind == "slow" else HONEST_S) / scale
    return FakeOpenAIServer(reply=_answer_in(lambda: time.sleep(seconds)))


def _settings(args: argparse.Namespace, hosts: list[str], **policy: Any) -> Settings:
    base = load_settings(None, env={"GREBENCH_DATA_DIR": tempfile.mkdtemp(), "GREBENCH_ESTIMATOR": "offline",
                                    "GREBENCH_LOCAL_CANDIDATES": "", "GREBENCH_LOCAL_JUDGES": ""})
    deadline = args.real_deadline or DEFAULT_DEADLINE_S
    return base.replace(llm_timeout_s=deadline, app_host="127.0.0.2", submission_private_allowlist="127.0.0.1/32",
                        submission_http_allowlist=",".join(hosts), submissions_per_week=100,
                        submissions_per_address_per_week=100, **policy)


def run(args: argparse.Namespace, policy: str) -> dict[str, Any]:
    """One queue pass under a policy ("before" or "after"); what the honest submission waited, and each one's fate."""
    real = args.real_deadline is not None
    scale = DEFAULT_DEADLINE_S / args.real_deadline if real else 1.0
    modelled = None if real else ModelledClock()
    kinds = ["hanging"] * args.hanging + ["slow"] * args.slow + ["honest"]
    hosts = [f"{kind}-{i}.example.test" for i, kind in enumerate(kinds)]
    old = {"submission_slice_s": 3600.0, "submission_max_failure_rate": 0.95} if policy == "before" else {}
    settings = _settings(args, hosts, **old)
    resolver = {host: ["127.0.0.1"] for host in hosts}
    store = open_store(None)
    with store.transaction():
        for paper in _papers(args.papers):
            store.upsert_paper(paper)
    make_splits(store, settings.seed)
    queue, vault = SubmissionQueue(None), KeyVault(env={})
    clock: Any = modelled if modelled is not None else (lambda: time.monotonic() * scale)
    finished_at: dict[str, float] = {}
    real_finish = _evaluate.finish_submission

    def finish(queue: Any, vault: Any, sub_id: str, ok: bool, reason: str | None = None, store: Any = None) -> None:
        finished_at[sub_id] = (modelled.now if modelled is not None else clock()) - started
        real_finish(queue, vault, sub_id, ok, reason, store)

    import grebench.llm._client as client

    saved = (_turns._clock, client._sleep, _evaluate.finish_submission)
    _turns._clock = clock
    # the retry back-off: in the modelled cost of a hanging prompt, or as fast as the deadline is short
    client._sleep = (lambda seconds: None) if modelled is not None else (lambda seconds: time.sleep(seconds / scale))
    _evaluate.finish_submission = finish  # type: ignore[assignment]
    try:
        with ExitStack() as stack:
            ids: dict[str, str] = {}
            for kind, host in zip(kinds, hosts, strict=True):
                server = stack.enter_context(_endpoints(kind, modelled, scale))
                form = SubmissionForm(model_name=host.split(".")[0], base_url=f"http://{host}:{server.port}/v1",
                                      released="2019-03-01", cutoff="2000-01-01", contact=f"{host}@example.org")
                result = queue.submit(form, settings, vault, resolver)
                assert result["ok"], result
                ids[host] = result["id"]
            started_real = time.monotonic()
            started = clock()
            summary = evaluate_queued(store, settings, "bench", queue, vault, resolver)
            pass_real = time.monotonic() - started_real
    finally:
        _turns._clock, client._sleep, _evaluate.finish_submission = saved  # type: ignore[assignment]
    by_id = {e["id"]: e for e in summary["evaluated"]}
    honest = ids[hosts[-1]]
    subs = [{"kind": kind, "ok": by_id[ids[h]]["ok"], "papers_tried": by_id[ids[h]]["reviews"]
             + by_id[ids[h]]["failed"], "turns": by_id[ids[h]]["turns"], "own_s": by_id[ids[h]]["own_s"],
             "finished_s": round(finished_at[ids[h]]), "stopped": (by_id[ids[h]].get("stopped") or "")[:200]}
            for kind, h in zip(kinds, hosts, strict=True)]
    own = by_id[honest]["own_s"]
    return {"policy": policy, "time": f"real x{scale:g}" if real else "modelled",
            "honest_finished_s": round(finished_at[honest]), "honest_own_s": own,
            "honest_waited_s": round(finished_at[honest] - own), "pass_real_s": round(pass_real, 2),
            "submissions": subs}


def _warm_litellm() -> None:
    """One call first: litellm's first call in a process spends seconds importing provider code."""
    from grebench.llm import ChatRequest, LLMClient

    with FakeOpenAIServer() as server:
        settings = load_settings(None, env={"GREBENCH_DATA_DIR": tempfile.mkdtemp()}).replace(llm_timeout_s=60)
        LLMClient(settings).complete(ChatRequest("openai/fake-model", (("user", "warm up"),), "bench", "warm",
                                                 api_base=server.url))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hanging", type=int, default=2, help="endpoints that hang on 3 prompts of 4")
    parser.add_argument("--slow", type=int, default=1, help="endpoints that answer in 110 s")
    parser.add_argument("--papers", type=int, default=24, help="papers each submission is evaluated on")
    parser.add_argument("--real-deadline", type=float, default=None,
                        help="real hangs: real seconds standing for the 120 s call deadline (sets the time scale)")
    args = parser.parse_args()
    if args.real_deadline is not None:
        _warm_litellm()
    results = [run(args, "before"), run(args, "after")]
    for result in results:
        print(json.dumps(result))
    before, after = results
    print(f"\n{args.hanging} hanging + {args.slow} slow hostile submissions queued before 1 honest one, "
          f"{args.papers} papers, seconds ({before['time']}):")
    print(f"{'':34}{'before':>12}{'after':>12}")
    rows = (("honest_finished_s", "honest finished after (s)"), ("honest_own_s", "  of which its own turns (s)"),
            ("honest_waited_s", "  waiting for the others (s)"), ("pass_real_s", "whole pass, real (s)"))
    for key, label in rows:
        print(f"{label:34}{before[key]:>12}{after[key]:>12}")


if __name__ == "__main__":
    main()

"""The failure budget cannot be dodged and the worker is shared fairly (issue 31, §5).

Driven through the scheduler's queue job (``SchedulerService.run_job("queue")``) against fake OpenAI-compatible
endpoints on 127.0.0.1 (opted in with ``submission_private_allowlist``, host names resolved by the test's table).
Time is an injected clock that moves only when a fake endpoint says so, so nothing here depends on the machine's
speed: assertions are on the order of the calls the endpoints saw and on the turns each submission took.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import pytest

from grebench import stop
from grebench.bench import make_splits
from grebench.endpoints import KeyVault
from grebench.scheduler import SchedulerService
from grebench.settings import Settings
from grebench.store import PaperRecord, ReviewRecord, Store
from grebench.submissions import SubmissionForm, SubmissionQueue, _turns
from tests.conftest import subject
from tests.fakes.openai_server import FakeOpenAIServer
from tests.llm.conftest import warm_litellm

__all__ = ["warm_litellm"]  # litellm's first call imports for seconds: not inside a 2 s deadline

PAPERS = 16
HOSTS = ("hostile-a.example.test", "hostile-b.example.test", "honest.example.test", "resumed.example.test")
RESOLVER = {host: ["127.0.0.1"] for host in HOSTS}
_TITLE = re.compile(r"Fair paper (\d\d)")


class FakeClock:
    """The turns' clock: seconds move only when a fake endpoint advances them."""

    def __init__(self) -> None:
        self.now = 0.0
        self._lock = threading.Lock()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.now += seconds


class CallLog:
    """Every chat request of every fake endpoint, in the order they arrived: (endpoint, paper number)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []
        self.answered: list[tuple[str, int]] = []  # requests that got an answer (an error reply included)
        self._lock = threading.Lock()

    def endpoint(self, name: str, mode: Callable[[int, int], str]) -> Callable[[dict[str, Any]], str]:
        """A ``mode_of`` for a fake: ``mode(paper, index of the paper's prompt among the distinct ones seen)``."""
        first_seen: dict[int, int] = {}

        def mode_of(body: dict[str, Any]) -> str:
            match = _TITLE.search(json.dumps(body.get("messages")))
            assert match is not None, "a review prompt names its paper's title"
            paper = int(match.group(1))
            with self._lock:
                index = first_seen.setdefault(paper, len(first_seen))
                self.calls.append((name, paper))
            chosen = mode(paper, index)
            if chosen != "hang":
                with self._lock:
                    self.answered.append((name, paper))
            return chosen

        return mode_of

    def of(self, name: str) -> list[int]:
        return [paper for who, paper in self.calls if who == name]


def _papers() -> list[PaperRecord]:
    out = []
    for n in range(PAPERS):
        pid = f"fair{n:02d}"
        body = f"Summary:\nThe paper studies {subject(n)}.\n\nWeaknesses:\nFew {subject(n)} baselines."
        reviews = [ReviewRecord(review_id=f"{pid}-r{i}", paper_id=pid, kind="official_review", text=f"{body} R{i}.",
                                sections=[("Review", body)], content={"review": body}) for i in range(3)]
        out.append(PaperRecord(paper_id=pid, venue_id="Test.cc/2019/Conference", title=f"Fair paper {n:02d}",
                               source="test", abstract=f"We study {subject(n)}.", reviews=reviews))
    return out


@pytest.fixture
def world(store: Store, settings: Settings, monkeypatch: pytest.MonkeyPatch,
          warm_litellm: None) -> Iterator[dict[str, Any]]:
    """Sixteen papers with baseline splits, the queue, a vault, the injected clock and the call log."""
    with store.transaction():
        for paper in _papers():
            store.upsert_paper(paper)
    make_splits(store, settings.seed)
    clock = FakeClock()
    monkeypatch.setattr(_turns, "_clock", clock)
    monkeypatch.setattr("grebench.llm._client._sleep", lambda seconds: None)  # retries wait for nothing
    fair = settings.replace(submission_private_allowlist="127.0.0.1/32", submission_http_allowlist=",".join(HOSTS),
                            submissions_per_address_per_week=100, submissions_per_week=100, app_host="127.0.0.2",
                            # a hanging prompt costs 2 s of real time (answers on loopback take milliseconds)
                            llm_timeout_s=2.0, submission_max_retries=0)
    stop.reset()
    yield {"store": store, "settings": fair, "queue": SubmissionQueue(None), "vault": KeyVault(env={}),
           "clock": clock, "log": CallLog()}
    stop.reset()


def _submit(world: dict[str, Any], name: str, host: str, server: FakeOpenAIServer) -> str:
    form = SubmissionForm(model_name=name, base_url=f"http://{host}:{server.port}/v1", released="2019-03-01",
                          cutoff="2000-01-01", contact=f"{name.lower().replace(' ', '-')}@example.org")
    result = world["queue"].submit(form, world["settings"], world["vault"], RESOLVER)
    assert result["ok"], result
    return str(result["id"])


def _queue_job(world: dict[str, Any]) -> dict[str, Any]:
    service = SchedulerService(world["settings"], world["store"], vault=world["vault"], queue=world["queue"],
                               kinds=["queue"], resolver=RESOLVER)
    return service.run_job("queue")


def three_of_four_hang(paper: int, index: int) -> str:
    """Hangs on 3 of every 4 prompts (in the order they first arrive), answers the 4th: never 4 failures in a row."""
    return "ok" if index % 4 == 3 else "hang"


def test_an_endpoint_hanging_on_3_prompts_of_4_is_stopped_by_the_failure_rate(world: dict[str, Any]) -> None:
    log: CallLog = world["log"]
    with FakeOpenAIServer(mode_of=log.endpoint("A", three_of_four_hang)) as hostile:
        sub_id = _submit(world, "Hostile A", HOSTS[0], hostile)
        job = _queue_job(world)
    [entry] = job["summary"]["evaluated"]
    # two batches of bench_concurrency = 4 calls: 6 of the last 8 failed, more than half of the window
    assert len(set(log.of("A"))) == 8, log.calls  # (before: all 16 papers, 12 hanging, never 4 in a row)
    assert entry["id"] == sub_id and not entry["ok"], entry
    assert "6 of the last 8 calls failed" in entry["stopped"] and "submission_max_failure_rate = 0.5" in entry[
        "stopped"] and "timed out" in entry["stopped"], entry
    assert (entry["reviews"], entry["failed"]) == (2, 6), entry
    assert world["store"].scalar("SELECT reason FROM submissions WHERE id = ?", [sub_id]) == entry["stopped"]
    assert world["queue"].rows("SELECT status FROM submissions") == [{"status": "failed"}]


def test_the_honest_submission_finishes_after_one_turn_of_each_hostile_one(world: dict[str, Any]) -> None:
    log: CallLog = world["log"]
    clock: FakeClock = world["clock"]

    def slow(paper: int, index: int) -> str:
        clock.advance(100.0)  # every answer of B takes 100 s: one batch of 4 overruns its 300 s slice
        return "ok"

    with ExitStack() as stack:
        a = stack.enter_context(FakeOpenAIServer(mode_of=log.endpoint("A", three_of_four_hang)))
        b = stack.enter_context(FakeOpenAIServer(mode_of=log.endpoint("B", slow)))
        c = stack.enter_context(FakeOpenAIServer(mode_of=log.endpoint("C", lambda paper, index: "ok")))
        # the hostile ones were queued first: under one-after-another they would all run before the honest one
        ids = {"A": _submit(world, "Hostile A", HOSTS[0], a), "B": _submit(world, "Hostile B", HOSTS[1], b),
               "C": _submit(world, "Honest C", HOSTS[2], c)}
        job = _queue_job(world)
    # every honest call came after at most one turn of each hostile endpoint, and before B's second turn
    last_honest = max(i for i, (who, _) in enumerate(log.calls) if who == "C")
    before = [who for who, _ in log.calls[:last_honest]]
    assert before.count("B") == world["settings"].bench.bench_concurrency, log.calls  # B's first turn: one batch
    assert before.count("A") == 8, log.calls  # A's only turn, which the failure rate ended
    assert sorted(log.of("C")) == list(range(PAPERS)) and sorted(log.of("B")) == list(range(PAPERS))
    evaluated = {e["id"]: e for e in job["summary"]["evaluated"]}
    honest = evaluated[ids["C"]]
    assert honest["ok"] and honest["reviews"] == PAPERS and honest["turns"] == 1, honest
    # the order in which they finished, and the turns each took (B: one batch per turn, 4 turns of its own time)
    assert [e["id"] for e in job["summary"]["evaluated"]] == [ids["A"], ids["C"], ids["B"]]
    assert evaluated[ids["B"]]["ok"] and evaluated[ids["B"]]["turns"] == 4 and evaluated[ids["B"]]["own_s"] == 1600
    assert "failure_rate" in evaluated[ids["A"]]["stopped"] and evaluated[ids["A"]]["turns"] == 1
    turns = {r["id"]: (r["slices"], r["spent_s"]) for r in world["store"].rows("SELECT * FROM submission_turns")}
    assert turns == {ids["A"]: (1, 0.0), ids["B"]: (4, 1600.0), ids["C"]: (1, 0.0)}


def test_own_wall_time_counts_only_its_own_turns(world: dict[str, Any]) -> None:
    """submission_max_wall_s (3600 s) counts B's turns only: the honest endpoint's time between them is not B's."""
    log: CallLog = world["log"]
    clock: FakeClock = world["clock"]

    def costs(seconds: float) -> Callable[[int, int], str]:
        def mode(paper: int, index: int) -> str:
            clock.advance(seconds)
            return "ok"
        return mode

    with ExitStack() as stack:
        b = stack.enter_context(FakeOpenAIServer(mode_of=log.endpoint("B", costs(300.0))))  # 1200 s a batch
        c = stack.enter_context(FakeOpenAIServer(mode_of=log.endpoint("C", costs(250.0))))  # 1000 s a batch
        ids = {"B": _submit(world, "Hostile B", HOSTS[1], b), "C": _submit(world, "Honest C", HOSTS[2], c)}
        job = _queue_job(world)
    assert [who for who, _ in log.calls] == ["B"] * 4 + ["C"] * 4 + ["B"] * 4 + ["C"] * 4 + ["B"] * 4 + ["C"] * 8
    evaluated = {e["id"]: e for e in job["summary"]["evaluated"]}
    # each batch overruns the 300 s slice: one batch per turn, alternating; B has used 3 × 1200 s of its own when
    # its fourth turn comes (counting C's turns too, it would have been stopped before its third)
    assert "wall-time budget spent (3600 s of its own turns" in evaluated[ids["B"]]["stopped"], evaluated
    assert "after 12 of 16 papers" in evaluated[ids["B"]]["stopped"] and len(log.of("B")) == 12
    assert evaluated[ids["C"]]["ok"] and evaluated[ids["C"]]["turns"] == 4, evaluated


def test_a_submission_queued_during_a_pass_joins_the_next_round(world: dict[str, Any]) -> None:
    """An honest submission queued while a slow one is evaluated waits for the rest of that turn and one more turn
    of it, not for its whole evaluation."""
    log: CallLog = world["log"]
    clock: FakeClock = world["clock"]
    once = threading.Lock()

    with ExitStack() as stack:
        c = stack.enter_context(FakeOpenAIServer(mode_of=log.endpoint("C", lambda paper, index: "ok")))

        def slow(paper: int, index: int) -> str:
            clock.advance(100.0)
            if once.acquire(blocking=False):  # the honest one is submitted while B's first batch runs
                _submit(world, "Honest C", HOSTS[2], c)
            return "ok"

        b = stack.enter_context(FakeOpenAIServer(mode_of=log.endpoint("B", slow)))
        _submit(world, "Hostile B", HOSTS[1], b)
        job = _queue_job(world)
    assert job["summary"]["accepted"] == ["Hostile B", "Honest C"], job["summary"]
    assert [e["ok"] for e in job["summary"]["evaluated"]] == [True, True], job["summary"]["evaluated"]
    last_honest = max(i for i, (who, _) in enumerate(log.calls) if who == "C")
    assert [who for who, _ in log.calls[:last_honest]].count("B") == 8, log.calls  # B's first two turns
    assert sorted(log.of("C")) == list(range(PAPERS)) and sorted(log.of("B")) == list(range(PAPERS))


def test_a_resumed_submission_after_a_stop_repeats_no_answered_call(world: dict[str, Any]) -> None:
    """A stop (SIGTERM) in the middle of a submission; the next queue pass finishes it without asking again any
    prompt that was answered, a failed one included, and counts every call once."""
    log: CallLog = world["log"]
    world["settings"] = world["settings"].replace(bench_concurrency=1)  # one call in flight when the stop comes

    stopped: list[int] = []

    def answers(paper: int, index: int) -> str:
        if index == 1:
            return "http500"  # a failure is a completed call too: it is not asked again
        if index == 6 and not stopped:
            stopped.append(paper)
            stop.request_stop()  # the stop comes while this call is in flight: it is abandoned, never answered
            return "hang"
        return "ok"

    with FakeOpenAIServer(mode_of=log.endpoint("D", answers)) as server:
        sub_id = _submit(world, "Resumed D", HOSTS[3], server)
        first = _queue_job(world)
        assert first["status"] == "interrupted", first
        assert world["queue"].rows("SELECT status FROM submissions") == [{"status": "running"}]
        assert len(log.of("D")) == 7 and len(log.answered) == 6
        stop.reset()
        second = _queue_job(world)
    [entry] = second["summary"]["evaluated"]
    assert len(log.answered) == len(set(log.answered)) == PAPERS, log.answered  # no answered prompt asked again
    assert sorted(p for _, p in log.answered) == list(range(PAPERS))
    assert log.of("D").count(stopped[0]) == 2  # only the abandoned call was made again
    assert (entry["calls_made"], entry["reviews"], entry["failed"], entry["turns"]) == (PAPERS - 6, PAPERS - 1, 1, 1)
    assert not entry["ok"] and world["store"].scalar("SELECT reason FROM submissions WHERE id = ?", [sub_id]) == (
        "1 generation(s) failed")
    rows = world["store"].rows("SELECT paper_id, count(*) AS n FROM generations WHERE candidate = 'Resumed D' "
                               "GROUP BY paper_id")
    assert len(rows) == PAPERS and {r["n"] for r in rows} == {1}
    assert world["store"].scalar("SELECT slices FROM submission_turns WHERE id = ?", [sub_id]) == 2


def test_failure_rule_and_settings_bounds() -> None:
    from grebench.settings import load_settings

    settings = load_settings(env={})
    fail, ok = (False, "timed out"), (True, None)
    assert _turns.failure_stop(settings.submissions, [fail, fail, fail, ok] * 2) is not None  # 6 of 8
    assert _turns.failure_stop(settings.submissions, [fail, ok] * 8) is None  # 4 of 8 is not more than half
    assert _turns.failure_stop(settings.submissions, [fail] * 5 + [ok]) is not None  # 5 of 6 already exceeds 4 of 8
    assert "4 failed calls in a row" in str(_turns.failure_stop(settings.submissions, [ok, fail, fail, fail, fail]))
    for name, bad in (("submission_failure_window", "1"), ("submission_max_failure_rate", "1.0"),
                      ("submission_slice_s", "0.5")):
        with pytest.raises(ValueError, match=name):
            load_settings(env={f"GREBENCH_{name.upper()}": bad})

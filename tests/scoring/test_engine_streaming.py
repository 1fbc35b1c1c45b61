"""The engine caches every answer as it arrives: a streaming estimator's answers are written while it runs, an
in-process estimator gets bounded batches of requests, and a failure or a stop loses nothing already answered."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from grebench.scoring import _engine
from grebench.scoring._request import LogprobRequest, LogprobResult
from grebench.settings import Settings
from grebench.store import Store
from tests.scoring.conftest import FakeEstimator
from tests.scoring.parts import score
from tests.scoring.test_engine import small_store

__all__ = ["small_store"]


class StreamingFake(FakeEstimator):
    """A fake that streams: answers one request at a time through ``on_result``; ``fail_after`` answers, it fails."""

    def __init__(self, fail_after: int | None = None, on_answer: Callable[[int], None] | None = None) -> None:
        super().__init__()
        self.fail_after, self.on_answer, self.streamed = fail_after, on_answer, 0

    def stream(self, requests: Sequence[LogprobRequest],
               on_result: Callable[[int, LogprobResult], None] | None = None) -> list[LogprobResult]:
        out = []
        for i, req in enumerate(requests):
            if self.fail_after is not None and self.streamed >= self.fail_after:
                raise RuntimeError("the server went away")
            answer = self.logprobs([req])[0]
            self.streamed += 1
            out.append(answer)
            if on_result is not None:
                on_result(i, answer)
            if self.on_answer is not None:
                self.on_answer(self.streamed)
        return out


def test_a_streaming_estimator_that_fails_midway_keeps_every_answer_it_gave(small_store: Store,
                                                                            settings: Settings) -> None:
    clean = StreamingFake()
    broken = StreamingFake(fail_after=5)
    with pytest.raises(RuntimeError, match="went away"):
        score(small_store, settings, None, ["gem"], "offline", "rules", estimator=broken)
    assert small_store.scalar("SELECT count(*) FROM logprob_cache") == 5  # the five answers were cached
    resumed = StreamingFake()
    summary = score(small_store, settings, None, ["gem"], "offline", "rules", estimator=resumed)
    assert summary["cache_hits"] == 5
    assert resumed.calls == summary["estimator_calls"]  # only what was not answered before is asked
    first = {(r["candidate"], r["paper_id"], r["reference_review_id"]): r["pmi"]
             for r in small_store.rows("SELECT * FROM scores")}
    small_store.con.execute("DELETE FROM scores")
    small_store.con.execute("DELETE FROM logprob_cache")
    score(small_store, settings, None, ["gem"], "offline", "rules", estimator=clean)
    again = {(r["candidate"], r["paper_id"], r["reference_review_id"]): r["pmi"]
             for r in small_store.rows("SELECT * FROM scores")}
    assert first == again and first  # the resumed run's numbers are the clean run's


def test_a_stop_while_streaming_keeps_what_arrived(small_store: Store, settings: Settings) -> None:
    from grebench import stop

    def stop_after_three(n: int) -> None:
        if n == 3:
            stop.request_stop()

    fake = StreamingFake(on_answer=stop_after_three)
    original = fake.stream

    def stream_checking(requests: Sequence[LogprobRequest],
                        on_result: Callable[[int, LogprobResult], None] | None = None) -> list[LogprobResult]:
        def checked(i: int, a: LogprobResult) -> None:
            assert on_result is not None
            on_result(i, a)
            stop.check()  # what the dispatcher's caller thread does after each answer

        return original(requests, checked)

    fake.stream = stream_checking  # type: ignore[method-assign]
    try:
        with pytest.raises(stop.Interrupted):
            score(small_store, settings, None, ["gem"], "offline", "rules", estimator=fake)
    finally:
        stop.reset()
    # every answer that arrived is cached (the fourth arrived before the stop was seen), and nothing more was asked
    assert small_store.scalar("SELECT count(*) FROM logprob_cache") == fake.streamed == 4


def test_in_process_batches_are_bounded_in_requests_and_keep_papers_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeEstimator()
    fake.papers_per_batch = 40  # type: ignore[attr-defined]
    monkeypatch.setattr(_engine, "REQUESTS_PER_BATCH", 10)
    reqs = {f"{p}-{i}": (fake, LogprobRequest(paper_id=p, synopsis=None, first_review=str(i), target="t"))
            for p, n in (("a", 4), ("b", 4), ("c", 25), ("d", 3)) for i in range(n)}
    batches = _engine._request_batches(list(reqs), reqs, fake)  # type: ignore[arg-type]
    sizes = [len(b) for b in batches]
    assert max(sizes) <= 10 and sum(sizes) == 36
    assert [k for b in batches for k in b] == list(reqs)  # nothing lost, nothing repeated, order kept
    papers = [{k.split("-")[0] for k in b} for b in batches]
    assert papers[0] == {"a", "b"}  # two small papers share a batch; the big one is cut at the cap
    assert all(len(b) == 10 for b, p in zip(batches, papers, strict=True) if p == {"c"})


def test_one_paper_per_batch_estimators_still_get_one_paper(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeEstimator()
    fake.papers_per_batch = 1  # type: ignore[attr-defined]
    reqs = {f"{p}-{i}": (fake, LogprobRequest(paper_id=p, synopsis=None, first_review=str(i), target="t"))
            for p in "abc" for i in range(3)}
    batches = _engine._request_batches(list(reqs), reqs, fake)  # type: ignore[arg-type]
    assert [{k.split("-")[0] for k in b} for b in batches] == [{"a"}, {"b"}, {"c"}]

"""A server that refuses connections (issue 64): named as such, not "HTTP 500"; retried a bounded number of times
with back-off (``llm_max_retries``), then given up, and once one call gave up the others to it stop at once."""

from __future__ import annotations

import socket

from grebench.llm import ChatRequest, LLMClient
from grebench.settings import Settings
from grebench.store import Store


def _closed_port() -> int:
    with socket.socket() as sock:  # bound, then closed: nothing listens there
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_refused_connection_is_named_retried_with_backoff_then_given_up_for_every_call(
        fast_settings: Settings, store: Store, no_backoff: list[float]) -> None:
    settings = fast_settings.replace(llm_max_retries=3, bench_concurrency=2)
    base = f"http://127.0.0.1:{_closed_port()}/v1"
    requests = [ChatRequest("openai/dead", (("user", f"question {i}"),), "judge", "t-v1", api_base=base)
                for i in range(8)]
    results = LLMClient(settings, store).complete_many(requests)
    assert all(r.status == "failed" and r.unreachable for r in results)
    for r in results:
        assert "connection refused" in (r.error or "") and "HTTP 500" not in (r.error or ""), r.error
    # the calls in flight when the first gave up used their retries; every later one was not sent at all
    attempts = sorted(r.attempts for r in results)
    assert attempts[-1] == 4 and "(after 4 attempts)" in (results[0].error or "")
    assert sum(attempts) <= 4 * 2 + 1, attempts  # not 8 calls x 4 attempts
    assert attempts.count(0) >= 8 - 2 - 1
    assert no_backoff and all(w > 0 for w in no_backoff)  # with back-off, not at once
    assert max(no_backoff) < 2 ** 3 * 1.5  # bounded: 1, 2, 4 s (x 0.5..1.5 jitter)

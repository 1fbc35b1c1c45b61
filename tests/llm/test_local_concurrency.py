"""Concurrency to a local model server is what the machine can take (issue 26): the client honours the number
measured for a server (:func:`grebench.runtime.server_concurrency`, tested in tests/runtime/test_concurrency.py)."""

from __future__ import annotations

import threading

from grebench.llm import ChatRequest, LLMClient, local_endpoints
from grebench.settings import Settings
from grebench.store import Store
from tests.fakes.openai_server import FakeOpenAIServer


def _requests(server: FakeOpenAIServer, n: int) -> list[ChatRequest]:
    return [ChatRequest("openai/fake-model", (("user", f"paper {i}"),), "test", "conc-v1", api_base=server.url)
            for i in range(n)]


class _InFlight:
    """A reply that waits (bounded) for a second call to arrive: the peak number of calls the server had at once."""

    def __init__(self, wait_s: float) -> None:
        self.active = self.peak = 0
        self.wait_s = wait_s
        self.cond = threading.Condition()

    def __call__(self, messages: list[dict[str, object]]) -> str:
        with self.cond:
            self.active += 1
            self.peak = max(self.peak, self.active)
            self.cond.notify_all()
            self.cond.wait_for(lambda: self.active >= 2, timeout=self.wait_s)
            self.active -= 1
        return f"<summary>{messages[-1]['content']}</summary>"


def test_the_client_sends_a_local_server_only_its_measured_concurrency(settings: Settings, store: Store) -> None:
    s = settings.replace(bench_concurrency=4, llm_max_retries=0, llm_timeout_s=60)
    limited = _InFlight(wait_s=0.5)
    with FakeOpenAIServer(reply=limited) as server, local_endpoints([server.url], concurrency=1):
        results = LLMClient(s, store).complete_many(_requests(server, 2))
    assert [r.status for r in results] == ["ok", "ok"] and limited.peak == 1
    free = _InFlight(wait_s=30.0)  # the same calls to a server without a limit of its own: both at once
    with FakeOpenAIServer(reply=free) as server:
        results = LLMClient(s, store).complete_many(_requests(server, 2))
    assert [r.status for r in results] == ["ok", "ok"] and free.peak == 2

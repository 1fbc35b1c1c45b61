"""Concurrency to a local model server is what the machine can take (issue 26): derived from the tokens per second
measured on this machine and its cores, and honoured by the client for the server it was measured for."""

from __future__ import annotations

import threading

import pytest

from grebench.llm import ChatRequest, LLMClient, local_endpoints
from grebench.models import _concurrency, server_concurrency
from grebench.settings import Settings
from grebench.store import Store
from tests.fakes.openai_server import FakeOpenAIServer


@pytest.mark.parametrize(("cores", "tok_s", "expected"), [
    (2, 141.3, 1),     # this project's busy Xeon in float32: one 8192-token prompt takes ~58 s to read
    (2, 1412.2, 2),    # the same in bfloat16 (measured by the dtype probe): the cores bound it
    (16, 1412.2, 4),   # more cores: bench_concurrency bounds it
    (16, 300.0, 2),    # a slow CPU with many cores: the measured speed bounds it
])
def test_a_cpu_server_gets_what_the_measured_speed_and_the_cores_allow(monkeypatch: pytest.MonkeyPatch,
                                                                       settings: Settings, cores: int,
                                                                       tok_s: float, expected: int) -> None:
    monkeypatch.setattr(_concurrency, "usable_cores", lambda: cores)
    n, why = server_concurrency(settings.replace(bench_concurrency=4), "cpu", "bfloat16",
                                {"bfloat16_tok_s": tok_s}, 8192)
    assert n == expected and f"{tok_s:.0f} tokens/s measured in bfloat16" in why


def test_without_a_measurement_half_the_cores_and_on_a_gpu_bench_concurrency(monkeypatch: pytest.MonkeyPatch,
                                                                            settings: Settings) -> None:
    monkeypatch.setattr(_concurrency, "usable_cores", lambda: 2)
    s = settings.replace(bench_concurrency=4)
    assert server_concurrency(s, "cpu", "float32", {"dtype": "float32", "source": "setting"}, 8192)[0] == 1
    assert server_concurrency(s, "cuda", "bfloat16", None, 8192)[0] == 4


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

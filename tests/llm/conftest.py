"""LLM-client fixtures: zero back-off, a fake OpenAI server, a canary API key."""

from __future__ import annotations

from typing import Iterator

import pytest

from grebench.settings import Settings
from tests.conftest import FAST_ENV
from tests.fakes.openai_server import FakeOpenAIServer

CANARY = "sk-canary-7f3a9c1e5b"
KEY_ENV = "GREBENCH_TEST_LLM_KEY"


@pytest.fixture(scope="session", autouse=True)
def warm_litellm() -> None:
    """One call through litellm first: its first call in a process spends seconds importing provider code,
    which would eat into the 1-2 s deadlines the hostile-endpoint tests use."""
    from grebench.llm import ChatRequest, LLMClient
    from grebench.settings import load_settings

    with FakeOpenAIServer() as server:
        settings = load_settings(env={**FAST_ENV, }).replace(llm_timeout_s=60, llm_max_retries=0)
        LLMClient(settings).complete(ChatRequest("openai/fake-model", (("user", "warm up"),), "test", "warm",
                                                 api_base=server.url))


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Retries sleep for zero seconds; the requested waits are recorded."""
    waits: list[float] = []
    monkeypatch.setattr("grebench.llm._client._sleep", waits.append)
    return waits


@pytest.fixture
def canary_key(monkeypatch: pytest.MonkeyPatch) -> str:
    """A fake API key that must never show up in the store or logs."""
    monkeypatch.setenv(KEY_ENV, CANARY)
    return CANARY


@pytest.fixture
def fake_llm() -> Iterator[FakeOpenAIServer]:
    """A running fake OpenAI-compatible server."""
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture
def fast_settings(settings: Settings) -> Settings:
    """Small timeouts and caps so hostile endpoints finish fast."""
    return settings.replace(llm_timeout_s=2, llm_max_retries=2, llm_max_response_chars=20_000, llm_max_retry_after_s=5)

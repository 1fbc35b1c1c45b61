"""Slow is not dead (issue 26): a call to a model server grebench started on this machine is ended by the idle
limit (``llm_idle_timeout_s``: no data for that long), never by a total deadline while tokens still arrive; a remote
endpoint keeps its total budget (``llm_timeout_s``).  The fake streams the real protocol; how long its stream
lasted is what it observed sending, so nothing here depends on the machine's speed."""

from __future__ import annotations

import pytest

from grebench.llm import ChatRequest, LLMClient, local_endpoints
from grebench.settings import Settings
from grebench.store import Store
from tests.fakes.openai_server import DEFAULT_REVIEW, FakeOpenAIServer


def _request(server: FakeOpenAIServer) -> ChatRequest:
    return ChatRequest(model="openai/fake-model", messages=(("user", "Review this paper."),), purpose="test",
                       prompt_version="slow-v1", api_base=server.url)


@pytest.fixture
def slow_server() -> FakeOpenAIServer:
    # the review in 40-character chunks, one every 0.1 s: about 15 chunks, so the stream lasts well over 1 s
    with FakeOpenAIServer(mode="slow", drip_interval_s=0.1, chunk_chars=40) as server:
        yield server


def test_a_local_server_still_streaming_is_not_cut_by_the_total_deadline(slow_server: FakeOpenAIServer,
                                                                          fast_settings: Settings,
                                                                          store: Store) -> None:
    settings = fast_settings.replace(llm_timeout_s=0.5, llm_idle_timeout_s=30.0, llm_max_retries=0)
    with local_endpoints([slow_server.url]):
        result = LLMClient(settings, store).complete(_request(slow_server))
    assert result.status == "ok", result.error
    assert result.text == DEFAULT_REVIEW and result.attempts == 1
    [seconds] = slow_server.stream_seconds
    assert seconds > settings.limits.llm_timeout_s  # the stream outlasted the total deadline and was read to its end


def test_a_remote_endpoint_keeps_its_total_budget(slow_server: FakeOpenAIServer, fast_settings: Settings,
                                                  store: Store) -> None:
    settings = fast_settings.replace(llm_timeout_s=0.5, llm_idle_timeout_s=30.0, llm_max_retries=0)
    result = LLMClient(settings, store).complete(_request(slow_server))  # not a server grebench started
    assert result.status == "failed" and "timed out after 0.5 s" in (result.error or ""), result.error


def test_a_local_server_that_stops_sending_is_given_up_by_the_idle_limit(fast_settings: Settings,
                                                                         store: Store) -> None:
    settings = fast_settings.replace(llm_timeout_s=600.0, llm_idle_timeout_s=1.0, llm_max_retries=1)
    with FakeOpenAIServer(mode="stall") as server, local_endpoints([server.url]):
        result = LLMClient(settings, store).complete(_request(server))
        assert len(server.chat_requests) == 2  # retried once, each attempt ended by the idle limit
    assert result.status == "failed" and result.attempts == 2
    assert "no data for" in (result.error or "") and "llm_idle_timeout_s = 1 s" in (result.error or ""), result.error
    assert "timed out after 600" not in (result.error or "")

"""The shared LLM client through the real litellm against a local OpenAI-compatible server."""

from __future__ import annotations

import logging
import time

import pytest

from grebench.llm import ChatRequest, LLMClient
from grebench.settings import Settings
from grebench.store import Store
from tests.fakes.openai_server import DEFAULT_REVIEW, FakeOpenAIServer
from tests.llm.conftest import KEY_ENV


def _request(server: FakeOpenAIServer, text: str = "Review this paper.", **params: object) -> ChatRequest:
    return ChatRequest(model="openai/fake-model", messages=(("user", text),), purpose="test", prompt_version="t-v1",
                       api_base=server.url, api_key_env=KEY_ENV, params=tuple(params.items()))


def _all_text(store: Store) -> str:
    """Every text column of the tables the bench writes, concatenated."""
    parts = []
    for table in ("llm_calls", "generations", "candidates"):
        cols = [r["column_name"] for r in store.rows(
            "SELECT column_name FROM information_schema.columns WHERE table_name = ? AND data_type = 'VARCHAR'",
            [table])]
        for row in store.con.execute(f"SELECT {', '.join(cols)} FROM {table}").fetchall():
            parts.extend(str(v) for v in row if v is not None)
    return "\n".join(parts)


def test_cache_key_ignores_key_and_param_order(monkeypatch: pytest.MonkeyPatch) -> None:
    a = ChatRequest("openai/m", (("user", "x"),), "review", "v1", params=(("max_tokens", 5), ("temperature", 0)))
    b = ChatRequest("openai/m", (("user", "x"),), "review", "v1", api_key_env="OTHER", params=(("max_tokens", 5),))
    assert a.cache_key() == b.cache_key()  # temperature 0 is the default; the key env name is not part of it
    c = ChatRequest("openai/m", (("user", "x"),), "review", "v2", params=(("max_tokens", 5),))
    assert c.cache_key() != a.cache_key()


def test_ok_call_is_cached_and_records_usage_and_logprobs(
        fake_llm: FakeOpenAIServer, fast_settings: Settings, store: Store, canary_key: str,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    client = LLMClient(fast_settings, store)
    request = _request(fake_llm, logprobs=True, top_logprobs=2)
    first = client.complete(request)
    assert first.status == "ok" and first.text == DEFAULT_REVIEW and not first.cached
    assert first.tokens_in and first.tokens_out and first.attempts == 1 and first.latency_s is not None
    assert first.logprobs and first.logprobs[0]["top"] and len(first.logprobs[0]["top"]) == 2
    assert first.cost_usd is None  # litellm has no price for a fake model
    body = fake_llm.chat_requests[0]["body"]
    assert body["stream"] is True and body["temperature"] == 0 and body["top_logprobs"] == 2
    assert fake_llm.chat_requests[0]["headers"]["Authorization"] == f"Bearer {canary_key}"
    second = client.complete(request)
    assert second.cached and second.text == first.text and second.logprobs == first.logprobs
    assert len(fake_llm.chat_requests) == 1  # no second call
    assert canary_key not in _all_text(store)
    assert canary_key not in caplog.text


@pytest.mark.parametrize(("mode", "expected"), [
    ("html", "HTML instead of JSON"),
    ("bad_json", "invalid JSON"),
    ("empty", "empty response"),
    ("whitespace", "whitespace-only response"),
    ("ratelimit", "Retry-After 1e+06 s"),
])
def test_hostile_replies_fail_fast_without_retry(fake_llm: FakeOpenAIServer, fast_settings: Settings, store: Store,
                                                 canary_key: str, mode: str, expected: str) -> None:
    fake_llm.mode = mode
    started = time.monotonic()
    result = LLMClient(fast_settings, store).complete(_request(fake_llm))
    assert result.status == "failed" and expected in (result.error or ""), result.error
    assert result.attempts == 1 and len(fake_llm.chat_requests) == 1
    assert time.monotonic() - started < 60  # no wait on Retry-After 1e6 s (a bound on behaviour, not on speed)
    assert store.scalar("SELECT status FROM llm_calls") == "failed"
    assert canary_key not in _all_text(store)


def test_500s_are_retried_with_backoff_then_succeed(fake_llm: FakeOpenAIServer, fast_settings: Settings,
                                                     store: Store, canary_key: str, no_backoff: list[float]) -> None:
    fake_llm.script("http500", "ratelimit_short")
    result = LLMClient(fast_settings, store).complete(_request(fake_llm))
    assert result.status == "ok" and result.attempts == 3
    assert len(no_backoff) == 2 and no_backoff[1] >= 1.0  # the short Retry-After was honoured
    assert store.scalar("SELECT status FROM llm_calls") == "ok"


def test_persistent_500_gives_up_after_max_retries(fake_llm: FakeOpenAIServer, fast_settings: Settings,
                                                    store: Store, canary_key: str) -> None:
    fake_llm.mode = "http500"
    result = LLMClient(fast_settings, store).complete(_request(fake_llm))
    assert result.status == "failed" and "HTTP 500" in (result.error or "") and "after 3 attempts" in result.error
    assert len(fake_llm.chat_requests) == 3


@pytest.mark.parametrize("mode", ["hang", "drip"])
def test_deadline_holds_for_silent_and_dripping_endpoints(fake_llm: FakeOpenAIServer, fast_settings: Settings,
                                                          store: Store, canary_key: str, mode: str) -> None:
    fake_llm.mode = mode
    fake_llm.drip_interval_s = 0.3
    settings = fast_settings.replace(llm_timeout_s=1, llm_max_retries=1)
    started = time.monotonic()
    result = LLMClient(settings, store).complete(_request(fake_llm))
    elapsed = time.monotonic() - started
    assert result.status == "failed" and "timed out after 1 s" in (result.error or "")
    assert result.attempts == 2 and elapsed < 60, elapsed  # two 1 s deadlines, never the endless stream


@pytest.mark.parametrize("mode", ["endless", "huge"])
def test_endless_or_huge_stream_is_cut_and_flagged(fake_llm: FakeOpenAIServer, fast_settings: Settings,
                                                   store: Store, canary_key: str, mode: str) -> None:
    fake_llm.mode = mode
    started = time.monotonic()
    result = LLMClient(fast_settings, store).complete(_request(fake_llm))
    assert result.status == "ok" and result.truncated
    assert result.text is not None and len(result.text) == fast_settings.limits.llm_max_response_chars
    assert time.monotonic() - started < 60  # cut at the cap: an endless stream would never end


def test_missing_key_env_is_a_clear_failure(fake_llm: FakeOpenAIServer, fast_settings: Settings,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    result = LLMClient(fast_settings).complete(_request(fake_llm))
    assert result.status == "failed" and KEY_ENV in (result.error or "") and not fake_llm.requests


def test_complete_many_keeps_order_and_bounds_concurrency(fast_settings: Settings, store: Store,
                                                          canary_key: str) -> None:
    active = [0]
    peak = [0]

    def reply(messages: list[dict[str, object]]) -> str:
        active[0] += 1
        peak[0] = max(peak[0], active[0])
        time.sleep(0.05)
        active[0] -= 1
        return f"<summary>{messages[-1]['content']}</summary>"

    with FakeOpenAIServer(reply=reply) as server:
        requests = [_request(server, f"paper {i}") for i in range(8)]
        seen = []
        results = LLMClient(fast_settings.replace(bench_concurrency=2), store).complete_many(requests, seen.append)
        assert [r.text for r in results] == [f"<summary>paper {i}</summary>" for i in range(8)]
        assert len(seen) == 8 and peak[0] <= 2
        again = LLMClient(fast_settings, store).complete_many(requests)
        assert all(r.cached for r in again) and len(server.chat_requests) == 8


def test_mock_response_unit(fast_settings: Settings) -> None:
    request = ChatRequest("openai/gpt-4o-mini", (("user", "hi"),), "test", "v1", params=(("mock_response", "hello"),))
    result = LLMClient(fast_settings).complete(request)
    assert result.status == "ok" and result.text == "hello" and result.tokens_in

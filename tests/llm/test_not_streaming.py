"""Endpoints that do not stream, through the real litellm client against the fake server over loopback.

A streamed request that gets one JSON ``chat.completion`` back uses it; ``stream=False`` sends a plain request; and
either way a hostile body (huge, endless, dripping, stalled) is cut off by the size cap or the deadline.  Size
tests run under a long deadline and check the error says *size*, so they cannot pass by timing out instead.
"""

from __future__ import annotations

import dataclasses
import time

import pytest

from grebench.llm import ChatRequest, ChatResult, LLMClient
from grebench.llm._plain import NOT_STREAMED, body_cap
from grebench.settings import Settings
from grebench.store import Store
from tests.fakes.openai_server import DEFAULT_REVIEW, FakeOpenAIServer
from tests.llm.conftest import KEY_ENV

PRICED_MODEL = "openai/gpt-4o-mini"  # litellm's bundled price list knows it: cost is computed from the usage


PROMPT = "Review this paper, please."


def _request(server: FakeOpenAIServer, stream: bool = True, model: str = PRICED_MODEL, **params: object) -> ChatRequest:
    return ChatRequest(model=model, messages=(("user", PROMPT),), purpose="test",
                       prompt_version="t-v1", api_base=server.url, api_key_env=KEY_ENV, params=tuple(params.items()),
                       stream=stream)


def _expected_usage() -> tuple[int, int]:
    """What the fake reports: prompt words + 3, completion words."""
    return len(PROMPT.split()) + 3, len(DEFAULT_REVIEW.split())


def _expected_cost(tokens_in: int, tokens_out: int) -> float:
    import litellm

    prompt, completion = litellm.cost_per_token(model=PRICED_MODEL, prompt_tokens=tokens_in,
                                                completion_tokens=tokens_out)
    return float(prompt + completion)


def _assert_full_reply(result: ChatResult) -> None:
    tokens_in, tokens_out = _expected_usage()
    assert result.status == "ok" and result.text == DEFAULT_REVIEW and not result.truncated, result.error
    assert (result.tokens_in, result.tokens_out) == (tokens_in, tokens_out)  # the endpoint's usage, not a recount
    assert result.cost_usd == pytest.approx(_expected_cost(tokens_in, tokens_out)) and result.cost_usd > 0
    assert result.logprobs and all(len(lp["top"]) == 2 for lp in result.logprobs)
    assert result.logprobs[0]["token"] == DEFAULT_REVIEW.split(" ")[0]


@pytest.mark.parametrize("server_streams", [True, False])
def test_streamed_request_gets_the_same_result_whether_or_not_the_endpoint_streams(
        fast_settings: Settings, store: Store, canary_key: str, server_streams: bool) -> None:
    with FakeOpenAIServer(streams=server_streams) as server:
        result = LLMClient(fast_settings, store).complete(_request(server, logprobs=True, top_logprobs=2))
        _assert_full_reply(result)
        assert result.attempts == 1 and len(server.chat_requests) == 1
        assert server.chat_requests[0]["body"]["stream"] is True  # it was asked to stream either way


def test_stream_false_sends_one_plain_request_and_shares_the_cache(fast_settings: Settings, store: Store,
                                                                   canary_key: str) -> None:
    with FakeOpenAIServer() as server:  # a server that could stream: it is not asked to
        plain = _request(server, stream=False, logprobs=True, top_logprobs=2)
        result = LLMClient(fast_settings, store).complete(plain)
        _assert_full_reply(result)
        body = server.chat_requests[0]["body"]
        assert not body.get("stream") and "stream_options" not in body
        assert server.chat_requests[0]["headers"]["Authorization"] == f"Bearer {canary_key}"
        # how the reply is fetched is not part of the request's identity
        streamed = dataclasses.replace(plain, stream=True)
        assert streamed.cache_key() == plain.cache_key()
        assert LLMClient(fast_settings, store).complete(streamed).cached and len(server.chat_requests) == 1


def test_long_non_streamed_reply_is_cut_to_the_character_cap(fast_settings: Settings, store: Store,
                                                             canary_key: str) -> None:
    long_text = "word " * 10_000  # 50,000 characters: over the 20,000 cap, far under the body cap
    with FakeOpenAIServer(reply=lambda _: long_text, streams=False) as server:
        for stream in (True, False):
            result = LLMClient(fast_settings).complete(_request(server, stream=stream))
            assert result.status == "ok" and result.truncated
            assert result.text == long_text[:fast_settings.limits.llm_max_response_chars]


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("mode", ["huge", "endless"])
def test_huge_or_endless_json_body_is_cut_off_by_size(fast_settings: Settings, store: Store, canary_key: str,
                                                      stream: bool, mode: str) -> None:
    settings = fast_settings.replace(llm_timeout_s=60)  # the size cap, not the deadline, must end it
    with FakeOpenAIServer(mode=mode, streams=False) as server:
        result = LLMClient(settings, store).complete(_request(server, stream=stream))
        cap = body_cap(settings.limits.llm_max_response_chars)
        assert result.status == "failed" and result.error is not None
        assert f"larger than {cap:,} bytes" in result.error and "cut off" in result.error, result.error
        assert result.attempts == 1 and len(server.chat_requests) == 1  # the same body again would not help
        assert store.scalar("SELECT status FROM llm_calls") == "failed"


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize(("mode", "interval"), [("hang", 0.3), ("drip", 0.3), ("drip", 3600.0)])
def test_deadline_holds_for_silent_dripping_or_stalled_json_bodies(
        fast_settings: Settings, store: Store, canary_key: str, stream: bool, mode: str, interval: float) -> None:
    """hang: no headers; drip 0.3 s: a blank every 0.3 s forever; drip 3600 s: one blank, then silence."""
    settings = fast_settings.replace(llm_timeout_s=1, llm_max_retries=1)
    with FakeOpenAIServer(mode=mode, streams=False, drip_interval_s=interval) as server:
        started = time.monotonic()
        result = LLMClient(settings, store).complete(_request(server, stream=stream))
        elapsed = time.monotonic() - started
        assert result.status == "failed" and "timed out after 1 s" in (result.error or ""), result.error
        assert result.attempts == 2 and len(server.chat_requests) == 2
        assert elapsed < 60, elapsed  # two 1 s deadlines plus any machine's slack, never the 3600 s


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize(("mode", "expected"), [
    ("html", "HTML instead of JSON"),
    ("bad_json", "invalid JSON from the endpoint"),
    ("empty", "empty response"),
])
def test_bad_json_replies_fail_fast_without_retry(fast_settings: Settings, store: Store, canary_key: str,
                                                  stream: bool, mode: str, expected: str) -> None:
    with FakeOpenAIServer(mode=mode, streams=False) as server:
        result = LLMClient(fast_settings, store).complete(_request(server, stream=stream))
        assert result.status == "failed" and expected in (result.error or ""), result.error
        assert result.attempts == 1 and len(server.chat_requests) == 1


def test_json_that_is_no_chat_completion_is_named(fast_settings: Settings, store: Store, canary_key: str) -> None:
    with FakeOpenAIServer(mode="wrong_json") as server:
        result = LLMClient(fast_settings, store).complete(_request(server))
        assert result.status == "failed" and result.attempts == 1
        assert result.error is not None and result.error.startswith(
            "the endpoint answered without streaming (Content-Type application/json) and its reply is not a chat "
            "completion: "), result.error
        assert "model not loaded" in result.error


def test_unreadable_json_reply_asks_for_stream_false(fast_settings: Settings, store: Store, canary_key: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """If litellm ever stops handing back the unread HTTP body, the user is told exactly what to change."""
    monkeypatch.setattr("grebench.llm._call.raw_http_response", lambda _streamed: None)
    with FakeOpenAIServer(streams=False) as server:
        result = LLMClient(fast_settings, store).complete(_request(server))
        assert result.status == "failed" and result.error == NOT_STREAMED
        assert NOT_STREAMED == "the endpoint answered without streaming; set stream = false for this candidate"
        assert result.attempts == 1


def test_stream_labelled_as_json_is_still_read(fast_settings: Settings, store: Store, canary_key: str) -> None:
    """Server-sent events under Content-Type application/json (a misconfigured proxy) still give the reply."""
    with FakeOpenAIServer(event_content_type="application/json") as server:
        result = LLMClient(fast_settings, store).complete(_request(server, logprobs=True, top_logprobs=2))
        _assert_full_reply(result)


def test_stream_false_needs_an_openai_compatible_model(fast_settings: Settings, canary_key: str) -> None:
    with FakeOpenAIServer() as server:
        result = LLMClient(fast_settings).complete(_request(server, stream=False, model="anthropic/claude-x"))
        assert result.status == "failed" and "stream = false needs" in (result.error or "")
        assert "openai/<model id>" in (result.error or "") and not server.chat_requests

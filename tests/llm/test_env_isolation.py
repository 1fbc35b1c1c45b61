"""A publicly submitted model never runs on the operator's environment (issue 19): canary keys, base URLs, org ids
and headers in the environment reach no request; a keyless hosted submission is refused before any call."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from grebench.bench._unreviewed import stored_candidate
from grebench.llm import ChatRequest, LLMClient
from grebench.settings import load_settings
from grebench.submissions import key_in_env
from tests.conftest import FAST_ENV
from tests.fakes.openai_server import FakeOpenAIServer

OPERATOR_KEY = "sk-operator-canary-91c2"


@pytest.fixture
def servers(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[FakeOpenAIServer, FakeOpenAIServer]]:
    """(the operator's endpoint named by the environment, a stand-in for the providers' public endpoints)."""
    with FakeOpenAIServer() as operator, FakeOpenAIServer() as public:
        for name, value in {"OPENAI_API_KEY": OPERATOR_KEY, "OPENAI_API_BASE": operator.url,
                            "OPENAI_BASE_URL": operator.url, "OPENAI_ORG_ID": "org-operator-canary",
                            "OPENAI_PROJECT_ID": "proj-operator-canary", "OPENAI_ADMIN_KEY": OPERATOR_KEY,
                            "OPENAI_CUSTOM_HEADERS": "X-Operator: canary", "ANTHROPIC_API_KEY": OPERATOR_KEY,
                            "ANTHROPIC_API_BASE": operator.url}.items():
            monkeypatch.setenv(name, value)
        from grebench.llm import _call

        monkeypatch.setattr(_call, "PUBLIC_API_BASES", {"openai": public.url, "anthropic": public.url})
        yield operator, public


def _client() -> LLMClient:
    return LLMClient(load_settings(env=dict(FAST_ENV)).replace(llm_timeout_s=60, llm_max_retries=0))


def _request(model: str, key_env: str | None = None, api_base: str | None = None) -> ChatRequest:
    return ChatRequest(model, (("user", "Review this paper."),), "review", "t1", api_base=api_base,
                       api_key_env=key_env, isolated=True)


def _no_canary(server: FakeOpenAIServer) -> None:
    for entry in server.requests:
        blob = repr(entry["headers"]).lower()
        assert OPERATOR_KEY not in blob and "canary" not in blob


@pytest.mark.parametrize("model", ["openai/gpt-4o-mini", "anthropic/claude-x"])
def test_keyless_hosted_submission_is_refused_and_calls_nothing(servers, model: str) -> None:
    operator, public = servers
    result = _client().complete(_request(model))
    assert not result.ok and "no API key was submitted" in (result.error or "")
    assert operator.requests == [] and public.requests == []


def test_submission_may_not_name_an_operator_variable(servers) -> None:
    operator, public = servers
    result = _client().complete(_request("openai/gpt-4o-mini", key_env="OPENAI_API_KEY"))
    assert not result.ok and "submitter's key" in (result.error or "")
    assert operator.requests == [] and public.requests == []


@pytest.mark.parametrize("model", ["openai/gpt-4o-mini", "anthropic/claude-x"])
def test_submitted_key_goes_to_the_public_endpoint_with_nothing_of_the_operator(servers, model: str) -> None:
    operator, public = servers
    with key_in_env("sub1", "sk-submitter-own-key") as env:
        result = _client().complete(_request(model, key_env=env))
    assert result.ok, result.error
    assert operator.requests == []
    [call] = public.chat_requests
    headers = {k.lower(): v for k, v in call["headers"].items()}
    assert headers["authorization"] == "Bearer sk-submitter-own-key"
    assert "openai-organization" not in headers and "openai-project" not in headers and "x-operator" not in headers
    assert call["body"]["model"] == model.split("/", 1)[1]
    _no_canary(public)


def test_keyless_self_hosted_submission_uses_no_key_not_the_operators(servers) -> None:
    operator, _public = servers
    with FakeOpenAIServer() as own:
        result = _client().complete(_request("openai/their-model", api_base=own.url))
        assert result.ok, result.error
        [call] = own.chat_requests
        assert {k.lower(): v for k, v in call["headers"].items()}["authorization"] == "Bearer no-key"
        _no_canary(own)
    assert operator.requests == []


def test_submitted_candidates_are_isolated_and_never_take_a_stored_key_variable() -> None:
    row = {"name": "m", "model": "openai/x", "api_base": None, "api_key_env": "OPENAI_API_KEY", "released": None,
           "cutoff": None, "family": None, "description": None, "submitter": "h", "params_json": None}
    candidate = stored_candidate(row)
    assert candidate.isolated and candidate.api_key_env is None


def test_operator_candidates_keep_their_environment(servers) -> None:
    """The operator's own configured models still read the key variable they name (today's behaviour)."""
    operator, _public = servers
    request = ChatRequest("openai/op-model", (("user", "hi"),), "review", "t1", api_key_env="OPENAI_API_KEY")
    assert _client().complete(request).ok
    assert len(operator.chat_requests) == 1

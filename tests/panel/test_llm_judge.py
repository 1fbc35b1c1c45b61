"""LLM judges through a local OpenAI-compatible server: log-prob and verbal confidences, caching, family guard."""

from __future__ import annotations

import json
import math
import re
from typing import Any, Iterator

import pytest

from grebench.llm import LLMClient
from grebench.panel import (
    JudgeContext,
    LLMJudge,
    PaperView,
    ReviewView,
    parse_judges,
    parse_reply,
    run_panel,
)
from grebench.settings import Settings
from grebench.store import Store
from tests.fakes.openai_server import FakeOpenAIServer, _Handler
from tests.panel.builders import UNSCORED, build_venue

PAPER = PaperView("p1", "Sparse attention", "We propose sparse attention kernels.")
LONG = ReviewView("Summary: sparse attention kernels scale well. Strengths: linear memory. Weaknesses: few tasks.")
SHORT = ReviewView("Fine paper.")


def _reviews(messages: list[dict[str, Any]]) -> tuple[str, str]:
    user = messages[-1]["content"]
    one = re.search(r"\[Review one\]\n(.*?)\n\n\[Review two\]", user, re.DOTALL)
    two = re.search(r"\[Review two\]\n(.*?)\n\n", user, re.DOTALL)
    assert one and two, user
    return one.group(1), two.group(1)


def longer_reply(messages: list[dict[str, Any]]) -> str:
    """A consistent judge: the longer review wins."""
    one, two = _reviews(messages)
    return f"{'one' if len(one) >= len(two) else 'two'}\nConfidence: high\nReason: it is more detailed."


class NoLogprobsServer(FakeOpenAIServer):
    """A provider that ignores the log-prob request (the client must fall back to the verbal label)."""

    def handler_class(self) -> type[_Handler]:
        class Handler(_Handler):
            def _chat(self, body: dict[str, Any], mode: str) -> None:
                super()._chat({k: v for k, v in body.items() if k not in ("logprobs", "top_logprobs")}, mode)

        return Handler


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("grebench.llm._client._sleep", lambda _s: None)


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(reply=longer_reply) as s:
        yield s


def _context(settings: Settings, client: LLMClient) -> JudgeContext:
    return JudgeContext(settings, client, lambda _paper, _review: None, local_judges=())


def _judge(url: str, settings: Settings, store: Store | None, family: str | None = None) -> LLMJudge:
    client = LLMClient(settings.replace(llm_timeout_s=10, llm_max_retries=0), store)
    judge = parse_judges([{"name": "fake-judge", "model": "openai/fake-model", "api_base": url, "family": family}],
                         _context(settings, client))[0]
    assert isinstance(judge, LLMJudge)
    return judge


def test_logprob_confidence_and_cache(server: FakeOpenAIServer, settings: Settings, store: Store) -> None:
    judge = _judge(server.url, settings, store)
    verdict = judge.compare(PAPER, LONG, SHORT)
    assert verdict.preference == "one"
    # the fake server gives the first token log-prob -0.1: confidence is its probability
    assert verdict.confidence == pytest.approx(math.exp(-0.1))
    assert verdict.reason == "it is more detailed."
    body = server.chat_requests[0]["body"]
    assert body["logprobs"] is True and body["top_logprobs"] == 5
    assert "Sparse attention" in body["messages"][-1]["content"]
    assert judge.compare(PAPER, SHORT, LONG).preference == "two"
    assert len(server.chat_requests) == 2
    judge.compare(PAPER, LONG, SHORT)  # same request again: served from the cache
    assert len(server.chat_requests) == 2 and judge.cached == 1 and judge.calls_made == 2
    assert store.scalar("SELECT count(*) FROM llm_calls WHERE purpose = 'judge' AND prompt_version = 'judge-v2'") == 2


def test_verbal_label_when_provider_returns_no_logprobs(settings: Settings) -> None:
    with NoLogprobsServer(reply=longer_reply) as s:
        verdict = _judge(s.url, settings, None).compare(PAPER, LONG, SHORT)
    assert verdict.preference == "one"
    assert verdict.confidence == pytest.approx(0.5 + 3 / 8)  # "high" = level 4 of 5


def test_parse_reply_cases() -> None:
    assert parse_reply("Answer: two\nConfidence: very low\nReason: x", None).confidence == pytest.approx(0.5)
    assert parse_reply("tie\nConfidence: very high", None).confidence == pytest.approx(1.0)
    lp = [{"token": "\n", "logprob": -0.01}, {"token": "two", "logprob": math.log(0.6), "top": []}]
    assert parse_reply("two\nConfidence: low", lp).confidence == pytest.approx(0.6)
    with pytest.raises(Exception, match="unparseable"):
        parse_reply("I think both are good.", None)


def test_judges_config_errors(settings: Settings) -> None:
    context = _context(settings, LLMClient(settings))
    with pytest.raises(ValueError, match="missing model"):
        parse_judges([{"name": "j"}], context)
    with pytest.raises(ValueError, match="unknown key"):
        parse_judges([{"name": "j", "model": "openai/x", "temprature": 0}], context)
    with pytest.raises(ValueError, match="NAME of an environment variable"):
        parse_judges([{"name": "j", "model": "openai/x", "api_key_env": "sk-123"}], context)
    with pytest.raises(ValueError, match="kind must be one of llm"):
        parse_judges([{"name": "j", "kind": "oracle", "model": "openai/x"}], context)


def test_family_guard_and_idempotent_panel(server: FakeOpenAIServer, settings: Settings, store: Store) -> None:
    build_venue(store, {"llm-x": "x", "llm-y": "y"})
    tables = {"judges": [{"name": "jx", "model": "openai/fake-model", "api_base": server.url, "family": "x"}]}
    settings = Settings(values={**settings.values, "bootstrap_samples": 20, "llm_max_retries": 0, "exam_pairs": 6},
                        tables=tables)
    summary = run_panel(store, settings, None, **UNSCORED, judge_names=["jx", "length"])
    exam = {r["judge"]: r for r in summary["exam"]}["jx"]
    assert exam["passed"]  # as consistent and pertinent as the length judge it is examined with
    assert exam["self_preference"]["own_candidates"] == ["llm-x"] and exam["self_preference"]["instances"] > 0
    votes = store.rows("SELECT candidate_a, candidate_b, order_ab FROM panel_votes WHERE judge = 'jx'")
    assert votes, "the judge voted on the other pairs"
    assert not [v for v in votes if "llm-x" in (v["candidate_a"], v["candidate_b"])]
    assert {v["candidate_a"] for v in votes} | {v["candidate_b"] for v in votes} >= {"llm-y", "human", "generic"}
    assert {v["order_ab"] for v in votes} == {"ab", "ba"}
    assert summary["calls_made"] > 0
    requests, n_votes = len(server.chat_requests), store.scalar("SELECT count(*) FROM panel_votes")
    again = run_panel(store, settings, None, **UNSCORED, judge_names=["jx", "length"])
    assert len(server.chat_requests) == requests and again["calls_made"] == 0 and again["votes"] == 0
    assert store.scalar("SELECT count(*) FROM panel_votes") == n_votes
    length_votes = store.scalar("SELECT count(*) FROM panel_votes WHERE judge = 'length' AND candidate_a = 'llm-x'")
    assert length_votes > 0  # reference judges have no family: they do judge llm-x


def test_a_judge_that_always_answers_one_is_stopped_and_its_bias_not_measured(settings: Settings,
                                                                             store: Store) -> None:
    """Through the real panel and client: a judge that always prefers the first review shown fails consistency after
    a few pairs; it is asked nothing more (no pertinence, no self-confidence, no self-preference), its exam row says
    so, and a rerun asks it nothing at all."""
    build_venue(store, {"llm-x": "x", "llm-y": "y"})
    tables = {"judges": [{"name": "jx", "model": "openai/fake-model", "family": "x"}]}
    with FakeOpenAIServer(reply=lambda _m: "one\nConfidence: high\nReason: the first.") as biased:
        tables["judges"][0]["api_base"] = biased.url
        settings = Settings(values={**settings.values, "bootstrap_samples": 20, "llm_max_retries": 0,
                                    "exam_pairs": 12, "exam_llm_pairs": 12}, tables=tables)
        summary = run_panel(store, settings, None, **UNSCORED, judge_names=["jx", "length", "overlap"])
        exam = {r["judge"]: r for r in summary["exam"]}["jx"]
        asked = len(biased.chat_requests)
        assert not exam["passed"] and exam["p_c"] == 0.0 and exam["p_p"] is None and exam["p_s"] is None
        assert exam["failed"] == ["consistency", "pertinence not asked", "self-confidence not asked"]
        assert exam["stopped"].startswith("stopped after 4 of ") and exam["weight"] == 0.0
        assert exam["self_preference"]["bias"] is None and "failed the exam" in exam["self_preference"]["not_measured"]
        # one chunk of 4 consistency pairs in both orders (the family guard answers some without a call), against
        # 50+ answers for the whole exam and the bias
        assert 0 < asked <= 8
        details = json.loads(store.scalar("SELECT details_json FROM judge_exams WHERE judge = 'jx'"))
        assert details["asked"] == {"consistency": 4, "pertinence": 0} and details["stopped"] == exam["stopped"]
        assert store.scalar("SELECT count(*) FROM panel_votes WHERE judge = 'jx'") == 0
        run_panel(store, settings, None, **UNSCORED, judge_names=["jx", "length", "overlap"])
        assert len(biased.chat_requests) == asked  # the rerun reads its cached answers

"""Typed decisions (``/v1/systemone``): the real server on a tiny Llama and its cache; bad replies from a fake."""

from __future__ import annotations

import json
import re
import threading
from collections import deque
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from grebench.llm import (
    ChatRequest,
    DecisionRequest,
    LLMClient,
    LocalEndpointError,
    local_endpoints,
)
from grebench.settings import Settings, load_settings
from grebench.store import Store, open_store
from tests.fakes._loopback import LoopbackServer
from tests.scoring.tiny_llama import tiny_llama_dir  # noqa: F401

OPTIONS = (("one", "the first review"), ("two", "the second review"))


def _request(api_base: str, state: str = "Review one: clear and specific. Review two: vague.",
             endpoint_id: str | None = "local:tiny:float32", model: str = "openai/tiny") -> DecisionRequest:
    return DecisionRequest(model=model, api_base=api_base, state=state, question="better",
                           instructions="Which review is more useful to the authors?", options=OPTIONS,
                           purpose="judge-decision", prompt_version="decide-v1", endpoint_id=endpoint_id)


def _rows(store: Store) -> list[dict[str, Any]]:
    return store.rows("SELECT * FROM llm_calls ORDER BY generated_at")


@pytest.fixture(scope="module")
def served(tiny_llama_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:  # noqa: F811
    for module in ("torch", "transformers", "fastapi", "uvicorn"):
        pytest.importorskip(module)
    from grebench.runtime import LocalServer

    settings = load_settings(env={"GREBENCH_DATA_DIR": str(tmp_path_factory.mktemp("decide") / "data")})
    with LocalServer(tiny_llama_dir, settings) as server, local_endpoints([server.api_base]):
        yield server


def test_decisions_from_the_real_server_are_cached_whatever_the_port(served: Any, settings: Settings) -> None:
    store = open_store(None)
    s = settings.replace(bench_concurrency=2)
    model = f"openai/{served.model_id}"
    first = _request(served.api_base, model=model)
    other = _request(served.api_base, state="Review one: short. Review two: detailed and kind.", model=model)
    results = LLMClient(s, store).decide_many([first, other, first])
    assert [r.status for r in results] == ["ok"] * 3 and not any(r.cached for r in results)
    for r in results:
        assert r.probabilities is not None and set(r.probabilities) == {"one", "two"}
        assert abs(sum(r.probabilities.values()) - 1) < 1e-3
        assert r.choice == max(r.probabilities, key=lambda k: r.probabilities[k])  # type: ignore[index]
        assert r.probability == r.probabilities[r.choice] and r.tokens_in and r.attempts == 1  # type: ignore[index]
    assert results[0] is results[2]  # the same request twice is called once
    rows = _rows(store)
    assert len(rows) == 2 and {r["purpose"] for r in rows} == {"judge-decision"}
    by_key = {r["request_key"]: r for r in rows}
    row = by_key[first.cache_key()]
    assert row["status"] == "ok" and row["text"] == results[0].choice and row["api_base"] == "local:tiny:float32"
    assert json.loads(row["logprobs_json"]) == results[0].probabilities
    # another start of the server listens elsewhere: same key, served from the store without any call (a call to
    # that address would be refused: nothing listens there and it is not registered)
    moved = [_request("http://127.0.0.1:9/v1", model=model), _request("http://127.0.0.1:9/v1", state=other.state,
                                                                      model=model)]
    again = LLMClient(s, store).decide_many(moved)
    assert all(r.cached and r.ok for r in again) and [r.probabilities for r in again] == \
        [results[0].probabilities, results[1].probabilities]
    assert len(_rows(store)) == 2


def test_decisions_only_go_to_local_servers_grebench_started(settings: Settings) -> None:
    store = open_store(None)
    client = LLMClient(settings, store)
    with pytest.raises(LocalEndpointError, match="not a loopback address"):
        client.decide_many([_request("https://api.example.com/v1")])
    with pytest.raises(LocalEndpointError, match="not a model server grebench started"):
        client.decide_many([_request("http://127.0.0.1:9/v1")])
    with pytest.raises(LocalEndpointError, match="not a loopback address"), local_endpoints(["http://10.0.0.1:80"]):
        pass
    assert _rows(store) == []


def test_endpoint_id_keeps_a_call_key_stable_across_ports() -> None:
    def chat(api_base: str, endpoint_id: str | None) -> ChatRequest:
        return ChatRequest("openai/m", (("user", "hi"),), "review", "v1", api_base=api_base, endpoint_id=endpoint_id)

    assert chat("http://127.0.0.1:1/v1", "local:m:float32").cache_key() == \
        chat("http://127.0.0.1:2/v1", "local:m:float32").cache_key()
    assert chat("http://127.0.0.1:1/v1", "local:m:float32").cache_key() != \
        chat("http://127.0.0.1:1/v1", "local:m:bfloat16").cache_key()
    assert chat("http://127.0.0.1:1/v1", None).cache_key() != chat("http://127.0.0.1:2/v1", None).cache_key()
    assert chat("http://h/v1/", None).cache_key() == chat("http://h/v1", None).cache_key()
    # a decision without an endpoint name is keyed by its server, given with /v1 or without
    assert _request("http://127.0.0.1:5/v1", endpoint_id=None).cache_key() == \
        _request("http://127.0.0.1:5/", endpoint_id=None).cache_key() != \
        _request("http://127.0.0.1:6", endpoint_id=None).cache_key()


class _Scripted:
    """A loopback server answering ``/v1/systemone`` with scripted (status, body) replies, then the last one."""

    def __init__(self, *replies: tuple[int, Any]) -> None:
        self.replies = deque(replies)
        self.last = replies[-1]
        self.requests: list[dict[str, Any]] = []
        self.release = threading.Event()
        state = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                state.requests.append({"path": self.path, "body": json.loads(body)})
                status, payload = state.replies.popleft() if state.replies else state.last
                if status == 0:  # hang until the test ends
                    state.release.wait(30)
                    return
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = LoopbackServer(Handler, poll_interval=0.05)

    def __enter__(self) -> _Scripted:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.server.close()


def _answer(probabilities: Any, **extra: Any) -> dict[str, Any]:
    return {"model": "tiny", "answers": {"better": {"type": "choice", "choice": "one", "confidence": 0.2,
                                                    "probabilities": probabilities, **extra}},
            "usage": {"input_tokens": 42, "output_tokens": 0}}


@pytest.mark.parametrize(("reply", "error"), [
    (b"<html>oops</html>", "the decision reply is not JSON"),
    ({"detail": "nope"}, "the decision reply has no answers"),
    ({"answers": {"worse": {"probabilities": {"one": 0.5, "two": 0.5}}}},
     "no answer for question 'better' \\(answered: 'worse'\\)"),
    (_answer(None), "the answer to 'better' has no probabilities"),
    (_answer({"one": 0.5, "three": 0.5}), "names unknown option\\(s\\) 'three' \\(asked: one, two\\)"),
    (_answer({"one": 1.0}), "has no probability for option\\(s\\) 'two'"),
    (_answer({"one": 0.5, "two": 0.2}), "the probabilities of 'better' sum to 0.7, not 1"),
    (_answer({"one": "0.5", "two": 0.5}), "the probability of option 'one' is not a number in \\[0, 1\\]"),
    (_answer({"one": 1.5, "two": -0.5}), "the probability of option 'one' is not a number in \\[0, 1\\]"),
    (_answer({"one": 0.5, "two": 0.5}, choice="three"), "chose unknown option 'three'"),
])
def test_malformed_replies_fail_clearly_without_retry(reply: Any, error: str, settings: Settings) -> None:
    store = open_store(None)
    with _Scripted((200, reply)) as fake, local_endpoints([fake.server.base_url]):
        [result] = LLMClient(settings, store).decide_many([_request(fake.server.base_url + "/v1")])
    assert result.status == "failed" and result.probabilities is None and result.attempts == 1
    assert result.error is not None and re.search(error, result.error), result.error
    assert len(fake.requests) == 1 and fake.requests[0]["path"] == "/v1/systemone"
    [row] = _rows(store)
    assert row["status"] == "failed" and row["error"] == result.error


def test_the_request_body_is_a_system_one_choice_question(settings: Settings) -> None:
    with _Scripted((200, _answer({"one": 0.25, "two": 0.75}))) as fake, local_endpoints([fake.server.base_url]):
        [result] = LLMClient(settings).decide_many([_request(fake.server.base_url)])
    assert result.ok and result.choice == "two" and result.probability == 0.75 and result.tokens_in == 42
    assert fake.requests[0]["body"] == {
        "model": "tiny", "state": "Review one: clear and specific. Review two: vague.",
        "questions": {"better": {"type": "choice", "instructions": "Which review is more useful to the authors?",
                                 "criteria": {"one": "the first review", "two": "the second review"}}}}


def test_5xx_is_retried_with_backoff_and_a_later_success_replaces_the_failed_row(
        settings: Settings, no_backoff: list[float]) -> None:
    store = open_store(None)
    ok = (200, _answer({"one": 0.6, "two": 0.4}))
    s = settings.replace(llm_max_retries=1)
    with _Scripted((503, {"error": "busy"}), (500, {"error": "boom"}), (503, {"error": "busy"}), ok) as fake, \
            local_endpoints([fake.server.base_url]):
        request = _request(fake.server.base_url + "/v1")
        [failed] = LLMClient(s, store).decide_many([request])
        assert failed.status == "failed" and failed.attempts == 2 and "(after 2 attempts)" in (failed.error or "")
        assert failed.error is not None and failed.error.startswith("HTTP 500")
        [row] = _rows(store)
        assert row["status"] == "failed"
        [result] = LLMClient(s, store).decide_many([request])
        assert result.ok and result.attempts == 2 and result.choice == "one" and len(fake.requests) == 4
    assert len(no_backoff) == 2
    [row] = _rows(store)
    assert row["status"] == "ok" and json.loads(row["logprobs_json"]) == {"one": 0.6, "two": 0.4}
    [cached] = LLMClient(s, store).decide_many([request])
    assert cached.cached and cached.choice == "one" and len(fake.requests) == 4


def test_a_client_error_is_not_retried_and_a_hung_server_times_out(settings: Settings) -> None:
    with _Scripted((422, {"detail": [{"msg": "labels must be single tokens"}]})) as fake, \
            local_endpoints([fake.server.base_url]):
        [result] = LLMClient(settings).decide_many([_request(fake.server.base_url)])
    assert result.status == "failed" and result.attempts == 1 and len(fake.requests) == 1
    assert result.error is not None and result.error.startswith("HTTP 422") and "single tokens" in result.error
    with _Scripted((0, None)) as fake, local_endpoints([fake.server.base_url]):
        s = settings.replace(llm_timeout_s=0.5, llm_max_retries=0)
        [result] = LLMClient(s).decide_many([_request(fake.server.base_url)])
    assert result.status == "failed" and result.error == "timed out after 0.5 s (after 1 attempts)"


def test_a_local_endpoints_key_does_not_depend_on_where_its_checkpoint_lies() -> None:
    from grebench.llm import ChatRequest

    def decision(model: str, endpoint_id: str | None) -> DecisionRequest:
        return DecisionRequest(model=model, api_base="http://127.0.0.1:1234/v1", state="s", question="q",
                               instructions="i", options=(("one", "a"), ("two", "b")), purpose="judge-decision",
                               prompt_version="v", endpoint_id=endpoint_id)

    def chat(model: str, endpoint_id: str | None) -> ChatRequest:
        return ChatRequest(model=model, messages=(("user", "hi"),), purpose="review", prompt_version="v",
                           api_base="http://127.0.0.1:1234/v1", endpoint_id=endpoint_id)

    # the data dir given as a relative path in one run and an absolute one in the next: the same endpoint
    for make in (decision, chat):
        assert make("openai/grebench-data/models/m", "local:m:bfloat16").cache_key() == \
            make("openai/tmp/x/grebench-data/models/m", "local:m:bfloat16").cache_key()
        assert make("openai/a", "local:m:bfloat16").cache_key() != make("openai/a", "local:m:float32").cache_key()
        assert make("openai/a", None).cache_key() != make("openai/b", None).cache_key()

"""The streaming dispatcher against stub vLLM servers (tests/fakes/stub_lm_servers.py), driven by observed progress.

Per-server cap, a paper's requests on one server, failover when a server dies mid-run (every request answered
once), a non-retryable answer failing the run after the answers already delivered, and a stop ending the run.
Nothing here waits a fixed time: runs end by themselves, kills and stops are triggered from ``on_result``.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from grebench import stop
from grebench.dispatch import Dispatcher, DispatchError
from tests.fakes.stub_lm_servers import StubServers, token_logprob
from tests.scoring.tiny_llama import sample_requests, tiny_llama_dir  # noqa: F401

Prompt = list[int]


@pytest.fixture(autouse=True)
def _reset_stop() -> Iterator[None]:
    yield
    stop.reset()


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=30.0, limits=httpx.Limits(max_connections=200, max_keepalive_connections=200)) as c:
        yield c


def vllm_call(client: httpx.Client) -> Callable[[str, Prompt], float]:
    """What the vLLM estimator does with one request: token-id prompt, prompt log-probs, the prompt tokens' sum."""
    def call(url: str, ids: Prompt) -> float:
        resp = client.post(url + "/v1/completions", json={"model": "stub-lm", "prompt": ids, "max_tokens": 1,
                                                          "temperature": 0.0, "prompt_logprobs": 0})
        resp.raise_for_status()
        plp = resp.json()["choices"][0]["prompt_logprobs"]
        return sum(plp[j][str(ids[j])]["logprob"] for j in range(1, len(ids)))

    return call


def expected(ids: Prompt) -> float:
    return sum(token_logprob(t) for t in ids[1:])


def paper_requests(n_papers: int, refs: int = 2, cands: int = 2, prefix: int = 48, cand: int = 32,
                   target: int = 24) -> tuple[list[Prompt], list[str], dict[str, Prompt]]:
    """GEM-shaped token-id prompts: per paper a shared prefix (system + synopsis), then a candidate (or none: the
    marginal), then a reference; the payloads, their paper keys and each paper's prefix."""
    prompts, keys, prefixes = [], [], {}
    for p in range(n_papers):
        head = [1_000_000 + p * 1000 + i for i in range(prefix)]
        prefixes[f"p{p}"] = head
        for r in range(refs):
            ref = [2_000_000 + p * 1000 + r * 100 + i for i in range(target)]
            for c in range(cands + 1):
                first = [3_000_000 + p * 1000 + c * 100 + i for i in range(cand)] if c else [7]
                prompts.append(head + first + ref)
                keys.append(f"p{p}")
    return prompts, keys, prefixes


def test_cap_respected_and_a_paper_stays_on_one_server(client: httpx.Client) -> None:
    prompts, keys, prefixes = paper_requests(18)
    # 18 papers x 6 requests of ~100 tokens at 10,000 tokens/s per server (~10 ms each): a server's two slots overlap
    with StubServers(3, rate=10_000.0, prefix_cache=True) as stubs:
        stubs.register_papers(prefixes)
        d: Dispatcher[Prompt, float] = Dispatcher(stubs.urls, vllm_call(client), per_server=2)
        got: list[int] = []
        answers = d.run(prompts, keys, [len(p) for p in prompts], on_result=lambda i, _a: got.append(i))
        st = stubs.stats()
    assert answers == pytest.approx([expected(p) for p in prompts])
    assert sorted(got) == list(range(len(prompts)))
    per_server = [s["max_concurrent"] for s in st["servers"]]
    assert max(per_server) == 2, per_server  # the cap is reached, never passed
    assert max(s.max_in_flight for s in d.stats.servers) == 2
    seen: dict[str, list[int]] = {}
    for s in st["servers"]:
        for paper in s["papers"]:
            seen.setdefault(paper, []).append(s["index"])
    assert {k: len(v) for k, v in seen.items()} == {k: 1 for k in prefixes}, seen
    assert all(s["answered"] > 0 for s in st["servers"])  # placement spreads papers
    assert st["answered"] == len(prompts) and st["answered_more_than_once"] == 0
    assert all(s["unknown_prompts"] == 0 for s in st["servers"])


def test_round_robin_scatters_a_paper_and_its_prefix_is_computed_again(client: httpx.Client) -> None:
    prompts, keys, prefixes = paper_requests(6)
    ratios = {}
    for routing in ("paper", "round-robin"):
        with StubServers(3, rate=400_000.0, prefix_cache=True, prompt_logprobs_cache=True) as stubs:
            stubs.register_papers(prefixes)
            Dispatcher(stubs.urls, vllm_call(client), per_server=2, routing=routing).run(prompts, keys)
            st = stubs.stats()
        ratios[routing] = st["tokens_computed"] / st["tokens_requested"]
        if routing == "round-robin":
            assert all(len(s["papers"]) == 6 for s in st["servers"])
    assert ratios["paper"] < ratios["round-robin"]


@pytest.mark.parametrize("probe", [True, False], ids=["probe", "no-probe"])
def test_a_server_that_dies_mid_run_is_skipped_and_every_request_answered_once(client: httpx.Client,
                                                                              probe: bool) -> None:
    prompts, keys, prefixes = paper_requests(24)
    with StubServers(3, rate=20_000.0, prefix_cache=True) as stubs:
        stubs.register_papers(prefixes)

        def health(url: str) -> bool:
            return client.get(url + "/health").status_code == 200

        d: Dispatcher[Prompt, float] = Dispatcher(stubs.urls, vllm_call(client), per_server=4, backoff_s=0.05,
                                                  max_backoff_s=0.2, probe=health if probe else None)
        got: list[int] = []
        killed: list[dict] = []

        def on_result(i: int, _answer: float) -> None:
            got.append(i)
            if len(got) == len(prompts) // 4 and not killed:  # a quarter done: server 1 has work queued and in flight
                before = stubs.stats()["servers"][1]
                stubs.kill(1)
                killed.append(before)

        answers = d.run(prompts, keys, [len(p) for p in prompts], on_result=on_result)
        st = stubs.stats()
    assert killed, "the kill never happened"
    assert answers == pytest.approx([expected(p) for p in prompts])
    assert sorted(got) == list(range(len(prompts)))  # each answer handed over once
    assert st["answered"] == len(prompts) and st["answered_more_than_once"] == 0  # each prompt answered once
    assert st["servers"][1]["answered"] < sum(1 for _ in prompts) // 3
    assert d.stats.servers[1].down_events >= 1 and d.stats.moved > 0
    assert sum(s.answered for s in d.stats.servers) == len(prompts)
    # the others did server 1's share after the kill
    assert st["servers"][0]["answered"] + st["servers"][2]["answered"] > 2 * len(prompts) // 3


def test_a_server_dead_for_a_long_run_fails_no_request(client: httpx.Client) -> None:
    """A server that stays down while the others work for many of its back-offs (a season's hours against
    ``max_backoff_s`` = 60 s, here 0.5 s against 0.02 s): the requests it takes each time its back-off ends must not
    use up their attempts, or the run fails although two servers are up.

    The dispatcher as first written failed here: without a ``probe`` (ServerEstimator gives none), each time the
    dead server's back-off ended, its ``per_server`` workers each took a request (stealing the last unstarted paper
    of the most loaded server), failed, and charged an attempt to that request; the paper was placed again at the end
    of a queue and stolen again at the next back-off, so the same requests reached ``max_attempts`` and the run
    failed (with ServerEstimator's defaults, 17 s into a run with one of three stub servers dead)."""
    prompts, keys, _ = paper_requests(24)
    with StubServers(3, rate=20_000.0, prefix_cache=True) as stubs:
        stubs.kill(1)
        d: Dispatcher[Prompt, float] = Dispatcher(stubs.urls, vllm_call(client), per_server=4, backoff_s=0.01,
                                                  max_backoff_s=0.02)
        answers = d.run(prompts, keys, [len(p) for p in prompts])
        st = stubs.stats()
    assert answers == pytest.approx([expected(p) for p in prompts])
    assert st["answered"] == len(prompts) and st["answered_more_than_once"] == 0


def test_a_non_retryable_answer_fails_the_run_after_the_delivered_answers(client: httpx.Client) -> None:
    prompts, keys, _ = paper_requests(4)
    with StubServers(1, rate=1_000_000.0) as stubs:
        stubs.fail(0, status=400, after=5)
        d: Dispatcher[Prompt, float] = Dispatcher(stubs.urls, vllm_call(client), per_server=1)
        delivered: dict[int, float] = {}
        with pytest.raises(DispatchError, match=r"request \d+ \(group 'p\d+'\) failed after 1 attempt.*400"):
            d.run(prompts, keys, on_result=delivered.__setitem__)
        st = stubs.stats()
    assert len(delivered) == 5 == st["answered"]
    assert all(v == pytest.approx(expected(prompts[i])) for i, v in delivered.items())


def test_a_stop_ends_the_run_promptly(client: httpx.Client) -> None:
    prompts, keys, _ = paper_requests(8, refs=3, cands=4)
    total_tokens = sum(len(p) for p in prompts)
    rate = 1_000.0  # the whole run would take total_tokens / (2 * rate) > 4 s
    assert total_tokens / (2 * rate) > 4.0
    with StubServers(2, rate=rate) as stubs:
        d: Dispatcher[Prompt, float] = Dispatcher(stubs.urls, vllm_call(client), per_server=2)
        got: list[int] = []
        stopped_at: list[float] = []

        def on_result(i: int, _answer: float) -> None:
            got.append(i)
            if len(got) == 2:
                stopped_at.append(time.monotonic())
                threading.Thread(target=stop.request_stop).start()  # as a signal handler would, from elsewhere

        with pytest.raises(stop.Interrupted):
            d.run(prompts, keys, [len(p) for p in prompts], on_result=on_result)
        took = time.monotonic() - stopped_at[0]
        answered = stubs.stats()["answered"]
    assert took < 2 * stop.POLL_S + 0.5, took
    assert len(got) < len(prompts) and answered < len(prompts)


@pytest.mark.parametrize("kind", ["sglang", "vllm"])
def test_the_server_estimator_batches_a_papers_requests_within_the_cap(kind: str,
                                                                       tiny_llama_dir: Path) -> None:  # noqa: F811
    """``estimator_batch``: up to that many requests of one paper in one HTTP call (SGLang's and vLLM's list of
    prompts), at most ``concurrency`` requests in flight a server, each paper on one server, and the same answers
    as one request a call."""
    from transformers import AutoTokenizer

    from grebench.scoring.estimators._server import ServerEstimator
    from grebench.scoring.estimators._tokenize import RequestTokenizer

    reqs = sample_requests(n_papers=4, n_candidates=2)
    enc = RequestTokenizer(AutoTokenizer.from_pretrained(tiny_llama_dir))
    per_paper = Counter(r.paper_id for r in reqs)
    prefixes = {r.paper_id: list(enc(r).prefix) for r in reqs}
    got = {}
    for batch in (1, 4):
        # the verbs listed first among vLLM's top log-probs: no verb is asked for on its own, so calls are counted
        with StubServers(2, rate=1e9, prefix_cache=True, top_ids=enc.verb_ids) as stubs:
            stubs.register_papers(prefixes)
            est = ServerEstimator(kind, stubs.urls, tokenizer=str(tiny_llama_dir), concurrency=6, batch=batch)
            try:
                got[batch] = est.logprobs(reqs)
            finally:
                est.close()
            st = stubs.stats()
        assert st["answered"] == len(reqs) and st["answered_more_than_once"] == 0
        assert max(s["max_concurrent"] for s in st["servers"]) <= 6  # prompts in flight, a batch counting each
        served = [p for s in st["servers"] for p in s["papers"]]
        assert sorted(served) == sorted(per_paper)  # each paper on one server
        # vLLM: a call per number of top log-probs asked for (requests with a verb choice and without)
        calls = sum(-(-n // batch) for n in per_paper.values())
        assert st["calls"] == calls if kind == "sglang" else calls <= st["calls"] <= 2 * calls
    assert got[1] == got[4]

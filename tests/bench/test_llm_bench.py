"""LLM candidates through the real litellm against the fake server: resumable, cached, hostile endpoints."""

from __future__ import annotations

import logging

import pytest

from grebench.bench import load_candidates, run_bench
from grebench.settings import Settings
from grebench.store import Store
from tests.bench.conftest import KEY_ENV, with_candidates
from tests.fakes.openai_server import FakeOpenAIServer


def _settings(settings: Settings, server: FakeOpenAIServer, **values: object) -> Settings:
    entry = {"name": "fake", "model": "openai/fake-model", "api_base": server.url, "api_key_env": KEY_ENV,
             "cutoff": "2019-01-01", "params": {"max_tokens": 500, "context_tokens": 4000}}
    base = {"llm_timeout_s": 10, "llm_max_retries": 0, "bench_concurrency": 2, **values}
    return with_candidates(settings, entry, **base)


def _run(store: Store, settings: Settings, names: list[str] | None = None) -> dict:
    run_id = store.start_run("bench", {})
    summary = run_bench(store, settings, run_id, names)
    summary["status"] = store.finish_run(run_id, summary)
    return summary


def _all_text(store: Store) -> str:
    parts = []
    for table in ("llm_calls", "generations", "candidates", "run_failures", "runs"):
        cols = [r["column_name"] for r in store.rows(
            "SELECT column_name FROM information_schema.columns WHERE table_name = ? AND data_type = 'VARCHAR'",
            [table])]
        for row in store.con.execute(f"SELECT {', '.join(cols)} FROM {table}").fetchall():
            parts.extend(str(v) for v in row if v is not None)
    return "\n".join(parts)


def test_llm_reviews_are_generated_parsed_and_a_rerun_makes_no_calls(
        tiny_store: Store, settings: Settings, fake_llm: FakeOpenAIServer, canary_key: str,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    s = _settings(settings, fake_llm)
    first = _run(tiny_store, s, ["fake"])
    assert first["calls_made"] == 4 and first["failed"] == 0 and first["status"] == "ok"
    assert first["candidates"] == [{"name": "fake", "kind": "llm", "generations": 4}]
    assert [p["paper_id"] for p in first["skipped_papers"]] == ["paper4"]
    rows = tiny_store.rows("SELECT * FROM generations WHERE candidate = 'fake'")
    assert all(r["parse_ok"] and r["status"] == "ok" and r["prompt_version"] == "review-v2" for r in rows)
    assert all('"paper_input": "title_abstract"' in r["flags_json"] for r in rows)
    assert all(r["tokens_in"] and r["tokens_out"] and r["latency_s"] is not None and r["attempts"] == 1 for r in rows)
    prompt = fake_llm.chat_requests[0]["body"]["messages"][0]["content"]
    assert "<weaknesses>" in prompt and "Abstract: We study problem" in prompt
    assert fake_llm.chat_requests[0]["body"]["max_tokens"] == 500
    second = _run(tiny_store, s, ["fake"])
    assert second["calls_made"] == 0 and second["cached"] == 4 and len(fake_llm.chat_requests) == 4
    assert canary_key not in _all_text(tiny_store) and canary_key not in caplog.text


def test_candidate_with_stream_false_gets_reviews_from_an_endpoint_that_cannot_stream(
        tiny_store: Store, settings: Settings, canary_key: str) -> None:
    with FakeOpenAIServer(streams=False) as server:
        s = _settings(settings, server)
        entry = {**s.tables["candidates"][0], "stream": False}
        s = with_candidates(s, entry)
        assert load_candidates(s)[-1].stream is False
        first = _run(tiny_store, s, ["fake"])
        assert first["calls_made"] == 4 and first["failed"] == 0 and first["status"] == "ok"
        assert all(not r["body"].get("stream") for r in server.chat_requests) and len(server.chat_requests) == 4
        rows = tiny_store.rows("SELECT * FROM generations WHERE candidate = 'fake'")
        assert len(rows) == 4 and all(r["status"] == "ok" and r["parse_ok"] for r in rows)
        assert all('"stream"' not in r["params_json"] for r in rows)  # not a model parameter: ids stay the same


def test_failed_generations_are_recorded_and_retried_on_later_runs_up_to_a_bound(
        tiny_store: Store, settings: Settings, fake_llm: FakeOpenAIServer, canary_key: str) -> None:
    s = _settings(settings, fake_llm)
    fake_llm.mode = "http500"
    failed = _run(tiny_store, s, ["fake"])
    assert failed["failed"] == 4 and failed["status"] == "failed" and failed["calls_made"] == 4
    errors = {r["error"] for r in tiny_store.rows("SELECT error FROM generations WHERE candidate = 'fake'")}
    assert len(errors) == 1 and "HTTP 500" in errors.pop()
    assert len(tiny_store.rows("SELECT * FROM run_failures WHERE stage = 'bench'")) == 4
    fake_llm.mode = "ok"
    fake_llm.script("empty")  # one paper fails again, differently
    healed = _run(tiny_store, s, ["fake"])
    assert healed["calls_made"] == 4 and healed["failed"] == 1
    assert healed["candidates"][0]["generations"] == 3
    fake_llm.mode = "whitespace"
    _run(tiny_store, s, ["fake"])  # third try of the stubborn one
    calls_before = len(fake_llm.chat_requests)
    gave_up = _run(tiny_store, s, ["fake"])
    assert gave_up["gave_up"] == 1 and gave_up["calls_made"] == 0 and len(fake_llm.chat_requests) == calls_before
    row = tiny_store.rows("SELECT attempts, error FROM generations WHERE status = 'failed'")[0]
    assert row["attempts"] == 3 and "whitespace" in row["error"]


@pytest.mark.parametrize(("mode", "check"), [
    ("ignore_format", "parse"),
    ("huge", "truncated"),
    ("hang", "timeout"),
    ("ratelimit", "retry_after"),
    ("html", "html"),
])
def test_hostile_endpoint_is_recorded_and_the_run_goes_on(
        tiny_store: Store, settings: Settings, fake_llm: FakeOpenAIServer, canary_key: str, mode: str,
        check: str) -> None:
    s = _settings(settings, fake_llm, llm_timeout_s=1, llm_max_response_chars=5000)
    fake_llm.script(mode)
    summary = _run(tiny_store, s, ["fake", "generic"])
    rows = tiny_store.rows("SELECT * FROM generations WHERE candidate = 'fake' ORDER BY status")
    assert len(rows) == 4 and summary["candidates"][1]["generations"] == 4  # the others went on
    odd = next(r for r in rows if r["request_key"] == fake_llm_first_key(tiny_store, fake_llm))
    if check == "parse":
        assert odd["status"] == "ok" and odd["parse_ok"] is False and "missing_sections" in odd["flags_json"]
        assert odd["text"].startswith("This is an interesting paper")
    elif check == "truncated":
        assert odd["status"] == "ok" and len(odd["text"]) == 5000 and '"output_truncated": true' in odd["flags_json"]
    else:
        expected = {"timeout": "timed out after 1 s", "retry_after": "Retry-After 1e+06 s",
                    "html": "HTML instead of JSON"}[check]
        assert odd["status"] == "failed" and expected in odd["error"], odd["error"]
        assert summary["failed"] == 1 and summary["status"] == "failed"


def fake_llm_first_key(store: Store, server: FakeOpenAIServer) -> str:
    """The request key of the call the server answered first (the scripted hostile one)."""
    first = server.chat_requests[0]["body"]["messages"][0]["content"]
    for row in store.rows("SELECT g.request_key, g.paper_id, p.title FROM generations g JOIN papers p USING "
                          "(paper_id) WHERE g.candidate = 'fake'"):
        if f"Title: {row['title']}\n" in first:
            return str(row["request_key"])
    raise AssertionError("no generation matches the first request")


def test_llm_controls_run_with_control_model(tiny_store: Store, settings: Settings, fake_llm: FakeOpenAIServer,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_BASE", fake_llm.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-used")
    s = settings.replace(control_model="openai/fake-model", llm_timeout_s=10, llm_max_retries=0)
    summary = _run(tiny_store, s)
    counts = {c["name"]: c["generations"] for c in summary["candidates"]}
    assert counts["rephrase"] == counts["deletion-completion"] == counts["abstract-only"] == 4
    assert summary["calls_made"] == 12
    prompts = [r["body"]["messages"][0]["content"] for r in fake_llm.chat_requests]
    assert sum("[MISSING]" in p for p in prompts) == 4 and sum("Rewrite the peer review" in p for p in prompts) == 4


def test_generating_again_what_is_made_serves_no_model(
        tiny_store: Store, settings: Settings, fake_llm: FakeOpenAIServer, canary_key: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The scheduler's generate job runs after every poll (each simulated day of a replay): when every review of
    its papers is made, it pulls, locks and serves nothing (a local server took 20 s and 4 GB to start per day)."""
    from contextlib import contextmanager

    import grebench.bench._run as bench_run
    from grebench.bench import generate_for

    served: list[list[str]] = []
    real = bench_run.candidate_endpoints

    @contextmanager
    def counting(cands, s):  # type: ignore[no-untyped-def]
        served.append([c.name for c in cands])
        with real(cands, s) as out:
            yield out

    monkeypatch.setattr(bench_run, "candidate_endpoints", counting)
    s = _settings(settings, fake_llm)
    fake = [c for c in load_candidates(s) if c.name == "fake"]
    papers = ["paper0", "paper1", "paper4"]  # paper4 has no split: a sealed generation's case
    first = generate_for(tiny_store, s, None, fake, papers)
    assert first["calls_made"] == 3 and served == [["fake"]]
    again = generate_for(tiny_store, s, None, fake, papers)
    assert again["calls_made"] == 0 and again["cached"] == 3 and served == [["fake"]]
    assert generate_for(tiny_store, s, None, fake, [*papers, "paper2"])["calls_made"] == 1  # a new paper: served
    assert served == [["fake"], ["fake"]] and len(fake_llm.chat_requests) == 4

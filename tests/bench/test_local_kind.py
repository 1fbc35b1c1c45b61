"""``kind = "local"``: its table, and a tiny local Llama served by transformers serve through the whole bench."""

from __future__ import annotations

import json
import socket
from datetime import date
from pathlib import Path

import pytest

from grebench.bench import CANDIDATE_KINDS, CandidateError, load_candidates, run_bench
from grebench.models import catalogue_entry
from grebench.settings import Settings
from grebench.store import Store
from tests.bench.conftest import with_candidates
from tests.scoring.tiny_llama import tiny_llama_dir  # noqa: F401


def _local(**extra: object) -> dict:
    return {"name": "tiny", "kind": "local", "model": "/models/tiny", "cutoff": "2019-01-01", **extra}


def test_a_local_candidate_has_fixed_recorded_generation_settings(settings: Settings) -> None:
    assert "local" in CANDIDATE_KINDS.names()
    [c] = [c for c in load_candidates(with_candidates(settings, _local(released="2024-11-01"))) if c.name == "tiny"]
    assert c.kind == "local" and c.model == "/models/tiny" and c.api_base is None and c.needs_llm
    assert c.cutoff == date(2019, 1, 1) and c.released == date(2024, 11, 1)
    assert c.params == {"temperature": 0, "seed": 0, "max_tokens": 512, "context_tokens": 8192}
    [c] = [c for c in load_candidates(with_candidates(settings, _local(
        params={"max_tokens": 64, "context_tokens": 2048, "temperature": 0}))) if c.name == "tiny"]
    assert c.params == {"temperature": 0, "seed": 0, "max_tokens": 64, "context_tokens": 2048}
    # a catalogue model's dates come from the catalogue unless the table gives them
    entry = catalogue_entry("smollm2-135m")
    [c] = [c for c in load_candidates(with_candidates(settings, {"name": "tiny", "kind": "local",
                                                                 "model": "smollm2-135m"})) if c.name == "tiny"]
    assert (c.cutoff, c.released) == (entry.cutoff, entry.released)


@pytest.mark.parametrize(("entry", "error"), [
    (_local(params={"temperature": 0.7}), "params.temperature of a local model is fixed at 0"),
    (_local(params={"top_p": 0.9}), "params.top_p: a local model's generation is fixed"),
    (_local(params={"max_tokens": 9000}), "params.max_tokens must be smaller than params.context_tokens"),
    (_local(params={"max_tokens": True}), "params.max_tokens must be a positive integer"),
    (_local(api_base="http://127.0.0.1:8000/v1"), "api_base: a local model is served by grebench itself"),
    (_local(quantization="4bit"), "unknown key\\(s\\) quantization"),
    (_local(model=" "), "missing model \\(a catalogue name"),
    ({k: v for k, v in _local().items() if k != "cutoff"}, "missing cutoff .*a local checkpoint"),
    ({k: v for k, v in _local(model="nosuch-model").items() if k != "cutoff"},
     "missing cutoff .*the catalogue gives none for 'nosuch-model'"),
])
def test_a_bad_local_table_is_refused_naming_the_candidate(entry: dict, error: str, settings: Settings) -> None:
    with pytest.raises(CandidateError, match=f"candidate 'tiny': {error}"):
        load_candidates(with_candidates(settings, entry))


def test_a_missing_checkpoint_is_refused_before_any_server_starts(tiny_store: Store, settings: Settings,
                                                                 tmp_path: Path) -> None:
    s = with_candidates(settings, _local(model=str(tmp_path / "nowhere")))
    with pytest.raises(CandidateError, match=r"candidate 'tiny': .*nowhere' is neither a built-in evaluation LM "
                                             r".* nor a local checkpoint directory"):
        run_bench(tiny_store, s, None, ["tiny"])


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in socks]
    finally:
        for sock in socks:
            sock.close()


def test_a_local_model_writes_reviews_through_the_bench_and_a_rerun_on_another_port_makes_no_call(
        tiny_store: Store, settings: Settings, tiny_llama_dir: Path) -> None:  # noqa: F811
    for module in ("torch", "transformers", "fastapi", "uvicorn"):
        pytest.importorskip(module)
    from tests.runtime.served import port_free

    entry = _local(model=str(tiny_llama_dir), params={"max_tokens": 24, "context_tokens": 4096})
    first_port, second_port = _free_ports(2)
    papers = ["paper0", "paper1"]
    base = with_candidates(settings, entry, bench_concurrency=2, llm_max_retries=0, hf_dtype="float32",
                           hf_device="cpu", local_generation="server")

    first = run_bench(tiny_store, base.replace(local_server_port=first_port), None, ["tiny"], paper_ids=papers)
    assert first["calls_made"] == 2 and first["failed"] == 0
    assert first["candidates"] == [{"name": "tiny", "kind": "local", "generations": 2}]
    assert port_free(first_port)  # the server stopped with the stage
    rows = tiny_store.rows("SELECT * FROM generations WHERE candidate = 'tiny' ORDER BY paper_id")
    assert [r["paper_id"] for r in rows] == papers and all(r["status"] == "ok" and r["text"] for r in rows)
    assert all(json.loads(r["params_json"]) == {"temperature": 0, "seed": 0, "max_tokens": 24,
                                                "context_tokens": 4096} for r in rows)
    assert all(r["tokens_in"] and r["tokens_out"] and r["latency_s"] is not None and r["request_key"]
               for r in rows)
    calls = tiny_store.rows("SELECT * FROM llm_calls WHERE purpose = 'review'")
    assert len(calls) == 2 and all(c["status"] == "ok" for c in calls)
    assert {c["api_base"] for c in calls} == {f"local:{tiny_llama_dir}:float32"}  # the endpoint, not the port
    assert {c["model"] for c in calls} == {f"openai/{tiny_llama_dir}"}
    assert json.loads(calls[0]["params_json"]) == {"temperature": 0, "seed": 0, "max_tokens": 24,
                                                   "context_tokens": 4096}

    # a second run starts the server on another port; its calls are keyed by the endpoint, not the port, so with
    # the generations gone it finds every call in llm_calls and makes none
    tiny_store.con.execute("DELETE FROM generations WHERE candidate = 'tiny'")
    second = run_bench(tiny_store, base.replace(local_server_port=second_port), None, ["tiny"], paper_ids=papers)
    assert second["calls_made"] == 0 and second["cached"] == 2 and second["failed"] == 0
    assert [r["text"] for r in tiny_store.rows(
        "SELECT text FROM generations WHERE candidate = 'tiny' ORDER BY paper_id")] == [r["text"] for r in rows]
    assert port_free(second_port) and len(tiny_store.rows("SELECT * FROM llm_calls")) == 2

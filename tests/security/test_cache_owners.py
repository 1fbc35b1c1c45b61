"""Issue 31 §3: one candidate's cached replies never serve another, so a seal cannot be inherited.

The call cache used to be keyed by the request alone: a keyless submission naming the same base URL and model as a
keyed one made no call, received the keyed one's reviews and their call times, and was marked sealed on papers whose
reviews were public before it was even submitted.  Here the attack runs through the real queue job (the scheduler's
``queue`` kind) against a fake OpenAI-compatible endpoint on loopback that counts the calls it gets; operator
candidates are run through ``grebench bench``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from cryptography.fernet import Fernet

from grebench.bench import run_bench
from grebench.cli._main import main
from grebench.endpoints import KeyVault
from grebench.llm import ChatRequest, LLMClient
from grebench.scheduler import SchedulerService
from grebench.settings import load_settings
from grebench.site._app import queue_path
from grebench.store import Store, open_store, utcnow
from grebench.store._snapshot import export_snapshot, import_snapshot
from grebench.submissions import SubmissionForm, SubmissionQueue
from tests.bench.conftest import tiny_papers
from tests.conftest import FAST_ENV
from tests.fakes.openai_server import FakeOpenAIServer
from tests.security.conftest import CANARY, RESOLVER, OutboundGuard
from tests.store.test_snapshot import scored  # noqa: F401  (fixture)

FUTURE = datetime(2999, 1, 1)  # the papers' reviews are not public yet when the first submission is evaluated


@pytest.fixture
def endpoint() -> Iterator[FakeOpenAIServer]:
    """The submitted models' endpoint (one server: the same base URL for both submissions)."""
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture
def world(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A store with the tiny papers (reviews public in 2999) and their splits; the queue and an encrypting vault."""
    config = tmp_path / "grebench.toml"
    # the fake endpoint is on 127.0.0.1, which the operator of this test allows (the app, never started, is 127.0.0.2)
    config.write_text('app_host = "127.0.0.2"\nsubmission_http_allowlist = "models.example.test"\n'
                      'submission_private_allowlist = "127.0.0.1/32"\nllm_max_retries = 0\nllm_timeout_s = 30\n')
    settings = load_settings(config, env={**FAST_ENV, "GREBENCH_DATA_DIR": str(tmp_path / "data")})
    store = open_store(settings.db_path)
    with store.transaction():
        for paper in tiny_papers(public_at=FUTURE):
            store.upsert_paper(paper)
    run_bench(store, settings, store.start_run("bench", {}))  # the human baseline's splits: the papers to review
    vault = KeyVault(env={"GREBENCH_SECRET_KEY": Fernet.generate_key().decode()})
    queue = SubmissionQueue(queue_path(settings))
    service = SchedulerService(settings, store, vault=vault, queue=queue, kinds=["queue"], resolver=RESOLVER)
    yield {"settings": settings, "store": store, "vault": vault, "queue": queue, "service": service}
    store.close()


def _submit(world: dict[str, Any], **fields: str) -> str:
    base = {"released": "2019-09-01", "cutoff": "2019-06-01", "contact": "owner@example.org"}
    result = world["queue"].submit(SubmissionForm(**{**base, **fields}), world["settings"], world["vault"], RESOLVER)
    assert result["ok"], result
    return str(result["id"])


def _generations(store: Store, name: str) -> list[dict[str, Any]]:
    return store.rows("SELECT paper_id, generated_at, sealed, request_key, text FROM generations "
                      "WHERE candidate = ? AND status = 'ok' ORDER BY paper_id", [name])


def test_a_later_keyless_submission_makes_its_own_calls_and_inherits_no_seal(
        world: dict[str, Any], endpoint: FakeOpenAIServer, guard: OutboundGuard) -> None:
    guard.allow("127.0.0.1", endpoint.port)
    store: Store = world["store"]
    url = f"http://models.example.test:{endpoint.port}/v1"
    _submit(world, model_name="Keyed-Model", base_url=url, api_key=CANARY)
    first = world["service"].run_job("queue")["summary"]
    assert [(e["ok"], e["calls_made"]) for e in first["evaluated"]] == [(True, 4)], first
    keyed = _generations(store, "Keyed-Model")
    assert len(keyed) == 4 and all(g["sealed"] for g in keyed)  # written before the reviews were public
    assert len(endpoint.chat_requests) == 4

    public_at = utcnow()  # the reviews go public; everything after this is not sealed
    store.con.execute("UPDATE papers SET reviews_public_at = ?", [public_at])
    # same base URL, same model id, same parameters, no key: the very same requests
    _submit(world, model_name="Keyless-Copy", model_string="openai/Keyed-Model", base_url=url)
    second = world["service"].run_job("queue")["summary"]
    assert [(e["ok"], e["calls_made"], e["cached"]) for e in second["evaluated"]] == [(True, 4, 0)], second
    assert len(endpoint.chat_requests) == 8  # the endpoint saw the second submission's own calls
    assert [c["headers"].get("Authorization") for c in endpoint.chat_requests[4:]] != [f"Bearer {CANARY}"] * 4
    copy = _generations(store, "Keyless-Copy")
    assert len(copy) == 4
    assert all(g["generated_at"] >= public_at for g in copy)  # its own calls' times, after the reviews went public
    assert not any(g["sealed"] for g in copy)
    assert not {g["request_key"] for g in copy} & {g["request_key"] for g in keyed}
    clean = store.rows("SELECT clean FROM clean_pairs WHERE candidate = 'Keyless-Copy'")
    assert clean and not any(r["clean"] for r in clean)  # unvouched: only sealed reviews would count, none is
    # the scopes are the submissions' own, and no form of the key is stored
    scopes = {r["cache_scope"] for r in store.rows("SELECT cache_scope FROM llm_calls")}
    assert len(scopes) == 2 and all(s.startswith("owner:submission:") for s in scopes)
    dump = json.dumps(store.rows("SELECT * FROM llm_calls"), default=str)
    assert CANARY not in dump and hashlib.sha256(CANARY.encode()).hexdigest() not in dump


def _bench(data: Path, config: Path, env: dict[str, str], name: str) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["--config", str(config), "--data-dir", str(data), "bench", "--json",
                                       "--candidate", name], env={**FAST_ENV, **env})
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.stdout))


@pytest.mark.parametrize(("key_b", "calls_b"), [("sk-same-operator-key", 0), ("sk-another-operator-key", 4)])
def test_operator_candidates_share_calls_only_with_the_same_endpoint_and_key(
        tmp_path: Path, endpoint: FakeOpenAIServer, key_b: str, calls_b: int) -> None:
    data = tmp_path / "data"
    store = open_store(data / "grebench.duckdb")
    with store.transaction():
        for paper in tiny_papers():
            store.upsert_paper(paper)
    store.close()
    config = tmp_path / "grebench.toml"
    table = (f'model = "openai/op-model"\napi_base = "{endpoint.url}"\ncutoff = "2019-01-01"\n'
             'params = { max_tokens = 300, context_tokens = 4000 }\n')
    config.write_text("llm_max_retries = 0\n"
                      f'[[candidates]]\nname = "op-a"\napi_key_env = "OP_KEY_A"\n{table}'
                      f'[[candidates]]\nname = "op-b"\napi_key_env = "OP_KEY_B"\n{table}')
    env = {"OP_KEY_A": "sk-same-operator-key", "OP_KEY_B": key_b}
    first = _bench(data, config, env, "op-a")
    assert first["calls_made"] == 4 and len(endpoint.chat_requests) == 4
    second = _bench(data, config, env, "op-b")
    assert second["calls_made"] == calls_b and second["cached"] == 4 - calls_b, second
    assert len(endpoint.chat_requests) == 4 + calls_b
    assert {c["headers"]["Authorization"] for c in endpoint.chat_requests[4:]} <= {f"Bearer {key_b}"}
    again = _bench(data, config, env, "op-b")  # a rerun repeats nothing
    assert again["calls_made"] == 0 and len(endpoint.chat_requests) == 4 + calls_b
    store = open_store(data / "grebench.duckdb")
    try:
        scopes = {r["cache_scope"] for r in store.rows("SELECT cache_scope FROM llm_calls")}
        dump = json.dumps(store.rows("SELECT * FROM llm_calls"), default=str)
    finally:
        store.close()
    assert len(scopes) == (1 if calls_b == 0 else 2) and all(s.startswith("credential:") for s in scopes)
    for key in set(env.values()):  # neither the key nor an unkeyed hash of it
        assert key not in dump and hashlib.sha256(key.encode()).hexdigest() not in dump


def test_a_call_imported_from_a_snapshot_never_serves_this_install(scored: Store, tmp_path: Path) -> None:  # noqa: F811
    """A snapshot's ``llm_calls`` rows (its generations' calls, written elsewhere) are kept for the record in a
    namespace no request here has: even in the keyless operator namespace (NULL in the file), a local model's request
    of this install does not receive another install's reply and its time."""
    request = ChatRequest("local:some-model", (("user", "Review paper0."),), "review", "review-v2",
                          api_base="http://127.0.0.1:9/v1", endpoint_id="local:some-model:bf16")
    scored.con.execute("INSERT INTO llm_calls (request_key, purpose, model, api_base, prompt_version, params_json, "
                       "messages_sha256, status, text, attempts, generated_at) VALUES (?, 'review', 'm', 'x', "
                       "'review-v2', '{}', 'x', 'ok', 'A planted review.', 1, TIMESTAMP '2000-01-01')",
                       [request.cache_key()])
    settings = load_settings(env={**FAST_ENV, "GREBENCH_DATA_DIR": str(tmp_path / "fresh")}).replace(llm_max_retries=0)
    assert LLMClient(settings, scored).complete(request).cached  # served where it was made
    scored.con.execute("UPDATE generations SET request_key = ? WHERE generation_id = (SELECT min(generation_id) "
                       "FROM generations WHERE paper_id = 'paper0')", [request.cache_key()])
    export_snapshot(scored, "test-cc-2019-conference", tmp_path / "snap")
    fresh = open_store(tmp_path / "fresh" / "grebench.duckdb")
    try:
        assert import_snapshot(fresh, tmp_path / "snap")["rows_added"]["llm_calls"] == 1
        result = LLMClient(settings, fresh).complete(request)
        assert not result.cached and result.text != "A planted review."  # a call of its own (nothing listens)
        assert fresh.rows("SELECT cache_scope, text FROM llm_calls") == [{"cache_scope": "snapshot",
                                                                          "text": "A planted review."}]  # kept
    finally:
        fresh.close()

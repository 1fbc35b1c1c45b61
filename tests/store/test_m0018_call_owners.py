"""Migration m0018 on a store the old call cache wrote: a review served from another submission's call is unsealed
and re-dated, its call is set aside, the counts are recorded; what the operator's candidates shared stays shared."""

from __future__ import annotations

import json
import logging
from datetime import datetime
from pathlib import Path

import duckdb
import pytest

from grebench.bench import reseal
from grebench.llm import ChatRequest
from grebench.llm._cache import lookup
from grebench.store import _migrate, open_store

PUBLIC = datetime(2026, 2, 1)  # the papers' reviews went public
URL = "http://models.example.test:8000/v1"


def _request(model: str, paper: str, scope: str | None = None) -> ChatRequest:
    return ChatRequest(model, (("user", f"Review {paper}."),), "review", "review-v2", api_base=URL, cache_scope=scope)


def _old_store(path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """What the request-keyed cache left: 'Copy' (submitted 1 March) got 'Keyed''s call of 2 January, sealed;
    operator candidates op-a and op-b shared a call; 'Solo' made its own.  Returns the legacy keys."""
    real = _migrate.all_migrations()
    monkeypatch.setattr(_migrate, "all_migrations", lambda: [m for m in real if m.number < 18])
    open_store(path).close()
    keys = {"shared": _request("openai/Keyed", "p0").cache_key(), "operator": _request("openai/op", "p0").cache_key(),
            "solo": _request("openai/Solo", "p0").cache_key()}
    con = duckdb.connect(str(path))
    con.execute("INSERT INTO papers (paper_id, venue_id, title, source, reviews_public_at, content_sha256, "
                "ingested_at, updated_at) VALUES ('p0', 'V', 'T', 'test', ?, 'x', ?, ?)", [PUBLIC, PUBLIC, PUBLIC])
    for sub_id, name, created in [("s-keyed", "Keyed", datetime(2026, 1, 1)), ("s-copy", "Copy", datetime(2026, 3, 1)),
                                  ("s-solo", "Solo", datetime(2026, 1, 1))]:
        con.execute("INSERT INTO submissions VALUES (?, 'x', 'x', ?, 'openai/Keyed', ?, ?, '{}', ?, NULL, "
                    "DATE '2019-01-01', 'finished', NULL, NULL, ?, ?)", [sub_id, name, URL, URL, sub_id, created,
                                                                         created])
    for name, kind in [("Keyed", "submitted"), ("Copy", "submitted"), ("Solo", "submitted"), ("op-a", "llm"),
                       ("op-b", "llm")]:
        con.execute("INSERT INTO candidates (name, kind, params_json, updated_at) VALUES (?, ?, '{}', ?)",
                    [name, kind, PUBLIC])
    for key, at in [("shared", datetime(2026, 1, 2)), ("operator", datetime(2026, 1, 3)),
                    ("solo", datetime(2026, 1, 5))]:
        con.execute("INSERT INTO llm_calls (request_key, purpose, model, api_base, prompt_version, params_json, "
                    "messages_sha256, status, text, attempts, generated_at) VALUES (?, 'review', 'm', ?, 'review-v2', "
                    "'{}', 'x', 'ok', 'A review.', 1, ?)", [keys[key], URL, at])
    for name, key, at in [("Keyed", "shared", datetime(2026, 1, 2)), ("Copy", "shared", datetime(2026, 1, 2)),
                          ("op-a", "operator", datetime(2026, 1, 3)), ("op-b", "operator", datetime(2026, 1, 3)),
                          ("Solo", "solo", datetime(2026, 1, 5))]:
        con.execute("INSERT INTO generations (generation_id, candidate, paper_id, prompt_version, params_json, status, "
                    "text, flags_json, attempts, generated_at, sealed, request_key) VALUES (?, ?, 'p0', 'review-v2', "
                    "'{}', 'ok', 'A review.', '{\"producer\": \"llm\"}', 1, ?, true, ?)",
                    [f"g-{name}", name, at, keys[key]])
    con.close()
    monkeypatch.setattr(_migrate, "all_migrations", lambda: real)
    return keys


def test_generations_served_from_another_candidates_call_are_unsealed_and_counted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    # on this migration's own logger: the CLI keeps migration INFO lines off stderr unless -v (issue 51)
    caplog.set_level(logging.INFO, logger="grebench.store.migrations.m0018_call_owners")
    keys = _old_store(tmp_path / "g.duckdb", monkeypatch)
    store = open_store(tmp_path / "g.duckdb")
    try:
        gens = {r["candidate"]: r for r in store.rows("SELECT * FROM generations")}
        # the copy never made that call (it was submitted two months later): unsealed, dated from its submission
        copy = gens["Copy"]
        assert not copy["sealed"] and copy["generated_at"] == datetime(2026, 3, 1)
        assert json.loads(copy["flags_json"]) == {"producer": "llm", "call_owner": "unproved",
                                                  "cached_call_generated_at": "2026-01-02 00:00:00"}
        # the only candidate that may have made each of the other calls keeps its seal and its time
        assert all(gens[n]["sealed"] for n in ("Keyed", "Solo", "op-a", "op-b"))
        assert gens["Keyed"]["generated_at"] == datetime(2026, 1, 2)
        assert reseal(store) == 0  # the seal is not given back by the next ingest
        # the shared call is set aside (never served), Solo's is its submission's own, the operator's stays shared
        calls = {r["request_key"]: r["cache_scope"] for r in store.rows("SELECT request_key, cache_scope FROM "
                                                                        "llm_calls")}
        assert keys["shared"] not in calls and keys["solo"] not in calls and calls[keys["operator"]] is None
        assert sorted(s or "" for s in calls.values()) == ["", "owner:submission:s-solo", "unknown-owner"]
        assert gens["Copy"]["request_key"] == gens["Keyed"]["request_key"] in calls  # still linked to the call
        assert lookup(store, _request("openai/Keyed", "p0")) is None
        assert lookup(store, _request("openai/Keyed", "p0", "owner:submission:s-keyed")) is None
        assert lookup(store, _request("openai/Solo", "p0", "owner:submission:s-solo")) is not None
        assert lookup(store, _request("openai/op", "p0")) is not None  # a rerun of the operator's job is free
        [note] = store.rows("SELECT kind, subject, detail FROM board_changes WHERE subject = 'call cache'")
        counts = json.loads(note["detail"][note["detail"].index("{"):])
        assert counts == {"generations_unproved": 1, "unsealed": 1, "redated": 1, "calls_set_aside": 1,
                          "calls_to_own_submission": 1, "calls_examined": 3}
        assert "1 generation(s) whose time no call made for their candidate proves: 1 unsealed" in caplog.text
    finally:
        store.close()


def test_a_fresh_store_records_no_note() -> None:
    store = open_store(None)
    assert store.scalar("SELECT count(*) FROM board_changes") == 0
    store.con.close()

"""Candidate registry validation and contamination windows."""

from __future__ import annotations

from datetime import date, datetime, timedelta

import pytest

from grebench.bench import CandidateError, clean_pairs, is_clean, load_candidates, run_bench, sync_candidates
from grebench.settings import Settings
from grebench.store import Store
from tests.bench.conftest import with_candidates

GOOD = {"name": "m1", "model": "openai/gpt-4o-mini", "cutoff": "2023-10-01", "api_key_env": "OPENAI_API_KEY",
        "params": {"max_tokens": 1000}}


@pytest.mark.parametrize(("change", "message"), [
    ({"colour": "red"}, "unknown key(s) colour"),
    ({"cutoff": "last year"}, "cutoff must be an ISO date"),
    ({"model": None}, "missing model"),
    ({"cutoff": None}, "missing cutoff"),
    ({"api_key_env": "sk-abc-123"}, "NAME of an environment variable"),
    ({"kind": "human"}, "kind must be one of llm"),
    ({"name": "human"}, "already used"),
    ({"params": {"max_tokens": 50_000, "context_tokens": 8000}}, "smaller than"),
    ({"stream": "no"}, "stream must be true or false"),
    ({"stream": False, "model": "anthropic/claude-x"}, "stream = false works with OpenAI-compatible endpoints only"),
    ({"params": {"stream": False}}, "params.stream: write stream = false as a key of the candidate"),
])
def test_bad_candidates_are_refused_with_a_clear_reason(settings: Settings, change: dict, message: str) -> None:
    entry = {k: v for k, v in {**GOOD, **change}.items() if v is not None}
    with pytest.raises(CandidateError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_candidates(with_candidates(settings, entry))


def test_registry_has_bundled_candidates_and_syncs(settings: Settings, store: Store) -> None:
    cands = load_candidates(with_candidates(settings, GOOD))
    assert [c.name for c in cands][:6] == ["human", "sentence-deletion", "elongation", "abstract-restatement",
                                           "generic", "other-paper"]
    m1 = cands[-1]
    assert m1.params == {"temperature": 0, "max_tokens": 1000, "context_tokens": settings.bench.context_tokens}
    assert m1.cutoff == date(2023, 10, 1)
    sync_candidates(store, cands)
    assert store.scalar("SELECT api_key_env FROM candidates WHERE name = 'm1'") == "OPENAI_API_KEY"
    with_llm_controls = load_candidates(settings.replace(control_model="openai/gpt-4o-mini"))
    assert {"deletion-completion", "rephrase", "abstract-only"} <= {c.name for c in with_llm_controls}


def test_is_clean_by_dates() -> None:
    public = datetime(2024, 1, 15, 12, 0)
    assert is_clean(date(2024, 1, 14), public)
    assert not is_clean(date(2024, 1, 15), public)  # on the day: contaminated
    assert not is_clean("2024-06-01", public)
    assert is_clean(None, public) and is_clean(date(2030, 1, 1), None)


def test_clean_pairs_view_and_sealed_generations(tiny_store: Store, settings: Settings) -> None:
    future = datetime.now() + timedelta(days=30)
    tiny_store.con.execute("UPDATE papers SET reviews_public_at = ? WHERE paper_id = 'paper0'", [future])
    run_id = tiny_store.start_run("bench", {})
    run_bench(tiny_store, settings, run_id, ["human"])
    rows = {r["paper_id"]: r for r in clean_pairs(tiny_store, "human")}
    assert not any(r["sealed"] for r in rows.values())  # built from the human reviews: never sealed
    assert all(r["clean"] for r in rows.values())  # the human baseline has no cutoff
    # An LLM with a cutoff after 2019-11-08: contaminated on the public papers, clean where sealed.
    tiny_store.con.execute("INSERT INTO candidates (name, kind, model, cutoff, params_json, updated_at) "
                           "VALUES ('late', 'llm', 'openai/x', DATE '2020-01-01', '{}', now())")
    # its reviews written now: sealed where the reviews become public later (paper0)
    tiny_store.con.execute("INSERT INTO generations SELECT * REPLACE ('late' AS candidate, "
                           "generation_id || 'x' AS generation_id, (paper_id = 'paper0') AS sealed) "
                           "FROM generations WHERE candidate = 'human'")
    late = {r["paper_id"]: r for r in clean_pairs(tiny_store, "late")}
    assert late["paper0"]["clean"] and not late["paper1"]["clean"]

"""The ``llm_calls`` table: every call's outcome, keyed by its canonical request in its namespace.

Only ``ok`` rows are served from the cache; a failed row is kept for the
record and replaced when a later attempt succeeds.  A row is served only to a
request of its own namespace (``cache_scope``, see :mod:`grebench.llm._scope`):
the key is derived from the scope, and the lookup checks the row's column too,
so a row written elsewhere (a snapshot: ``snapshot``) or whose owner is unknown
(``unknown-owner``, migration m0018) is kept for the record and never served.  Typed decisions
(``/v1/systemone``) are rows of the same table: the chosen option is the
``text``, the probability of every option is ``logprobs_json``.
"""

from __future__ import annotations

import json

from grebench.llm._decision import DecisionRequest, DecisionResult, choose
from grebench.llm._types import ChatRequest, ChatResult
from grebench.store import Store

_COLUMNS = ("request_key, purpose, model, api_base, prompt_version, params_json, messages_sha256, status, text, "
            "error, tokens_in, tokens_out, cost_usd, latency_s, attempts, truncated, logprobs_json, generated_at, "
            "cache_scope")
_SCOPED = "request_key = ? AND status = 'ok' AND cache_scope IS NOT DISTINCT FROM ?"


def lookup(store: Store, request: ChatRequest) -> ChatResult | None:
    """The stored ok result of ``request`` in its namespace, marked cached, or None."""
    key = request.cache_key()
    rows = store.rows(
        "SELECT text, tokens_in, tokens_out, cost_usd, latency_s, attempts, truncated, logprobs_json, generated_at "
        f"FROM llm_calls WHERE {_SCOPED}", [key, request.cache_scope])
    if not rows:
        return None
    r = rows[0]
    return ChatResult(
        status="ok", text=r["text"], error=None, tokens_in=r["tokens_in"], tokens_out=r["tokens_out"],
        cost_usd=r["cost_usd"], latency_s=r["latency_s"], attempts=r["attempts"], truncated=bool(r["truncated"]),
        cached=True, logprobs=json.loads(r["logprobs_json"]) if r["logprobs_json"] else None,
        generated_at=r["generated_at"], request_key=key,
    )


def _replace(store: Store, values: list[object]) -> None:
    """Write one ``llm_calls`` row (``values`` in :data:`_COLUMNS` order), replacing any row of the same key in the
    same namespace.  A row of the same key in another namespace came from elsewhere (a snapshot's call, whose
    generations link to it): it is kept for the record and this call's outcome is not stored (it is still used)."""
    if store.scalar("SELECT count(*) FROM llm_calls WHERE request_key = ? AND cache_scope IS DISTINCT FROM ?",
                    [values[0], values[-1]]):
        return
    with store.transaction() as con:
        con.execute("DELETE FROM llm_calls WHERE request_key = ?", [values[0]])
        con.execute(f"INSERT INTO llm_calls ({_COLUMNS}) VALUES ({', '.join('?' * len(values))})", values)


def save(store: Store, request: ChatRequest, result: ChatResult) -> None:
    """Record a call's outcome (an ok row is never overwritten by a failure)."""
    key = request.cache_key()
    if result.status != "ok" and lookup(store, request) is not None:
        return
    _replace(store, [key, request.purpose, request.model, request.endpoint_id or request.api_base,
                     request.prompt_version, request.params_json(), request.messages_sha256, result.status, result.text,
                     result.error, result.tokens_in, result.tokens_out, result.cost_usd, result.latency_s,
                     result.attempts, result.truncated,
                     None if result.logprobs is None else json.dumps(result.logprobs), result.generated_at,
                     request.cache_scope])


def lookup_decision(store: Store, request: DecisionRequest) -> DecisionResult | None:
    """The stored ok decision of ``request``, marked cached, or None (probabilities are in ``logprobs_json``)."""
    key = request.cache_key()
    # typed decisions are the operator's local servers: the keyless namespace
    rows = store.rows(f"SELECT tokens_in, latency_s, attempts, logprobs_json, generated_at FROM llm_calls "
                      f"WHERE {_SCOPED}", [key, None])
    if not rows:
        return None
    r = rows[0]
    probabilities = {str(k): float(v) for k, v in json.loads(r["logprobs_json"]).items()}
    choice, probability = choose(request.labels, probabilities)
    return DecisionResult(status="ok", probabilities=probabilities, choice=choice, probability=probability,
                          tokens_in=r["tokens_in"], latency_s=r["latency_s"], error=None, attempts=r["attempts"],
                          cached=True, generated_at=r["generated_at"], request_key=key)


def save_decision(store: Store, request: DecisionRequest, result: DecisionResult) -> None:
    """Record a decision's outcome like a chat call's (the chosen label as ``text``; an ok row is kept)."""
    key = request.cache_key()
    if result.status != "ok" and lookup_decision(store, request) is not None:
        return
    _replace(store, [key, request.purpose, request.model, request.endpoint, request.prompt_version,
                     request.params_json(), request.content_sha256, result.status, result.choice, result.error,
                     result.tokens_in, 0 if result.ok else None, None, result.latency_s, result.attempts, False,
                     None if result.probabilities is None else json.dumps(result.probabilities), result.generated_at,
                     None])

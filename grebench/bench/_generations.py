"""Generation rows: their id, how they are written, and the data the bench reads per paper."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any, Literal, TypedDict, cast

from grebench.bench._contamination import is_sealed
from grebench.bench._prompt import PaperInput
from grebench.store import PUBLIC_SINCE_VIEW, Store

#: A column of the ``generations`` table, as :data:`COLUMNS` lists them.
GenerationColumn = Literal["generation_id", "candidate", "paper_id", "prompt_version", "params_json",
                           "source_review_id", "status", "text", "sections_json", "parse_ok", "flags_json", "error",
                           "attempts", "tokens_in", "tokens_out", "cost_usd", "latency_s", "generated_at", "sealed",
                           "request_key"]
COLUMNS: tuple[GenerationColumn, ...] = (
    "generation_id", "candidate", "paper_id", "prompt_version", "params_json", "source_review_id", "status",
    "text", "sections_json", "parse_ok", "flags_json", "error", "attempts", "tokens_in", "tokens_out", "cost_usd",
    "latency_s", "generated_at", "sealed", "request_key")
MAX_TRIES = 3  # runs that may try a failing LLM generation before it is left alone


class GenerationRow(TypedDict):
    """One ``generations`` row as :func:`make_row` builds it (the keys are :data:`COLUMNS`, in that order)."""

    generation_id: str
    candidate: str
    paper_id: str
    prompt_version: str
    params_json: str
    source_review_id: str | None
    status: str
    text: str | None
    sections_json: str | None
    parse_ok: bool | None
    flags_json: str
    error: str | None
    attempts: int
    tokens_in: int | None
    tokens_out: int | None
    cost_usd: float | None
    latency_s: float | None
    generated_at: datetime
    sealed: bool
    request_key: str | None


class StoredGeneration(TypedDict):
    """What :func:`existing` reads of a stored generation."""

    generation_id: str
    status: str
    attempts: int
    text: str | None


def generation_id(candidate: str, paper_id: str, prompt_version: str, params: dict[str, Any],
                  source_review_id: str | None) -> str:
    """Stable id of one generation: same inputs, same id, so a rerun finds it."""
    blob = json.dumps([candidate, paper_id, prompt_version, params, source_review_id], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def make_row(*, candidate: str, paper_id: str, prompt_version: str, params: dict[str, Any],
             source_review_id: str | None, status: str, text: str | None, sections: list[tuple[str, str]] | None,
             parse_ok: bool | None, flags: dict[str, Any], error: str | None, attempts: int,
             generated_at: datetime, reviews_public_at: datetime | None, tokens_in: int | None = None,
             tokens_out: int | None = None, cost_usd: float | None = None, latency_s: float | None = None,
             request_key: str | None = None, sealable: bool = True) -> GenerationRow:
    """One generations row as a dict (sealed computed from the dates).

    ``sealable=False`` for texts built from the paper's human reviews (the human baseline, the controls): they are
    never "written before the reviews were public", whatever the clock said when they were built, so their row does
    not depend on when a (possibly resumed) run happened to build them.
    """
    return {
        "generation_id": generation_id(candidate, paper_id, prompt_version, params, source_review_id),
        "candidate": candidate, "paper_id": paper_id, "prompt_version": prompt_version,
        "params_json": json.dumps(params, sort_keys=True), "source_review_id": source_review_id, "status": status,
        "text": text, "sections_json": None if sections is None else json.dumps(sections, ensure_ascii=False),
        "parse_ok": parse_ok, "flags_json": json.dumps(flags, sort_keys=True, default=str), "error": error,
        "attempts": attempts, "tokens_in": tokens_in, "tokens_out": tokens_out, "cost_usd": cost_usd,
        "latency_s": latency_s, "generated_at": generated_at,
        "sealed": sealable and is_sealed(generated_at, reviews_public_at), "request_key": request_key,
    }


def write_rows(store: Store, rows: list[GenerationRow], replace_pair: bool = False) -> None:
    """Write rows in one transaction; ``replace_pair`` also drops other rows of the same (candidate, paper)."""
    if not rows:
        return
    with store.transaction() as con:
        if replace_pair:
            con.execute("DELETE FROM generations WHERE [candidate, paper_id] IN (SELECT unnest(?::VARCHAR[][]))",
                        [[[r["candidate"], r["paper_id"]] for r in rows]])
        con.execute("DELETE FROM generations WHERE generation_id IN (SELECT unnest(?::VARCHAR[]))",
                    [[r["generation_id"] for r in rows]])
        store.insert_rows("generations", COLUMNS, [[r[c] for c in COLUMNS] for r in rows])


def existing(store: Store, candidates: list[str]) -> dict[str, StoredGeneration]:
    """Current generations of these candidates by id: status, attempts, text."""
    if not candidates:
        return {}
    marks = ", ".join("?" * len(candidates))
    rows = cast(list[StoredGeneration], store.rows(
        f"SELECT generation_id, status, attempts, text FROM generations WHERE candidate IN ({marks})", candidates))
    return {r["generation_id"]: r for r in rows}


#: Every paper by id, as the candidates see it, with when reviews of its work became public (:func:`load_papers`).
Papers = dict[str, tuple[PaperInput, datetime | None]]


def load_papers(store: Store) -> Papers:
    """Every paper as the candidates see it, with when reviews of its work became public (any linked version's:
    :func:`grebench.store.public_since`)."""
    rows = store.rows(
        "SELECT p.paper_id, p.title, p.abstract, ps.public_since AS reviews_public_at, "
        "CASE WHEN t.status = 'ok' THEN t.text END AS full_text "
        f"FROM papers p JOIN {PUBLIC_SINCE_VIEW} ps ON ps.paper_id = p.paper_id "
        "LEFT JOIN paper_texts t ON t.paper_id = p.paper_id")
    return {r["paper_id"]: (PaperInput(r["paper_id"], r["title"], r["abstract"], r["full_text"]),
                            r["reviews_public_at"]) for r in rows}


def review_texts(store: Store, review_ids: list[str]) -> dict[str, str]:
    """The latest version's text of each review."""
    if not review_ids:
        return {}
    store.con.execute("CREATE OR REPLACE TEMP TABLE _want_reviews (review_id VARCHAR)")
    store.con.executemany("INSERT INTO _want_reviews VALUES (?)", [[i] for i in review_ids])
    rows = store.rows(
        "SELECT r.review_id, v.text FROM reviews r JOIN _want_reviews w ON w.review_id = r.review_id "
        "JOIN review_versions v ON v.review_id = r.review_id AND v.version = r.latest_version")
    store.con.execute("DROP TABLE _want_reviews")
    return {r["review_id"]: r["text"] for r in rows}

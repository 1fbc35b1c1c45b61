"""The candidate registry: bundled candidates plus ``[[candidates]]`` tables from the settings file.

See ``docs/candidates.md`` for the format.  Validation errors name the
candidate and the key, so a bad config fails before any call is made.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from grebench.settings import Settings
from grebench.store import Store, utcnow

KINDS = ("llm", "human", "control")
ALLOWED_KEYS = {"name", "kind", "model", "api_base", "released", "cutoff", "api_key_env", "params", "family",
                "description", "submitter", "stream"}
DEFAULT_MAX_TOKENS = 4096
HUMAN = "human"
# Controls that need no LLM (methods.md §4), in display order.
DETERMINISTIC_CONTROLS = ("sentence-deletion", "elongation", "abstract-restatement", "generic", "other-paper")
# Controls made by `control_model` when one is configured.
LLM_CONTROLS = ("deletion-completion", "rephrase", "abstract-only")
_DESCRIPTIONS = {
    HUMAN: "A held-out human official review of the paper (seeded pick); the other reviews are references.",
    "sentence-deletion": "The human candidate review with every second sentence of each section removed.",
    "elongation": "The human candidate review with fixed, content-free sentences added to each section.",
    "abstract-restatement": "A review that only restates the paper's abstract.",
    "generic": "One constant, plausible, content-free review, the same for every paper.",
    "other-paper": "The human candidate review of a different paper (seeded derangement).",
    "deletion-completion": "Sentence deletion with the removed sentences refilled by an LLM in the same style.",
    "rephrase": "The human candidate review rephrased by an LLM, keeping every judgment.",
    "abstract-only": "A review written by an LLM from the title and abstract alone.",
}


class CandidateError(ValueError):
    """A ``[[candidates]]`` entry that cannot be used, with the reason."""


@dataclass(frozen=True)
class Candidate:
    """One candidate reviewer: an LLM, the human baseline or a control."""

    name: str
    kind: str
    model: str | None = None
    api_base: str | None = None
    api_key_env: str | None = None
    released: date | None = None
    cutoff: date | None = None
    family: str | None = None
    description: str | None = None
    submitter: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    stream: bool = True  # false: the endpoint cannot stream, every call is one plain JSON request

    @property
    def needs_llm(self) -> bool:
        """Whether generating for this candidate calls an LLM."""
        return self.model is not None


def _date(value: Any, where: str, key: str) -> date | None:
    if value is None:
        return None
    if isinstance(value, date):
        return value
    try:
        return date.fromisoformat(str(value))
    except ValueError:
        raise CandidateError(f"{where}: {key} must be an ISO date (YYYY-MM-DD), got {value!r}") from None


def parse_candidate(raw: Any, index: int, settings: Settings) -> Candidate:
    """Validate one ``[[candidates]]`` table."""
    where = f"[[candidates]] #{index + 1}"
    if not isinstance(raw, dict):
        raise CandidateError(f"{where}: expected a table, got {type(raw).__name__}")
    name = raw.get("name")
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,99}", name):
        raise CandidateError(f"{where}: name must be 1-100 characters of letters, digits and ._:/@+-, got {name!r}")
    where = f"candidate {name!r}"
    unknown = sorted(set(raw) - ALLOWED_KEYS)
    if unknown:
        allowed = ", ".join(sorted(ALLOWED_KEYS))
        raise CandidateError(f"{where}: unknown key(s) {', '.join(unknown)} (allowed: {allowed})")
    kind = raw.get("kind", "llm")
    if kind != "llm":
        raise CandidateError(f"{where}: kind must be 'llm' for configured candidates (human and controls are "
                             f"bundled), got {kind!r}")
    model = raw.get("model")
    if not isinstance(model, str) or not model.strip():
        raise CandidateError(f"{where}: missing model (a litellm model string such as 'openai/gpt-4o-mini')")
    for key in ("api_base", "api_key_env", "family", "description", "submitter"):
        if raw.get(key) is not None and not isinstance(raw[key], str):
            raise CandidateError(f"{where}: {key} must be a string")
    api_key_env = raw.get("api_key_env")
    if api_key_env is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", api_key_env):
        raise CandidateError(f"{where}: api_key_env must be the NAME of an environment variable, not the key")
    cutoff = _date(raw.get("cutoff"), where, "cutoff")
    if cutoff is None:
        raise CandidateError(f"{where}: missing cutoff (training-data cutoff date, YYYY-MM-DD): without it no "
                             "paper can be shown clean")
    stream = raw.get("stream", True)
    if not isinstance(stream, bool):
        raise CandidateError(f"{where}: stream must be true or false, got {stream!r}")
    if not stream and not model.strip().startswith("openai/"):
        raise CandidateError(f"{where}: stream = false works with OpenAI-compatible endpoints only (model "
                             f"'openai/<model id>'), got {model!r}")
    params = raw.get("params", {})
    if not isinstance(params, dict):
        raise CandidateError(f"{where}: params must be a table")
    if "stream" in params or "stream_options" in params:
        raise CandidateError(f"{where}: params.stream: write stream = false as a key of the candidate, next to "
                             "model (it says how replies are fetched, not how the model writes)")
    params = {"temperature": 0, "max_tokens": DEFAULT_MAX_TOKENS, "context_tokens": settings.context_tokens, **params}
    for key in ("max_tokens", "context_tokens"):
        if not isinstance(params[key], int) or params[key] <= 0:
            raise CandidateError(f"{where}: params.{key} must be a positive integer")
    if params["max_tokens"] >= params["context_tokens"]:
        raise CandidateError(f"{where}: params.max_tokens must be smaller than params.context_tokens")
    return Candidate(name=name, kind="llm", model=model.strip(), api_base=raw.get("api_base"), api_key_env=api_key_env,
                     released=_date(raw.get("released"), where, "released"), cutoff=cutoff, family=raw.get("family"),
                     description=raw.get("description"), submitter=raw.get("submitter"), params=params,
                     stream=stream)


def bundled_candidates(settings: Settings) -> list[Candidate]:
    """The human baseline and the controls; the LLM-made controls only with ``control_model`` set."""
    out = [Candidate(HUMAN, "human", description=_DESCRIPTIONS[HUMAN])]
    out += [Candidate(n, "control", description=_DESCRIPTIONS[n]) for n in DETERMINISTIC_CONTROLS]
    if settings.control_model:
        params = {"temperature": 0, "max_tokens": DEFAULT_MAX_TOKENS, "context_tokens": settings.context_tokens}
        out += [Candidate(n, "control", model=settings.control_model, description=_DESCRIPTIONS[n], params=params)
                for n in LLM_CONTROLS]
    return out


def load_candidates(settings: Settings) -> list[Candidate]:
    """Every candidate: bundled ones first, then the configured LLMs (names must be unique)."""
    raw = settings.tables.get("candidates", [])
    if isinstance(raw, dict):
        raw = [raw]
    if not isinstance(raw, list):
        raise CandidateError("candidates must be an array of tables ([[candidates]])")
    out = bundled_candidates(settings)
    seen = {c.name for c in out}
    reserved = {HUMAN, *DETERMINISTIC_CONTROLS, *LLM_CONTROLS}
    for i, entry in enumerate(raw):
        candidate = parse_candidate(entry, i, settings)
        if candidate.name in seen or candidate.name in reserved:
            raise CandidateError(f"candidate {candidate.name!r}: name already used (or reserved for a bundled one)")
        seen.add(candidate.name)
        out.append(candidate)
    return out


def sync_candidates(store: Store, candidates: list[Candidate]) -> None:
    """Write the registry into the ``candidates`` table (the key's variable name only, never a key)."""
    with store.transaction() as con:
        for c in candidates:
            con.execute("DELETE FROM candidates WHERE name = ?", [c.name])
            con.execute(
                "INSERT INTO candidates (name, kind, model, api_base, family, released, cutoff, api_key_env, "
                "params_json, description, submitter, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [c.name, c.kind, c.model, c.api_base, c.family, c.released, c.cutoff, c.api_key_env,
                 json.dumps(c.params, sort_keys=True), c.description, c.submitter, utcnow()])

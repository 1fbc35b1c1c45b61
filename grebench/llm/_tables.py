"""The settings file's endpoint tables, ``[[candidates]]`` and ``[[judges]]``, read by one parser.

Both name a model behind the LLM client, so they share their rules: an array of tables, each with a ``name``; an
endpoint's ``model``, ``api_base``, ``api_key_env`` (the NAME of an environment variable, never the key),
``family``, ``description`` and ``params``.  What differs (a candidate's cutoff, a judge's kinds) stays with its
caller, which passes its own error class so users see a :class:`~grebench.bench.CandidateError` for a candidate.
Every error names the table or the entry, and the key.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

#: A candidate's or judge's name: 1-100 letters, digits and ._:/@+- (configured, submitted or imported alike).
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,99}")
_KEY_ENV = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_STRING_KEYS = ("api_base", "api_key_env", "family", "description", "submitter")
LITELLM_MODEL = "a litellm model string such as 'openai/gpt-4o-mini'"


@dataclass(frozen=True)
class Endpoint:
    """The keys every endpoint table shares, validated."""

    name: str
    model: str
    api_base: str | None = None
    api_key_env: str | None = None
    family: str | None = None
    description: str | None = None
    params: dict[str, Any] = field(default_factory=dict)


def endpoint_tables(raw: Any, table: str, error: type[ValueError] = ValueError) -> list[Any]:
    """The entries of ``[[table]]`` (None: none; one table alone: a list of one)."""
    if raw is None:
        return []
    if isinstance(raw, dict):
        return [raw]
    if not isinstance(raw, list):
        raise error(f"{table} must be an array of tables ([[{table}]])")
    return raw


def table_name(entry: Any, where: str, error: type[ValueError] = ValueError) -> str:
    """The ``name`` of one entry (``where`` says which, e.g. ``[[judges]] #2``), checked to be a table with a name."""
    if not isinstance(entry, dict):
        raise error(f"{where}: expected a table, got {type(entry).__name__}")
    name = entry.get("name")
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise error(f"{where}: name must be 1-100 characters of letters, digits and ._:/@+-, got {name!r}")
    return name


def parse_endpoint(raw: dict[str, Any], where: str, allowed: Collection[str], error: type[ValueError] = ValueError,
                   model_hint: str = LITELLM_MODEL) -> Endpoint:
    """Validate the shared keys of one named entry (``where``: ``judge 'x'``); any key outside ``allowed`` is refused.

    ``model_hint`` says what ``model`` should be in the error when it is missing.
    """
    unknown = sorted(set(raw) - set(allowed))
    if unknown:
        raise error(f"{where}: unknown key(s) {', '.join(unknown)} (allowed: {', '.join(sorted(allowed))})")
    model = raw.get("model")
    if not isinstance(model, str) or not model.strip():
        raise error(f"{where}: missing model ({model_hint})")
    for key in _STRING_KEYS:
        if raw.get(key) is not None and not isinstance(raw[key], str):
            raise error(f"{where}: {key} must be a string")
    api_key_env = raw.get("api_key_env")
    if api_key_env is not None and not _KEY_ENV.fullmatch(api_key_env):
        raise error(f"{where}: api_key_env must be the NAME of an environment variable, not the key")
    params = raw.get("params", {})
    if not isinstance(params, dict):
        raise error(f"{where}: params must be a table")
    return Endpoint(raw["name"], model.strip(), raw.get("api_base"), api_key_env, raw.get("family"),
                    raw.get("description"), params)

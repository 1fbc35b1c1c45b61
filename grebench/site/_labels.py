"""Board names in words: what a metric, an estimator id and a preprocessor id mean to a reader.

Stored ids are exact and long (``offline:wb-bigram+content-copy:lam=0.08:...``,
``hf:/models/SmolLM2-135M@1a2b3c4d:dtype=float32:chat=...``); the pages and the app show these labels and keep the
exact id beside them (a ``<details>`` or a ``title``), and ``leaderboard.json`` keeps the ids unchanged.  Every
function falls back to a shortened id for formats it does not know (a plugin estimator, a future preprocessor).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_METRICS = {
    "gem": "GEM",
    "gem-s": "GEM-S (abstract)",
    "gem-s-assw": "GEM-S (claimed strengths & weaknesses)",
    "gem-raw": "GEM (raw review text)",
}
# Catalogue names of bundled evaluation-LMs (hf:NAME@...) as their authors write them.
_CATALOGUE = {
    "smollm2-135m": "SmolLM2-135M",
    "smollm2-135m-instruct": "SmolLM2-135M-Instruct",
    "smollm2-360m": "SmolLM2-360M",
    "smollm2-360m-instruct": "SmolLM2-360M-Instruct",
    "smollm2-1.7b": "SmolLM2-1.7B",
    "gemma3-270m": "Gemma-3-270M",
}
_SERVERS = {"vllm": "vLLM", "sglang": "SGLang"}
_MODEL_ID = re.compile(r"^(?P<kind>hf|vllm|sglang):(?P<model>.+)@(?P<rest>[^@/]*)$")
_HF_CACHE_DIR = re.compile(r"models--[^/]+--(?P<name>[^/]+)")
_MAX_FALLBACK = 48


def _short(text: str, limit: int = _MAX_FALLBACK) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def metric_label(metric: str) -> str:
    """``gem-s`` → ``GEM-S (abstract)``; an unknown metric comes back as written."""
    return _METRICS.get(metric, metric)


def _model_name(model: str) -> str:
    """A readable model name from a catalogue name, a checkpoint path or a served model id."""
    if model.lower() in _CATALOGUE:
        return _CATALOGUE[model.lower()]
    cache = _HF_CACHE_DIR.search(model)  # .../models--ORG--NAME/snapshots/<sha>
    if cache:
        return cache.group("name")
    parts = [p for p in model.rstrip("/").split("/") if p]
    return _short(parts[-1] if parts else model, 40)


def _parse(estimator_id: str) -> tuple[str, bool]:
    """(label, whether it is a language model that 'scores')."""
    kind = estimator_id.split(":", 1)[0]
    if kind == "offline":
        return "offline word model (fast proxy)", False
    match = _MODEL_ID.match(estimator_id)
    if match is None:
        return (f"estimator {_short(estimator_id.split('@', 1)[0])}" if estimator_id else "unknown estimator"), False
    name = _model_name(match.group("model"))
    if match.group("kind") == "hf":
        options = dict(part.split("=", 1) for part in match.group("rest").split(":")[1:] if "=" in part)
        dtype = options.get("dtype")
        return f"{name} (hf{', ' + dtype if dtype else ''})", True
    return f"{name} ({_SERVERS[match.group('kind')]})", True


def estimator_label(estimator_id: str) -> str:
    """``hf:/m/SmolLM2-135M@ab12cd34:dtype=float32:chat=…`` → ``SmolLM2-135M (hf, float32)``."""
    return _parse(estimator_id)[0]


def preprocessor_label(preprocessor_id: str) -> str:
    """``rules-v3`` → ``rules preprocessor``; ``litellm:openai/gpt-4o@v1`` → ``LLM preprocessor (gpt-4o)``."""
    kind, _, arg = preprocessor_id.partition(":")
    if re.fullmatch(r"rules(-v\d+)?", preprocessor_id):
        return "rules preprocessor"
    if preprocessor_id == "none":
        return "no preprocessor (raw text)"
    if kind == "litellm" and arg:
        return f"LLM preprocessor ({_model_name(arg.split('@', 1)[0])})"
    if kind == "imported" and arg:
        return f"imported judgment lines ({_short(arg, 40)})"
    return f"{_short(preprocessor_id)} preprocessor"


def setup_label(estimator_id: str, preprocessor_id: str) -> str:
    """``scored by SmolLM2-135M (hf, float32) · rules preprocessor`` (estimator and preprocessor of a board)."""
    label, is_model = _parse(estimator_id)
    return f"{'scored by ' if is_model else ''}{label} · {preprocessor_label(preprocessor_id)}"


def board_title(board: Mapping[str, Any]) -> str:
    """``GEM-S (abstract) · scored by SmolLM2-135M (hf, float32) · rules preprocessor``."""
    return f"{metric_label(str(board['metric']))} · {setup_label(str(board['estimator']), str(board['preprocessor']))}"


def board_id(board: Mapping[str, Any]) -> str:
    """The exact ids behind a board title: ``metric · estimator · preprocessor``."""
    return f"{board['metric']} · {board['estimator']} · {board['preprocessor']}"

"""Board names in words: what a metric, an estimator id, a preprocessor id and a candidate kind mean to a reader.

Stored ids are exact and long (``offline:wb-bigram+content-copy:lam=0.08:...``,
``hf:smollm2-135m@1a2b3c4d:dtype=bfloat16:chat=...``).  The words come from the store's ``labels`` table, which the
boards stage writes from each part's registration (:mod:`grebench.scoring._labels`): the site and the app never
import a registry of parts, and a plugin's part is named without editing this file.  The pages keep the exact id
beside each label (a ``<details>`` or a ``title``), and ``leaderboard.json`` keeps the ids unchanged.  An id with no
label (an old export) falls back to a shortened id.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from grebench.registry import PartId
from grebench.scoring import rank_range, rank_word
from grebench.store import BASELINE, CONTESTANT, MODEL_ROLE, PROXY_ROLE, REFERENCE, Store

_MAX_FALLBACK = 48
#: Plot colours of a row whose kind has no stored label (an old export): by the row's stored role.
DEFAULT_COLOUR = "#1f5fa8"
_FALLBACK_COLOURS = {BASELINE: "#2e7d32", REFERENCE: "#8a8a8a"}


def _short(text: str, limit: int = _MAX_FALLBACK) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def venue_label(venue_id: str, name: str | None = None) -> str:
    """A venue-year in words: its stored name (``ICLR 2026``) when the papers give one, else read from the id:
    ``ICLR.cc/2026/Conference`` → ``ICLR 2026``, ``NeurIPS.cc/2024/Datasets_and_Benchmarks_Track`` → ``NeurIPS 2024
    Datasets and Benchmarks Track``; an id of another form comes back as written."""
    if name and name.strip() and name.strip() != venue_id:
        return name.strip()
    parts = [p for p in str(venue_id).split("/") if p]
    year = next((p for p in parts if re.fullmatch(r"(19|20)\d\d", p)), None)
    if len(parts) < 2 or year is None:
        return str(venue_id)
    org = re.sub(r"\.(cc|org|com|net|io)$", "", parts[0], flags=re.IGNORECASE)
    rest = [p.replace("_", " ") for p in parts[parts.index(year) + 1:] if p.lower() != "conference"]
    return " ".join([org, year, *rest])


def _venue_names(store: Store) -> dict[str, str]:
    """Each venue id's stored name (from ``papers``), for :func:`venue_label`."""
    if not store.scalar("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'papers'") and \
            not store.scalar("SELECT count(*) FROM duckdb_views() WHERE view_name = 'papers'"):
        return {}
    return {str(r["venue_id"]): str(r["venue"] or "") for r in
            store.rows("SELECT venue_id, any_value(venue) AS venue FROM papers GROUP BY venue_id")}


def stored_labels(store: Store) -> dict[tuple[str, str], dict[str, Any]]:
    """``(what, id) → {label, role, colour}`` from the store's ``labels`` table (empty when it has none)."""
    if not store.scalar("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'labels'"):
        return {}
    return {(r["what"], r["id"]): r for r in store.rows("SELECT what, id, label, role, colour FROM labels")}


class Labels:
    """The words for stored ids, from ``labels`` rows."""

    def __init__(self, rows: Mapping[tuple[str, str], Mapping[str, Any]] | None = None,
                 venues: Mapping[str, str] | None = None) -> None:
        self.rows = dict(rows or {})
        self.venues = dict(venues or {})

    @classmethod
    def load(cls, store: Store) -> Labels:
        """The labels stored with the boards, and the venues' names from the papers."""
        return cls(stored_labels(store), _venue_names(store))

    def venue(self, venue_id: str | None) -> str:
        """``ICLR.cc/2026/Conference`` → ``ICLR 2026``: the one label of a venue-year, on every page and in the app
        (:func:`venue_label`)."""
        return venue_label(str(venue_id or ""), self.venues.get(str(venue_id or "")))

    def _get(self, what: str, key: str, field: str = "label") -> Any:
        row = self.rows.get((what, key))
        return None if row is None else row.get(field)

    def metric(self, metric: str) -> str:
        """``gem-s`` → ``GEM-S (abstract)``; an unknown metric comes back as written."""
        return self._get("metric", metric) or metric

    def estimator(self, estimator_id: str) -> str:
        """``hf:smollm2-135m@ab12cd34:dtype=bfloat16:…`` → ``SmolLM2-135M-Instruct (hf, bfloat16)``."""
        return self._get("estimator", estimator_id) or (
            f"estimator {_short(PartId.parse(estimator_id).spec)}" if estimator_id else "unknown estimator")

    def is_model(self, estimator_id: str) -> bool:
        """Whether the estimator is a language model (a fast proxy is not: it does not 'score')."""
        return self._get("estimator", estimator_id, "role") == MODEL_ROLE

    def is_proxy(self, estimator_id: str) -> bool:
        """Whether the estimator is labelled a fast proxy (an id with no stored label is not: an old export)."""
        return self._get("estimator", estimator_id, "role") == PROXY_ROLE

    def preprocessor(self, preprocessor_id: str) -> str:
        """``rules-v5`` → ``rules preprocessor``; ``litellm:openai/gpt-4o@v1`` → ``LLM preprocessor (gpt-4o)``."""
        return self._get("preprocessor", preprocessor_id) or f"{_short(preprocessor_id)} preprocessor"

    def setup(self, estimator_id: str, preprocessor_id: str) -> str:
        """``scored by SmolLM2-135M-Instruct (hf, bfloat16) · rules preprocessor``."""
        scored = "scored by " if self.is_model(estimator_id) else ""
        return f"{scored}{self.estimator(estimator_id)} · {self.preprocessor(preprocessor_id)}"

    def board_title(self, board: Mapping[str, Any]) -> str:
        """``GEM-S (abstract) · scored by SmolLM2-135M-Instruct (hf, bfloat16) · rules preprocessor``."""
        return f"{self.metric(str(board['metric']))} · " \
               f"{self.setup(str(board['estimator']), str(board['preprocessor']))}"

    def kind_tag(self, kind: str | None) -> str:
        """The words shown after a candidate's name for its kind ('' for a plain model)."""
        return str(self._get("candidate_kind", str(kind)) or "")

    def role(self, kind: str | None) -> str:
        """What the kind is on a board: contestant, baseline or reference (a kind with no stored label: contestant)."""
        return str(self._get("candidate_kind", str(kind), "role") or CONTESTANT)

    def colour(self, kind: str | None, role: str | None = None) -> str:
        """The kind's colour in board plots (with no stored label: the colour of its role)."""
        return str(self._get("candidate_kind", str(kind), "colour")
                   or _FALLBACK_COLOURS.get(role or self.role(kind), DEFAULT_COLOUR))

    def annotate(self, board: dict[str, Any]) -> dict[str, Any]:
        """Give a stored board its words (``title``, ``metric_label``) and each row its ``role``, ``tag``,
        ``colour``, ``rank_word`` and ``rank_range`` (a row's stored role wins: it is what the board was computed
        with)."""
        board["title"] = self.board_title(board)
        board["venue_label"] = self.venue(str(board["venue_id"]))
        board["metric_label"] = self.metric(str(board["metric"]))
        board["proxy"] = self.is_proxy(str(board["estimator"]))
        for r in board["rows"]:
            r["role"] = r.get("role") or self.role(r.get("kind"))
            r["tag"] = self.kind_tag(r.get("kind"))
            r["colour"] = self.colour(r.get("kind"), r["role"])
            r["rank_word"] = rank_word(r)
            r["rank_range"] = rank_range(r)
        return board


def row_colour(row: Mapping[str, Any]) -> str:
    """A board row's plot colour: the annotated one, else its role's."""
    return str(row.get("colour") or _FALLBACK_COLOURS.get(str(row.get("role")), DEFAULT_COLOUR))


def board_id(board: Mapping[str, Any]) -> str:
    """The exact ids behind a board title: ``metric · estimator · preprocessor``."""
    return f"{board['metric']} · {board['estimator']} · {board['preprocessor']}"


def board_key_label(labels: Labels, key: str) -> str:
    """A board key of the version pages (``venue_id · metric · estimator · preprocessor``) in words: ``ICLR 2026 ·
    GEM-S (abstract) · scored by … · rules preprocessor`` (a key of another form comes back as written)."""
    parts = key.split(" · ")
    if len(parts) != 4:
        return key
    venue, metric, estimator, preprocessor = parts
    return f"{labels.venue(venue)} · {labels.metric(metric)} · {labels.setup(estimator, preprocessor)}"


def human_size(size: Any) -> str:
    """Bytes in words: ``8,466,730`` → ``8.1 MiB``, ``912`` → ``912 bytes`` (binary units, one decimal)."""
    value = float(size or 0)
    if value < 1024:
        return f"{int(value)} bytes"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            return f"{value:.1f} {unit}"
    raise AssertionError("unreachable")

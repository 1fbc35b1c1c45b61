"""Using a model: the checkpoint directory of a catalogue name (pulled on first use) or of a local path.

Before a catalogue checkpoint is handed out, the size of every file and the SHA-256 of the weights are checked
against the manifest (≈ 0.5 s for 538 MB): a truncated or flipped file gives one :class:`ModelError` that says how
to repair it, never a stack trace from the safetensors reader halfway through loading.
"""

from __future__ import annotations

import re
from pathlib import Path

from grebench.models._entry import MODELS, ModelError, catalogue_entry, models_path
from grebench.models._manifest import check_files, installed
from grebench.models._pull import pull
from grebench.progress import Progress
from grebench.settings import Settings


def ensure_model(settings: Settings, name: str, progress: Progress | None = None) -> Path:
    """The checked checkpoint directory of catalogue model ``name``, pulled first if it is not installed."""
    name = catalogue_entry(name).name
    manifest = installed(settings, name)
    if manifest is None:
        manifest = pull(settings, name, progress=progress)
    check_files(settings, name, manifest, set(manifest.get("weights_files") or ()), progress)
    return models_path(settings) / name


def resolve_checkpoint(settings: Settings, spec: str, progress: Progress | None = None) -> tuple[Path, str]:
    """``(directory, label)`` of a catalogue name (label: the name) or a local checkpoint directory (label: its path).

    A catalogue name wins over a directory of the same name in the working directory (write ``./NAME`` for that).
    """
    text = spec.strip()
    if text in MODELS:
        return ensure_model(settings, text, progress), text
    path = Path(text).expanduser()
    if text and path.is_dir():
        resolved = path.resolve()
        return resolved, str(resolved)
    raise ModelError(f"{spec!r} is neither a built-in evaluation LM ({', '.join(MODELS.names()) or 'none'}; see "
                     "`grebench models list`) nor a local checkpoint directory", "unknown")


def model_family(spec: str) -> str:
    """The family of a model spec for the judges' family guard: its name up to the size (``smollm2-135m`` ->
    ``smollm2``; a checkpoint path by its directory's name)."""
    base = Path(spec).name.lower() or spec.lower()
    return re.sub(r"[-_.]?\d+(\.\d+)?[mb]\b.*$", "", base) or base

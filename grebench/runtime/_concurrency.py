"""How many calls at once a local model server (``transformers serve`` for ``local_candidates`` and
``local_judges``) is sent: what the machine can take, derived from what was measured on it.

On a GPU the server batches well: ``bench_concurrency``.  On a CPU the server's continuous batching shares each
decoding step (one read of the weights) across the calls in flight, so more calls give more tokens per second: the
local candidate's 12 default reviews ran at 3.6 tokens/s two at a time and 15.5 tokens/s all at once on a 2-core Xeon
(bfloat16, ``benchmarks/generation_engines.py``).  What bounds them is the reading of their prompts: every call in
flight must have its prompt (``context_tokens``) read before :data:`FIRST_TOKEN_SHARE` of ``llm_idle_timeout_s``
(the time a local call may go without data) has passed, at the tokens per second the dtype probe measured on this
machine with this checkpoint in the chosen dtype (:mod:`grebench.runtime._dtype`); at most :data:`CPU_MAX_STREAMS`,
at least one.  ``local_streams`` sets the number instead.  Without a measurement (a dtype set by hand) half the
cores.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from grebench.settings import Settings

#: Every call in flight has its prompt read (prefill) within this share of ``llm_idle_timeout_s``, so that none is
#: given up for silence while the others' prompts are read.
FIRST_TOKEN_SHARE = 0.4
#: At most this many calls at once to a server on a CPU (its batching KV cache holds ``context_tokens`` for each).
CPU_MAX_STREAMS = 16


#: The machine is busy when other work keeps at least this share of its usable cores taken (the 1-minute load
#: average): a timing taken then measures the machine and its neighbours, not the machine.
BUSY_SHARE = 0.75


def load_average() -> float | None:
    """The 1-minute load average, or None where the platform has none."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def is_busy(*loads: float | None, cores: int | None = None) -> bool:
    """Whether any of these load averages is at least :data:`BUSY_SHARE` of ``cores`` (the usable cores)."""
    limit = BUSY_SHARE * (cores if cores is not None else usable_cores())
    return any(load is not None and load >= limit for load in loads)


def quieter_now(record: Mapping[str, Any], load: Callable[[], float | None] = load_average) -> bool:
    """Whether a stored probe ``record`` was taken on a busy machine (its ``busy``) and the machine is not busy now
    (``load()``, read only then): a timing taken beside other work is kept only until a quiet start measures it
    again.  The dtype probe and the reuse probe share this rule."""
    if not record.get("busy"):
        return False
    now = load()
    return now is not None and not is_busy(now)


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity; a container's cpuset)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def server_concurrency(settings: Settings, device: str, dtype: str, probe: Mapping[str, Any] | None,
                       context_tokens: int) -> tuple[int, str]:
    """(calls at once, why) for a local server of a model on ``device`` in ``dtype``; ``probe`` is the dtype
    choice's record (``<dtype>_tok_s`` measured on this machine, when it was measured)."""
    ceiling = max(1, settings.bench_concurrency)
    if device != "cpu":
        return ceiling, f"{device}: bench_concurrency = {ceiling}"
    if settings.local_streams:
        return settings.local_streams, f"local_streams = {settings.local_streams}"
    cores = usable_cores()
    measured = (probe or {}).get(f"{dtype}_tok_s")
    if not isinstance(measured, (int, float)) or measured <= 0:
        n = max(1, cores // 2)
        return n, f"a CPU with {cores} usable cores, throughput not measured ({dtype} set, no probe): half the cores"
    window = settings.llm_idle_timeout_s * FIRST_TOKEN_SHARE
    n = max(1, min(CPU_MAX_STREAMS, int(float(measured) * window // max(1, context_tokens))))
    return n, (f"a CPU at {float(measured):.0f} tokens/s measured in {dtype}: every call's {context_tokens}-token "
               f"prompt read within {window:.0f} s, at most {CPU_MAX_STREAMS} calls")

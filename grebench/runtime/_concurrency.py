"""How many calls at once a local model server (``transformers serve`` for ``local_candidates`` and
``local_judges``) is sent: what the machine can take, derived from what was measured on it.

On a GPU the server batches well: ``bench_concurrency``.  On a CPU every call in flight shares the same few cores,
so more calls only make each one slower (on a 2-core AVX2-only EPYC, four concurrent SmolLM2 reviews each ran past
ten minutes).  The number is derived from the tokens per second the dtype probe measured on this machine with this
checkpoint in the chosen dtype (cached per machine and checkpoint: :mod:`grebench.runtime._dtype`) and the usable
cores: as many calls as can each have a full prompt (``context_tokens``) read within :data:`FIRST_TOKEN_S`, never
more than the cores nor ``bench_concurrency``, at least one.  Without a measurement (a dtype set by hand) half the
cores.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from grebench.settings import Settings

#: Every call in flight has its prompt read (prefill) within about this long, so that all of them stream soon.
FIRST_TOKEN_S = 60.0


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
    cores = usable_cores()
    measured = (probe or {}).get(f"{dtype}_tok_s")
    if not isinstance(measured, (int, float)) or measured <= 0:
        n = max(1, min(ceiling, cores // 2))
        return n, f"a CPU with {cores} usable cores, throughput not measured ({dtype} set, no probe): half the cores"
    by_speed = int(float(measured) * FIRST_TOKEN_S // max(1, context_tokens))
    n = max(1, min(ceiling, cores, by_speed))
    return n, (f"a CPU with {cores} usable cores at {float(measured):.0f} tokens/s measured in {dtype}: a "
               f"{context_tokens}-token prompt per call read within about {FIRST_TOKEN_S:.0f} s")

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
import time
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
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


#: A probe's timing was taken beside other work when other processes kept at least this share of the usable cores
#: taken while it ran (:class:`Neighbours`): a probe uses every core, so its rate is then off by about that share.
NEIGHBOUR_SHARE = 0.25


def is_busy(*loads: float | None, cores: int | None = None, share: float = BUSY_SHARE) -> bool:
    """Whether any of these load averages is at least ``share`` (:data:`BUSY_SHARE`) of ``cores`` (the usable
    cores)."""
    limit = share * (cores if cores is not None else usable_cores())
    return any(load is not None and load >= limit for load in loads)


def _busy_ticks(cpus: Collection[int]) -> int | None:
    """Clock ticks the kernel counts as busy (user, nice, system, irq, softirq, steal) on ``cpus`` since boot, from
    Linux's ``/proc/stat``; None where it cannot be read."""
    try:
        lines = Path("/proc/stat").read_text(encoding="ascii").splitlines()
    except OSError:
        return None
    total, seen = 0, 0
    for line in lines:
        name, _, rest = line.partition(" ")
        if not (name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus):
            continue
        fields = [int(x) for x in rest.split()]
        if len(fields) < 8:
            return None
        user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
        total += user + nice + system + irq + softirq + steal
        seen += 1
    return total if seen else None


class Neighbours:
    """How many of this process's cores other work takes while a timing runs: the busy time the kernel counts on
    those cores, less this process's own CPU time (every thread), per second of wall time.

    A load average read after a probe counts the probe itself (a 64 s float32 probe on 2 cores lifts the 1-minute
    average to about 1.3 on its own, which read as "busy" on every quiet 2-core machine); this counts only the
    others, over exactly the probe's span, steal time of a shared VM included.  None (:meth:`cores`) where the
    kernel does not say (not Linux)."""

    def __init__(self) -> None:
        try:
            self.cpus: Collection[int] = os.sched_getaffinity(0)
        except (AttributeError, OSError):
            self.cpus = range(os.cpu_count() or 1)
        self.started = (time.monotonic(), _busy_ticks(self.cpus), time.process_time())

    @property
    def seconds(self) -> float:
        """Wall time since this was made."""
        return time.monotonic() - self.started[0]

    def cores(self) -> float | None:
        """Cores' worth of other work since this was made (0 = none), or None where it cannot be measured."""
        wall0, ticks0, own0 = self.started
        ticks = _busy_ticks(self.cpus)
        wall, own = time.monotonic() - wall0, time.process_time() - own0
        if ticks is None or ticks0 is None or wall <= 0:
            return None
        hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        return max(0.0, (ticks - ticks0) / hz - own) / wall


def probe_busy(others: float | None, load_before: float | None, cores: int) -> bool:
    """Whether a probe ran beside other work: other processes took :data:`NEIGHBOUR_SHARE` of the cores while it
    ran (:class:`Neighbours`); where that cannot be measured, the load average before it was :data:`BUSY_SHARE` of
    them (never the one after it, which counts the probe)."""
    if others is not None:
        return others >= NEIGHBOUR_SHARE * cores
    return is_busy(load_before, cores=cores)


def quieter_now(record: Mapping[str, Any], load: Callable[[], float | None] = load_average) -> bool:
    """Whether a stored probe ``record`` was taken on a busy machine (its ``busy``) and the machine is quiet now
    (``load()``, read only then, under :data:`NEIGHBOUR_SHARE` of the cores): a timing taken beside other work is
    kept only until a quiet start measures it again.  The dtype probe and the reuse probe share this rule."""
    if not record.get("busy"):
        return False
    now = load()
    return now is not None and not is_busy(now, share=NEIGHBOUR_SHARE)


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
    ceiling = max(1, settings.bench.bench_concurrency)
    if device != "cpu":
        return ceiling, f"{device}: bench_concurrency = {ceiling}"
    if settings.bench.local_streams:
        return settings.bench.local_streams, f"local_streams = {settings.bench.local_streams}"
    cores = usable_cores()
    measured = (probe or {}).get(f"{dtype}_tok_s")
    if not isinstance(measured, (int, float)) or measured <= 0:
        n = max(1, cores // 2)
        return n, f"a CPU with {cores} usable cores, throughput not measured ({dtype} set, no probe): half the cores"
    window = settings.limits.llm_idle_timeout_s * FIRST_TOKEN_SHARE
    n = max(1, min(CPU_MAX_STREAMS, int(float(measured) * window // max(1, context_tokens))))
    return n, (f"a CPU at {float(measured):.0f} tokens/s measured in {dtype}: every call's {context_tokens}-token "
               f"prompt read within {window:.0f} s, at most {CPU_MAX_STREAMS} calls")

"""Give freed memory back to the operating system between the phases of a job.

A job loads the evaluation LM (or a local candidate) in this process, works, and drops it before the next phase
starts a server of its own.  Dropping the model frees its tensors to the C allocator, but glibc keeps much of what
it freed in its heaps (tensors under its mmap threshold, and the threshold grows as large blocks are freed), so the
process's resident memory stays where it peaked: measured on the score stage of the first run, 1.39 GB after
scoring, 0.88 GB once the estimator was collected and 0.57 GB after ``malloc_trim(0)``.  That difference is what a
local judge's server, started next, adds to the job's peak (issue 47: under 2 GB).

:func:`release_memory` collects garbage and, where the C library is glibc, asks it to return free heap pages
(``malloc_trim``); elsewhere it only collects.  It never fails: it is housekeeping, not a step a job depends on.

Within a phase, two native caches hold memory the job no longer uses, and :func:`bound_allocations` (called where a
model is about to load: the hf estimator, local generation, the dtype probe, a local server's environment) bounds
both, for this process and the servers it starts:

- **glibc's mmap threshold.**  Left dynamic, it rises to 32 MB as large blocks are freed, so the scoring's logits and
  activations come from the heap and stay resident after they are freed: a float32 estimator scoring one paper held
  1.60-1.66 GB between requests where 0.99 GB was in use.  Fixed at :data:`MMAP_THRESHOLD` (4 MiB) every larger
  block is mapped and unmapped on its own: 1.28-1.35 GB, at the same speed (``benchmarks/memory_phases.py``).
- **oneDNN's primitive cache**, which torch's bfloat16 matmuls on a CPU use: one primitive per input shape, with its
  own buffers, up to 1,024 of them.  Every scoring batch has a shape of its own, so the job grew by about 20 MB a
  paper: a bfloat16 score stage went from 1.4 to 2.0 GB.  :data:`ONEDNN_CACHE` primitives hold every shape one
  decoding step or one scoring batch uses (about ten), and the growth stopped at about a third of it.

An operator's own ``MALLOC_MMAP_THRESHOLD_`` or ``ONEDNN_PRIMITIVE_CACHE_CAPACITY`` wins.  A vLLM server gets the
mmap threshold but not the oneDNN bound: vLLM's CPU kernels manage their own primitives, and the bound was not
measured there.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import logging
import os
from typing import Any

log = logging.getLogger(__name__)

#: Blocks of this size and above are mapped on their own and go back to the OS when freed (glibc's M_MMAP_THRESHOLD,
#: fixed, which also stops its dynamic growth).
MMAP_THRESHOLD = 4 * 2 ** 20
#: oneDNN primitives kept (its default is 1,024; a primitive made again costs microseconds next to a batch's forward).
ONEDNN_CACHE = 32
_M_MMAP_THRESHOLD = -3  # mallopt's parameter number (malloc.h)
_OURS: set[str] = set()  # the variables bound_allocations set (an operator's own are not in it)


def set_by_grebench(name: str) -> bool:
    """Whether the environment variable ``name`` holds :func:`bound_allocations`' value rather than an operator's."""
    return name in _OURS


@functools.cache
def _glibc() -> Any | None:
    """glibc's handle, or None where the C library is another (musl, macOS) or cannot be loaded."""
    try:
        name = ctypes.util.find_library("c")
        libc = ctypes.CDLL(name or "libc.so.6")
        return libc if hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


def resident_bytes() -> int | None:
    """This process's resident memory in bytes, from ``/proc/self/statm`` (None where there is no procfs)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * _page_size()
    except (OSError, ValueError, IndexError):
        return None


@functools.cache
def _page_size() -> int:
    return int(os.sysconf("SC_PAGE_SIZE"))


def bound_allocations() -> dict[str, int]:
    """Fix glibc's mmap threshold and bound oneDNN's primitive cache (see the module docstring) for this process and
    the child processes it starts (through the environment, which an operator's values override); what it set."""
    # the first is read by glibc when a process starts, the second by oneDNN at its first use
    for key, value in (("MALLOC_MMAP_THRESHOLD_", MMAP_THRESHOLD), ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", ONEDNN_CACHE)):
        if key not in os.environ:
            os.environ[key] = str(value)
            _OURS.add(key)
    out = {"onednn_primitive_cache": int(os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"])}
    libc = _glibc()
    try:
        threshold = int(os.environ["MALLOC_MMAP_THRESHOLD_"])
    except ValueError:
        return out
    if libc is not None and hasattr(libc, "mallopt"):
        try:
            if libc.mallopt(_M_MMAP_THRESHOLD, threshold) == 1:  # 1: done (glibc's mallopt returns 0 on an error)
                out["mmap_threshold"] = threshold
        except (OSError, AttributeError, ctypes.ArgumentError):  # pragma: no cover - a C library that lied
            pass
    return out


def release_memory(why: str = "") -> int | None:
    """Collect garbage and return free heap pages to the OS (glibc); the bytes it gave back where measurable."""
    before = resident_bytes()
    gc.collect()
    libc = _glibc()
    if libc is not None:
        try:
            libc.malloc_trim(0)
        except (OSError, AttributeError):  # pragma: no cover - a C library that lied about its symbol
            pass
    after = resident_bytes()
    if before is None or after is None:
        return None
    log.debug("released %.0f MB of memory%s (resident now %.0f MB)", (before - after) / 2 ** 20,
              f" after {why}" if why else "", after / 2 ** 20)
    return before - after

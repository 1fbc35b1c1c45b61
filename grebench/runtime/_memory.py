"""Give freed memory back to the operating system between the phases of a job.

A job loads the evaluation LM (or a local candidate) in this process, works, and drops it before the next phase
starts a server of its own.  Dropping the model frees its tensors to the C allocator, but glibc keeps much of what
it freed in its heaps (tensors under its mmap threshold, and the threshold grows as large blocks are freed), so the
process's resident memory stays where it peaked: measured on the score stage of the first run, 1.39 GB after
scoring, 0.88 GB once the estimator was collected and 0.57 GB after ``malloc_trim(0)``.  That difference is what a
local judge's server, started next, adds to the job's peak (issue 47: under 2 GB).

:func:`release_memory` collects garbage and, where the C library is glibc, asks it to return free heap pages
(``malloc_trim``); elsewhere it only collects.  It never fails: it is housekeeping, not a step a job depends on.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import logging
from typing import Any

log = logging.getLogger(__name__)


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
    import os

    return int(os.sysconf("SC_PAGE_SIZE"))


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

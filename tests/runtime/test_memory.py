"""release_memory gives the heap pages a phase freed back to the operating system (issue 47: the job's peak)."""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import subprocess
import sys

import pytest

from grebench.runtime import resident_bytes

#: Run in a fresh interpreter, so that the allocator state of the test process (its arenas, what earlier tests
#: loaded) cannot decide the outcome.
PROGRAM = """
import ctypes, ctypes.util, json
from grebench.runtime import release_memory, resident_bytes
libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
size, count = 16 * 1024, 12288  # 192 MiB in small blocks (under the mmap threshold and the free-time trim)
blocks, keep = [], []
for _ in range(count):  # each block followed by a small live one: freed blocks are holes, not the heap's top
    blocks.append(libc.malloc(size))
    keep.append(libc.malloc(64))
for b in blocks:
    libc.memset(b, 1, size)  # touched: resident
loaded = resident_bytes()
for b in blocks:
    libc.free(b)
freed = resident_bytes()
gave_back = release_memory("a test")
print(json.dumps({"loaded": loaded, "freed": freed, "after": resident_bytes(), "gave_back": gave_back}))
"""


def test_freed_heap_memory_goes_back_to_the_os() -> None:
    """Blocks under glibc's mmap threshold stay in its heap once freed (the resident size does not fall); after
    release_memory it does.  This is what a dropped model's many small tensors leave behind."""
    if resident_bytes() is None:
        pytest.skip("no /proc/self/statm: resident memory cannot be read here")
    if not hasattr(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6"), "malloc_trim"):
        pytest.skip("the C library is not glibc: release_memory only collects garbage here")
    out = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, check=True, timeout=120)
    m = json.loads(out.stdout.strip().splitlines()[-1])
    mib = 2 ** 20
    assert m["loaded"] - m["freed"] < 50 * mib, m  # free() alone kept the pages
    assert m["freed"] - m["after"] > 150 * mib and m["gave_back"] > 150 * mib, m  # release_memory gave them back

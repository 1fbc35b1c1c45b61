"""PDF → model-facing text, in a child process with a time limit and a memory limit.

The child runs ``grebench.ingest._pdf_worker`` as ``__main__`` (see that module for the cleaning and ``_pdf_hidden``
for hidden-text detection). The memory limit is ``RLIMIT_AS`` (Linux/Unix ``resource``), set by the child's first
statement, before Python imports PyMuPDF. It caps the address space, so it must leave room for Python and PyMuPDF
(about 90 MiB of mappings; a 10-page paper peaks under 150 MiB). The child sets it itself rather than through
``preexec_fn``, which is unsafe in a threaded parent (the scheduler runs jobs in threads).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from typing import TYPE_CHECKING, cast

from grebench import stop

if TYPE_CHECKING:  # the worker runs under a memory cap: the store (DuckDB) is never imported at run time
    from grebench.store import PdfExtraction


EXIT_MEMORY = 3  # the worker's exit status when its memory cap was hit
_MEMORY_WORDS = ("memoryerror", "out of memory", "cannot allocate", "bad_alloc", "malloc", "failed to map segment")
_CRASH_SIGNALS = {signal.SIGKILL, signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS}


def _failure(error: str, pages: int | None = None) -> PdfExtraction:
    """The result of an extraction that gave no text."""
    return {"text": None, "pages": pages, "hidden": [], "flags": [], "error": error}


# The child's program: cap the address space before anything is imported, then run the worker module as
# ``__main__`` (``grebench`` and ``grebench.ingest`` import nothing heavy at package import time).
_BOOTSTRAP = (
    "import resource, runpy, sys\n"
    "limit = int(sys.argv[1]) * 1024 * 1024\n"
    "if limit > 0:\n"
    "    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))\n"
    "runpy.run_module('grebench.ingest._pdf_worker', run_name='__main__', alter_sys=True)\n"
)


def _worker_command(memory_mb: int) -> list[str]:
    """The child's command line: ``python -c BOOTSTRAP MEMORY_MB``."""
    return [sys.executable, "-c", _BOOTSTRAP, str(int(memory_mb))]


def _communicate(proc: subprocess.Popen[bytes], data: bytes, timeout_s: float) -> tuple[bytes, bytes] | None:
    """The child's (stdout, stderr), or None when ``timeout_s`` passed (the child is then killed).  A stop
    (:mod:`grebench.stop`) kills the child and raises :class:`~grebench.stop.Interrupted` at once, instead of after
    ``pdf_timeout_s``: ``communicate`` runs on a worker thread (it cannot be resumed in slices: a second call no
    longer writes the input)."""
    try:
        return stop.call(lambda: proc.communicate(input=data, timeout=timeout_s), "grebench-pdf")
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return None
    except stop.Interrupted:
        proc.kill()  # the worker's communicate then ends with the child
        raise


def extract_pdf(data: bytes, *, timeout_s: float, memory_mb: int, max_bytes: int) -> PdfExtraction:
    """Returns {"text": str|None, "pages": int|None, "hidden": [{"text": str, "reason": str, "page": int}],
    "flags": [{"phrase": str, "page": int, "hidden": bool}], "error": str|None}.

    Never raises for bad input: empty, not a PDF, too large (refused unparsed), corrupt, encrypted, too slow or too
    hungry all come back as ``text=None`` with a clear ``error``. A ``warnings`` list may be added (pages skipped,
    for instance). A stop request kills the child and raises :class:`grebench.stop.Interrupted`.
    """
    if not data:
        return _failure("empty input (0 bytes), not a PDF")
    if len(data) > max_bytes:
        return _failure(f"PDF too large: {len(data):,} bytes is over the limit of {max_bytes:,} bytes")
    if b"%PDF-" not in data[:1024]:
        return _failure("not a PDF (no %PDF- header)")
    try:
        proc = subprocess.Popen(_worker_command(memory_mb), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
    except OSError as exc:
        return _failure(f"could not start the extraction process: {exc}")
    answer = _communicate(proc, data, timeout_s)
    if answer is None:
        return _failure(f"extraction timed out after {timeout_s:g} s")
    out, err = answer
    memory_error = f"extraction exceeded the {memory_mb} MiB memory limit"
    stderr = err.decode("utf-8", "replace")
    if proc.returncode == EXIT_MEMORY:
        return _failure(memory_error)
    if proc.returncode < 0:
        sig = signal.Signals(-proc.returncode)
        if sig in _CRASH_SIGNALS:
            return _failure(f"{memory_error} (or MuPDF crashed: worker killed by {sig.name})")
        return _failure(f"extraction process killed by {sig.name}")
    if proc.returncode != 0:
        if any(word in stderr.lower() for word in _MEMORY_WORDS):
            return _failure(memory_error)
        last = stderr.strip().splitlines()[-1] if stderr.strip() else "no message"
        return _failure(f"extraction process failed (exit {proc.returncode}): {last[:300]}")
    try:
        result = json.loads(out.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return _failure(f"extraction process gave unreadable output: {exc}")
    if not isinstance(result, dict) or "error" not in result:
        return _failure("extraction process gave an unexpected result")
    return cast("PdfExtraction", result)  # the worker's own record (extract_bytes), read back

"""One line for a failure to read or write a file: the cause and the path (issue 64).

A full disk reaches grebench through three doors, each with its own words: Python's ``OSError`` (errno and, when the
caller gave one, the file name), pyarrow's ``OSError(28, "Error writing bytes to file. Detail: ...")`` with no file
name, and DuckDB's ``IOException`` (``Could not write file "/data/grebench.duckdb.wal": No space left on device``).
:func:`failure_text` says each the same way, ``no space left on device writing /data/grebench.duckdb.wal``, so a
recorded failure and the command's last line tell an operator which file and why.  :func:`naming_path` lets a writer
that knows the path (pyarrow does not) put it on the error.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: The causes said in words of their own; any other errno is said with the system's text.
_CAUSES = {errno.ENOSPC: "no space left on device", errno.EDQUOT: "disk quota exceeded",
           errno.EROFS: "read-only file system", errno.EACCES: "permission denied", errno.EIO: "input/output error"}
#: DuckDB's text of a file error: the path in double quotes after "file" (``Could not write file "…"``).
_DUCKDB_PATH = re.compile(r'file "([^"]+)"')
_ERRNO_TEXT = {os.strerror(code).lower(): code for code in _CAUSES}


def _cause(code: int | None, text: str) -> str:
    if code in _CAUSES:
        return _CAUSES[code]  # type: ignore[index]
    lowered = text.lower()
    found = next((c for t, c in _ERRNO_TEXT.items() if t in lowered), None)
    if found is not None:
        return _CAUSES[found]
    return text.splitlines()[0].strip() if text.strip() else "unknown error"


def io_cause(exc: BaseException) -> tuple[str, str | None] | None:
    """(cause, path) of a file error, or None when ``exc`` is not one (an ``OSError`` or a DuckDB IO error)."""
    if isinstance(exc, OSError) and not isinstance(exc, (ConnectionError, TimeoutError)):
        text = exc.strerror or str(exc)
        path = exc.filename if isinstance(exc.filename, str) else None
        return _cause(exc.errno, text), path
    if type(exc).__module__.split(".")[0] not in ("duckdb", "_duckdb"):
        return None
    # an IO error, or a fatal one caused by it ("Failed to create checkpoint because of error: Could not write
    # file "…": No space left on device")
    message = str(exc).removeprefix("IO Error: ")
    match = _DUCKDB_PATH.search(message)
    if match is None:
        return (_cause(None, message), None) if type(exc).__name__ == "IOException" else None
    return _cause(None, message[match.end():].lstrip(": ")), match.group(1)


def failure_text(exc: BaseException) -> str:
    """One line for a stage's or a command's failure: a file error as ``CAUSE writing PATH`` (``no space left on
    device writing /data/grebench.duckdb.wal``), else ``Type: message``."""
    found = io_cause(exc)
    if found is None:
        return f"{type(exc).__name__}: {exc}"
    cause, path = found
    if path is None:
        return cause
    verb = "writing" if cause in ("no space left on device", "disk quota exceeded", "read-only file system") \
        else "on"
    return f"{cause} {verb} {path}"


@contextmanager
def naming_path(path: Path | str) -> Iterator[None]:
    """Re-raise a file error of the block that names no file as one naming ``path`` (pyarrow's do not)."""
    try:
        yield
    except OSError as exc:
        if isinstance(exc.filename, str) or isinstance(exc, (ConnectionError, TimeoutError)):
            raise
        code = exc.errno
        if code is None and "no space left on device" in str(exc).lower():
            code = errno.ENOSPC
        raise OSError(code, exc.strerror or str(exc), str(path)) from exc


@contextmanager
def removed_on_failure(path: Path) -> Iterator[Path]:
    """``path`` (a file being written beside its target) is removed when the block fails (a full disk), so no
    half-written file is left for the next run to find; named after the file a file error left unnamed."""
    try:
        with naming_path(path):
            yield path
    except BaseException:
        path.unlink(missing_ok=True)
        raise

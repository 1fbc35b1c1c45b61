"""Gradio's own upload route, bounded: ``POST /gradio_api/upload`` serves only what the app's one upload component
needs, per address and in all, and uploaded copies do not stay.

Gradio stores any file posted to its upload route (``max_file_size`` each) before any handler runs, serves it back
at ``/gradio_api/file=``, and never removes it.  :class:`UploadQuota` is what the app's request limits
(:mod:`grebench.site._limits`, an ASGI middleware that answers before Gradio reads a byte of the body) ask about an
upload request:

* ``app_uploads_per_address_per_hour`` requests per client address, refused ones included (the address is the one
  the app's rate limit uses: uvicorn's proxy handling follows ``app_trusted_proxies``);
* each address's own share of the upload space: ``app_upload_files_per_address_per_hour`` files and
  ``app_upload_bytes_per_address_per_hour`` bytes, so one address cannot fill the space for everyone;
* at most ``app_upload_max_files`` files and ``app_upload_max_bytes`` bytes in Gradio's upload folder at once.

Uploaded copies go when the import handler has read them (:func:`discard_upload`) and, whatever happens, after
``app_upload_ttl_s`` (Gradio's own ``delete_cache`` of the Blocks).
"""

from __future__ import annotations

import collections
import os
import threading
import time
from pathlib import Path
from typing import Any

from grebench.settings import AppSettings

_clock = time.monotonic  # the hour window's clock (tests replace it)


def upload_folder() -> Path:
    """Where Gradio keeps uploaded files (``GRADIO_TEMP_DIR``, or the system temp dir's ``gradio``)."""
    from gradio.utils import get_upload_folder

    return Path(get_upload_folder()).resolve()


def discard_upload(path: str | os.PathLike[str] | None) -> bool:
    """Remove an uploaded file once read, only when it lies inside Gradio's upload folder; whether it was removed."""
    if not path:
        return False
    try:
        target = Path(path).resolve()
        if not target.is_relative_to(upload_folder()) or not target.is_file():
            return False
        target.unlink()
        try:
            target.parent.rmdir()  # Gradio puts each upload in a folder of its own
        except OSError:
            pass
        return True
    except OSError:
        return False


def _folder_usage(root: Path, stop_after: int, newer_than: float | None = None) -> tuple[int, int]:
    """(files, bytes) under ``root``, counting at most ``stop_after`` files (enough to know a cap is reached), and
    only files modified after ``newer_than`` (a time.time() value) when it is given."""
    files = size = 0
    for dirpath, _, names in os.walk(root):
        for name in names:
            try:
                info = os.stat(os.path.join(dirpath, name))
            except OSError:
                continue
            if newer_than is not None and info.st_mtime < newer_than:
                continue
            size += info.st_size
            files += 1
            if files >= stop_after:
                return files, size
    return files, size


class UploadQuota:
    """Per-address and global limits of the upload route (see the module docstring); thread-safe."""

    def __init__(self, per_hour: int, files_per_hour: int, bytes_per_hour: int, max_files: int,
                 max_bytes: int, max_age_s: float | None = None) -> None:
        self.per_hour, self.files_per_hour, self.bytes_per_hour = per_hour, files_per_hour, bytes_per_hour
        self.max_files, self.max_bytes = max_files, max_bytes
        #: files older than this are past every app's ``delete_cache`` age: left behind by an app process that
        #: ended before its cleanup ran (a crash, a test run), they do not fill this app's upload space
        self.max_age_s = max_age_s
        self._requests: dict[str, collections.deque[float]] = {}
        self._stored: dict[str, collections.deque[tuple[float, int, int]]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _recent(table: dict[str, collections.deque[Any]], address: str, now: float) -> collections.deque[Any]:
        """The address's entries of the last hour (older ones dropped); idle addresses are forgotten in bulk."""
        if len(table) > 100_000:  # forget idle addresses rather than grow without end
            for key in [a for a, q in table.items() if not q or now - _when(q[-1]) >= 3600]:
                del table[key]
        seen = table.setdefault(address, collections.deque())
        while seen and now - _when(seen[0]) >= 3600:
            seen.popleft()
        return seen

    def count(self, address: str) -> tuple[int, str] | None:
        """Record one upload request of ``address`` (before anything else is checked: refusals count); (status,
        message) when it is over ``per_hour``, else None."""
        now = _clock()
        with self._lock:
            requests = self._recent(self._requests, address, now)
            requests.append(now)
            if len(requests) > self.per_hour:
                return 429, f"upload refused: more than {self.per_hour} uploads per hour from your address"
        return None

    def before(self, address: str, length: int) -> tuple[int, str] | None:
        """(status, message) refusing an upload request of ``address`` declaring ``length`` body bytes before its
        body is read (the address's share or the space is used up), or None."""
        now = _clock()
        with self._lock:
            stored = self._recent(self._stored, address, now)
            files, size = sum(e[1] for e in stored), sum(e[2] for e in stored)
        if files >= self.files_per_hour or size + length > self.bytes_per_hour:
            return 429, (f"upload refused: your address's share of the upload space is {self.files_per_hour} files "
                         f"and {self.bytes_per_hour:,} bytes per hour")
        stale = None if self.max_age_s is None else time.time() - self.max_age_s
        files, size = _folder_usage(upload_folder(), self.max_files, stale)
        if files >= self.max_files or size + length > self.max_bytes:
            return 503, "upload refused: the upload space is full, try again later"
        return None

    def accept(self, address: str, files: int, length: int) -> tuple[int, str] | None:
        """Once the body is read and its parts counted: charge ``files`` and ``length`` bytes to the address's share,
        or (status, message) refusing the request when they do not fit in it."""
        now = _clock()
        with self._lock:
            stored = self._recent(self._stored, address, now)
            if sum(e[1] for e in stored) + files > self.files_per_hour \
                    or sum(e[2] for e in stored) + length > self.bytes_per_hour:
                return 429, (f"upload refused: your address's share of the upload space is {self.files_per_hour} "
                             f"files and {self.bytes_per_hour:,} bytes per hour")
            stored.append((now, files, length))
        return None


def _when(entry: float | tuple[float, int, int]) -> float:
    return entry[0] if isinstance(entry, tuple) else entry


def upload_quota(app: AppSettings) -> UploadQuota:
    """The :class:`UploadQuota` of the app's settings."""
    return UploadQuota(per_hour=app.app_uploads_per_address_per_hour,
                       files_per_hour=app.app_upload_files_per_address_per_hour,
                       bytes_per_hour=app.app_upload_bytes_per_address_per_hour,
                       max_files=app.app_upload_max_files, max_bytes=app.app_upload_max_bytes,
                       max_age_s=app.app_upload_ttl_s)

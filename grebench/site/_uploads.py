"""Gradio's own upload route, bounded: ``POST /gradio_api/upload`` serves only what the app's one upload component
needs, per address and in all, and uploaded copies do not stay.

Gradio stores any file posted to its upload route (``max_file_size`` each) before any handler runs, serves it back
at ``/gradio_api/file=``, and never removes it.  :class:`UploadGate` (an ASGI middleware, given to Gradio's FastAPI
app through ``launch(app_kwargs=...)``) answers before Gradio reads the body:

* one file of at most the import form's limit per request (``Content-Length`` bound; a chunked body is refused);
* ``app_uploads_per_address_per_hour`` requests per client address, refused ones included (the address is the one
  the app's rate limit uses: uvicorn's proxy handling follows ``app_trusted_proxies``);
* at most ``app_upload_max_files`` files and ``app_upload_max_bytes`` bytes in Gradio's upload folder at once.

Uploaded copies go when the import handler has read them (:func:`discard_upload`) and, whatever happens, after
``app_upload_ttl_s`` (Gradio's own ``delete_cache`` of the Blocks).
"""

from __future__ import annotations

import collections
import os
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
MULTIPART_OVERHEAD = 64 * 1024  # form boundaries and headers around the one file
_clock = time.monotonic  # the rate window's clock (tests replace it)


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


def _folder_usage(root: Path, stop_after: int) -> tuple[int, int]:
    """(files, bytes) under ``root``, counting at most ``stop_after`` files (enough to know a cap is reached)."""
    files = size = 0
    for dirpath, _, names in os.walk(root):
        for name in names:
            try:
                size += os.path.getsize(os.path.join(dirpath, name))
            except OSError:
                continue
            files += 1
            if files >= stop_after:
                return files, size
    return files, size


class UploadGate:
    """ASGI middleware in front of Gradio's upload route (see the module docstring)."""

    def __init__(self, app: Any, max_file_bytes: int, per_hour: int, max_files: int, max_bytes: int) -> None:
        self.app = app
        self.max_request = max_file_bytes + MULTIPART_OVERHEAD
        self.per_hour, self.max_files, self.max_bytes = per_hour, max_files, max_bytes
        self._seen: dict[str, collections.deque[float]] = {}
        self._lock = threading.Lock()

    def _count(self, address: str) -> int:
        """Record one upload request of ``address``; how many it made in the last hour (this one included)."""
        now = _clock()
        with self._lock:
            if len(self._seen) > 100_000:  # forget idle addresses rather than grow without end
                self._seen = {a: q for a, q in self._seen.items() if q and now - q[-1] < 3600}
            seen = self._seen.setdefault(address, collections.deque())
            while seen and now - seen[0] >= 3600:
                seen.popleft()
            seen.append(now)
            return len(seen)

    def refusal(self, scope: Scope) -> tuple[int, str] | None:
        """(status, message) refusing this upload request, or None to let Gradio take it."""
        client = scope.get("client")  # uvicorn already applied app_trusted_proxies (FORWARDED_ALLOW_IPS)
        address = str(client[0]) if client else "unknown"
        if self._count(address) > self.per_hour:
            return 429, f"upload refused: more than {self.per_hour} uploads per hour from your address"
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length")
        if length is None or not length.strip().isdigit():
            return 411, "upload refused: a Content-Length is required"
        if int(length) > self.max_request:
            return 413, f"upload refused: one file of at most {self.max_request - MULTIPART_OVERHEAD:,} bytes"
        files, size = _folder_usage(upload_folder(), self.max_files)
        if files >= self.max_files or size + int(length) > self.max_bytes:
            return 503, "upload refused: the upload space is full, try again later"
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") == "http" and scope.get("method") == "POST" \
                and str(scope.get("path", "")).rstrip("/").endswith("/upload"):
            refused = self.refusal(scope)
            if refused is not None:
                status, message = refused
                body = message.encode("utf-8")
                await send({"type": "http.response.start", "status": status,
                            "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                        (b"content-length", str(len(body)).encode("ascii"))]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def upload_gate(settings: Any) -> Any:
    """The :class:`UploadGate` of these settings as a Starlette ``Middleware`` entry (for ``app_kwargs``)."""
    from starlette.middleware import Middleware

    from grebench.submissions import UPLOAD_MAX_BYTES

    return Middleware(UploadGate, max_file_bytes=UPLOAD_MAX_BYTES, per_hour=settings.app_uploads_per_address_per_hour,
                      max_files=settings.app_upload_max_files, max_bytes=settings.app_upload_max_bytes)

"""The app's own limits on every route, enforced before Gradio reads a request: a request rate per client address,
a body cap (the upload route keeps its own larger one), and a cap on the files (multipart parts) of one request.

Gradio's routes read whole bodies into memory (a 300 MB JSON POST to ``/gradio_api/call/submit`` raised the app's
RSS from 730 MB to 1.51 GB) and its upload route stores every part of a multipart body (one POST of 900 small files
stored 900).  :class:`RequestLimits` is an ASGI middleware given to Gradio's FastAPI app through
``launch(app_kwargs=...)``.  For each HTTP request it:

1. takes one token of the client address's bucket (``app_requests_per_address_per_min``; the address is the
   socket's, which uvicorn rewrites from forwarded headers only for ``app_trusted_proxies``): else 429;
2. refuses a declared ``Content-Length`` over the route's cap at once (413), and a non-numeric one (400);
3. for the upload route, asks :class:`~grebench.site._uploads.UploadQuota` (requests per hour, the address's share
   of the upload space, the space left);
4. reads the body itself, counting bytes through the receive channel (a chunked body, or one whose
   ``Content-Length`` does not match, is counted all the same) into a spooled temporary file that keeps at most
   :data:`SPOOL_MEMORY` bytes in memory, and counts multipart parts as they stream: over the cap → 413 after at
   most cap bytes were kept, over ``app_upload_files_per_request`` parts → 413;
5. only then hands the request to Gradio, replaying the checked body.

Bodies are bounded in time and memory too (issue 48: 4,000 connections each sending 255 KiB of a declared 1 MiB
and then a byte every 5 s took RSS from 311 to 1,217 MiB, never returned): the whole body must arrive within
``app_body_timeout_s`` (else 408), at most ``app_bodies_in_flight`` bodies are read at once (a further one gets 503
before a byte is read), and each keeps at most ``app_body_memory_bytes / app_bodies_in_flight`` in memory (the rest
on disk).  Connections that never get as far as a request are the protocol guard's (:mod:`grebench.site._connections`).

Refusals are a short JSON object ``{"error": ..., "limit": ..., "read": ...}``.
"""

from __future__ import annotations

import asyncio
import json
import re
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from grebench.settings import AppSettings
from grebench.site._uploads import UploadQuota, upload_quota

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
MULTIPART_OVERHEAD = 64 * 1024  # form boundaries and headers around the one file of an upload
SPOOL_MEMORY = 256 * 1024  # a body being checked keeps at most this much in memory; the rest waits on disk
REPLAY_CHUNK = 64 * 1024
_BOUNDARY = re.compile(rb'boundary="?([^";,\s]{1,200})"?', re.IGNORECASE)
_clock = time.monotonic  # the rate buckets' clock (tests replace it)


@dataclass
class Observed:
    """What the middleware saw (tests read it): of any refused request, the most body bytes it had kept, and the most
    it had received (kept + the message that crossed the cap, which uvicorn's flow control bounds); how
    many requests it refused per status."""

    max_read_refused: int = 0
    max_received_refused: int = 0
    refused: dict[int, int] | None = None

    def refusal(self, status: int, read: int, received: int) -> None:
        """Count one refusal with ``status`` after ``read`` body bytes were kept of ``received``."""
        self.refused = self.refused or {}
        self.refused[status] = self.refused.get(status, 0) + 1
        self.max_read_refused = max(self.max_read_refused, read)
        self.max_received_refused = max(self.max_received_refused, received)


OBSERVED = Observed()


class RateLimiter:
    """Token buckets per client address: ``per_min`` requests a minute, bursts up to ``per_min``; thread-safe."""

    def __init__(self, per_min: int) -> None:
        self.capacity, self.rate = float(per_min), per_min / 60.0
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def allow(self, address: str) -> bool:
        """Take one token of ``address``'s bucket; whether there was one."""
        now = _clock()
        with self._lock:
            if len(self._buckets) > 100_000:  # forget addresses whose bucket has refilled: they hold no state
                self._buckets = {a: (t, s) for a, (t, s) in self._buckets.items()
                                 if t + (now - s) * self.rate < self.capacity}
            tokens, since = self._buckets.get(address, (self.capacity, now))
            tokens = min(self.capacity, tokens + (now - since) * self.rate)
            if tokens < 1.0:
                self._buckets[address] = (tokens, now)
                return False
            self._buckets[address] = (tokens - 1.0, now)
            return True


class PartCounter:
    """Counts the parts a multipart body opens as it streams (a delimiter ``--BOUNDARY`` not followed by ``--``),
    across chunk edges, without keeping more than one delimiter's length of it."""

    def __init__(self, boundary: bytes) -> None:
        self.delimiter = b"--" + boundary
        self.parts = 0
        self._tail = b""

    def feed(self, chunk: bytes, final: bool = False) -> int:
        """Count the parts opened in ``chunk``; the parts opened so far."""
        window, width = self._tail + chunk, len(self.delimiter)
        keep_from = max(0, len(window) - width - 1)
        at = window.find(self.delimiter)
        while at != -1:
            after = at + width
            if after + 2 > len(window) and not final:
                keep_from = at  # cannot tell an opening delimiter from the closing one yet
                break
            if window[after:after + 2] != b"--":
                self.parts += 1
            keep_from = max(keep_from, after)
            at = window.find(self.delimiter, after)
        self._tail = window[keep_from:]
        return self.parts


def _boundary(headers: dict[bytes, bytes]) -> bytes | None:
    kind = headers.get(b"content-type", b"")
    if not kind.lower().startswith(b"multipart/"):
        return None
    found = _BOUNDARY.search(kind)
    return found.group(1) if found else b""


async def _answer(send: Send, status: int, error: str, **extra: Any) -> None:
    body = json.dumps({"error": error, **extra}).encode("utf-8")
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode("ascii")),
               (b"connection", b"close")]
    if status == 429:
        headers.append((b"retry-after", b"60"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class RequestLimits:
    """ASGI middleware: rate, body and part limits on every route (see the module docstring)."""

    def __init__(self, app: Any, per_min: int, max_body: int, max_upload: int, files_per_request: int,
                 quota: UploadQuota | None = None, body_timeout_s: float = 60.0, bodies_in_flight: int = 32,
                 body_memory: int = 8 * 1024 * 1024) -> None:
        self.app, self.max_body, self.max_upload = app, max_body, max_upload
        self.files_per_request, self.quota = files_per_request, quota
        self.rate = RateLimiter(per_min)
        self.body_timeout_s, self.bodies_in_flight = body_timeout_s, bodies_in_flight
        # each body in flight keeps at most its share of the memory budget; the rest of it waits on disk
        self.spool_memory = max(0, min(SPOOL_MEMORY, body_memory // max(1, bodies_in_flight)))
        self.in_flight = 0

    async def _refuse(self, send: Send, status: int, error: str, read: int = 0, received: int = 0,
                      **extra: Any) -> None:
        OBSERVED.refusal(status, read, max(read, received))
        await _answer(send, status, error, read=read, **extra)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        client = scope.get("client")  # uvicorn already applied app_trusted_proxies (FORWARDED_ALLOW_IPS)
        address = str(client[0]) if client else "unknown"
        if not self.rate.allow(address):
            await self._refuse(send, 429, "too many requests from your address, try again in a minute")
            return
        upload = scope.get("method") == "POST" and str(scope.get("path", "")).rstrip("/").endswith("/upload")
        refused = self.quota.count(address) if upload and self.quota is not None else None
        if refused is not None:
            await self._refuse(send, *refused)
            return
        cap = self.max_upload if upload else self.max_body
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None and not declared.strip().isdigit():
            await self._refuse(send, 400, "a Content-Length must be a number")
            return
        if declared is not None and int(declared) > cap:
            await self._refuse(send, 413, f"request body larger than {cap:,} bytes", limit=cap)
            return
        if upload and self.quota is not None:
            if declared is None:
                await self._refuse(send, 411, "upload refused: a Content-Length is required")
                return
            refused = self.quota.before(address, int(declared))
            if refused is not None:
                await self._refuse(send, *refused)
                return
        if (declared is None or int(declared) == 0) and b"transfer-encoding" not in headers:
            await self.app(scope, receive, send)  # no body to read
            return
        await self._with_body(scope, receive, send, address, cap, headers, upload)

    async def _with_body(self, scope: Scope, receive: Receive, send: Send, address: str, cap: int,
                         headers: dict[bytes, bytes], upload: bool) -> None:
        boundary = _boundary(headers)
        if boundary == b"":
            await self._refuse(send, 400, "a multipart body needs a boundary")
            return
        if self.in_flight >= self.bodies_in_flight:  # slow bodies cannot pile up in memory: refused before reading
            await self._refuse(send, 503, f"the server is reading {self.bodies_in_flight} request bodies already, "
                               "try again in a minute", limit=self.bodies_in_flight)
            return
        self.in_flight += 1
        try:
            await self._read_body(scope, receive, send, address, cap, boundary, upload)
        finally:
            self.in_flight -= 1

    async def _read_body(self, scope: Scope, receive: Receive, send: Send, address: str, cap: int,
                         boundary: bytes | None, upload: bool) -> None:
        counter = PartCounter(boundary) if boundary else None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.body_timeout_s
        with tempfile.SpooledTemporaryFile(max_size=self.spool_memory) as spool:
            read, more = 0, True
            while more:
                try:  # the whole body within body_timeout_s: a client sending a byte every 5 s is not waited for
                    message = await asyncio.wait_for(receive(), max(0.0, deadline - loop.time()))
                except TimeoutError:
                    await self._refuse(send, 408, f"request body not received within {self.body_timeout_s:g} s",
                                       read=read, limit=self.body_timeout_s)
                    return
                if message["type"] == "http.disconnect":
                    return  # the client went away: nothing to hand on
                chunk, more = message.get("body", b""), bool(message.get("more_body", False))
                if read + len(chunk) > cap:
                    await self._refuse(send, 413, f"request body larger than {cap:,} bytes", read=read,
                                       received=read + len(chunk), limit=cap)
                    return
                if counter is not None and counter.feed(chunk, final=not more) > self.files_per_request:
                    await self._refuse(send, 413, f"at most {self.files_per_request} file(s) per request",
                                       read=read, limit=self.files_per_request)
                    return
                spool.write(chunk)
                read += len(chunk)
            if upload and self.quota is not None:
                refused = self.quota.accept(address, counter.parts if counter else 0, read)
                if refused is not None:
                    await self._refuse(send, *refused, read=read)
                    return
            spool.seek(0)
            replayed = False

            async def replay() -> Message:
                nonlocal replayed
                if replayed:
                    return await receive()  # after the body: disconnects, as the server reports them
                chunk = spool.read(REPLAY_CHUNK)
                replayed = spool.tell() >= read
                return {"type": "http.request", "body": chunk, "more_body": not replayed}

            await self.app(scope, replay, send)


def request_limits(app: AppSettings) -> Any:
    """The :class:`RequestLimits` of the app's settings as a Starlette ``Middleware`` entry (for ``app_kwargs``)."""
    from starlette.middleware import Middleware

    from grebench.submissions import UPLOAD_MAX_BYTES

    return Middleware(RequestLimits, per_min=app.app_requests_per_address_per_min,
                      max_body=app.app_max_body_bytes, max_upload=UPLOAD_MAX_BYTES + MULTIPART_OVERHEAD,
                      files_per_request=app.app_upload_files_per_request, quota=upload_quota(app),
                      body_timeout_s=float(app.app_body_timeout_s), bodies_in_flight=app.app_bodies_in_flight,
                      body_memory=app.app_body_memory_bytes)

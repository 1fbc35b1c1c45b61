"""Connections the app holds: bounded before a request reaches the app, so slow and idle clients cannot hold it down.

Issue 48: uvicorn (as Gradio starts it) closes a connection only when a keep-alive times out *after* a response.  A
connection that never sends a request, or sends its headers one byte every 5 s, was held for ever: 2 × 10,300 idle
connections reached the app's 20,000-fd limit and every fresh ``GET /`` timed out; 1,500 slow-header connections were
all still open after 40 s and none reached the middleware, so none counted against the rate limit.  uvicorn has no
header or first-request timeout and no per-address cap (``limit_concurrency`` answers 503 *after* accepting, and
counts nothing per address), so this module enforces them in the HTTP protocol itself, a subclass of uvicorn's h11
protocol (:func:`guarded_protocol`), given to uvicorn's ``Config(http=...)`` with the rest of the options
(:func:`server_options`):

* **per-address and total caps** — a connection beyond ``app_connections_per_address`` from one address, or beyond
  ``app_max_connections`` in all (itself kept :data:`FD_RESERVE` below the process's open-file limit), is closed as
  soon as it is accepted: its file descriptor is returned at once, nothing is read.  A trusted proxy's address
  (``app_trusted_proxies``) has only the total cap: it carries every client's connections;
* **idle before the first request** — ``app_idle_timeout_s`` from the accept (or from the end of the previous
  response) to the first byte of a request;
* **headers** — ``app_header_timeout_s`` from that first byte to the end of the request's headers;
* **keep-alive** — uvicorn's own ``timeout_keep_alive`` (``app_keep_alive_s``);
* bodies — read by the app's middleware (:mod:`grebench.site._limits`) under ``app_body_timeout_s``, at most
  ``app_bodies_in_flight`` at once and ``app_body_memory_bytes`` of them in memory.

The same limits stand in front of the app in ``compose.yaml`` (nginx, docs/deployment.md); the app holds without it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import resource
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

#: File descriptors kept free of client connections: the store, the exports, Gradio's files, logs, the event loop.
FD_RESERVE = 256

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class ConnectionLimits:
    """The connection limits of one server (see the module docstring); seconds and counts."""

    idle_s: float
    header_s: float
    keep_alive_s: int
    per_address: int
    total: int
    exempt: tuple[Network, ...] = ()


def open_file_limit() -> int:
    """The process's soft limit on open files."""
    return int(resource.getrlimit(resource.RLIMIT_NOFILE)[0])


def connection_limits(settings: Any, proxies: Sequence[Network] = ()) -> ConnectionLimits:
    """The :class:`ConnectionLimits` of these settings; the total cap stays :data:`FD_RESERVE` below the open-file
    limit whatever the setting says."""
    total = max(1, min(settings.app_max_connections, open_file_limit() - FD_RESERVE))
    return ConnectionLimits(float(settings.app_idle_timeout_s), float(settings.app_header_timeout_s),
                            settings.app_keep_alive_s, settings.app_connections_per_address, total, tuple(proxies))


@dataclass
class ConnectionGuard:
    """Open connections per client address and in all, shared by a server's connections (one event loop thread; a
    lock for readers in tests)."""

    limits: ConnectionLimits
    by_address: Counter[str] = field(default_factory=Counter)
    total: int = 0
    refused: int = 0
    timed_out: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _exempt(self, address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in net for net in self.limits.exempt)

    def admit(self, address: str) -> bool:
        """Count a new connection from ``address``; False (and nothing counted) when a cap is reached."""
        with self._lock:
            if self.total >= self.limits.total or (
                    self.by_address[address] >= self.limits.per_address and not self._exempt(address)):
                self.refused += 1
                return False
            self.by_address[address] += 1
            self.total += 1
            return True

    def release(self, address: str) -> None:
        """A counted connection from ``address`` closed."""
        with self._lock:
            self.total -= 1
            self.by_address[address] -= 1
            if self.by_address[address] <= 0:
                del self.by_address[address]


def guarded_protocol(guard: ConnectionGuard) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with ``guard``'s caps and the idle and header timeouts (see the module docstring)."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class GuardedH11Protocol(H11Protocol):
        _address: str | None = None
        _timer: asyncio.TimerHandle | None = None
        _reading_headers = False

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            peer = transport.get_extra_info("peername")
            address = str(peer[0]) if peer else "unknown"
            if not guard.admit(address):
                transport.abort()  # the descriptor is returned now; nothing was read
                return
            self._address = address
            super().connection_made(transport)
            self._arm(guard.limits.idle_s)

        def _arm(self, seconds: float) -> None:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = self.loop.call_later(seconds, self._expire)

        def _disarm(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

        def _expire(self) -> None:
            self._timer = None
            if not self.transport.is_closing():
                guard.timed_out += 1
                self.transport.abort()

        def data_received(self, data: bytes) -> None:
            if self.conn.their_state is h11.IDLE and not self._reading_headers:
                self._reading_headers = True  # the first byte of a request: its headers have header_s from now
                self._arm(guard.limits.header_s)
            super().data_received(data)
            if self._reading_headers and self.conn.their_state is not h11.IDLE:
                self._reading_headers = False  # headers complete: the body is the middleware's to time
                self._disarm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
                self._reading_headers = False  # waiting for the next request: idle again
                self._arm(max(guard.limits.idle_s, float(guard.limits.keep_alive_s)))

        def connection_lost(self, exc: Exception | None) -> None:
            if self._address is None:
                return  # refused at accept: never counted, never set up
            self._disarm()
            guard.release(self._address)
            self._address = None
            super().connection_lost(exc)

    return GuardedH11Protocol


def server_options(settings: Any, guard: ConnectionGuard) -> dict[str, Any]:
    """uvicorn ``Config`` options of these settings: the guarded protocol, keep-alive, the concurrency limit and the
    listen backlog."""
    return {"http": guarded_protocol(guard), "timeout_keep_alive": settings.app_keep_alive_s,
            "limit_concurrency": guard.limits.total, "backlog": min(2048, guard.limits.total),
            "h11_max_incomplete_event_size": 64 * 1024}


#: The guard of the server most recently started by :func:`guarded_uvicorn` (tests and the benchmark read it).
LAST_GUARD: list[ConnectionGuard] = []


@contextlib.contextmanager
def guarded_uvicorn(settings: Any, proxies: Sequence[Network] = ()) -> Iterator[ConnectionGuard]:
    """While active, the uvicorn ``Config`` that Gradio's ``launch`` builds gets :func:`server_options`.

    Gradio makes its ``uvicorn.Config`` itself from a fixed set of arguments; its module's ``uvicorn`` name is
    pointed, for the duration of ``launch`` only, at a namespace whose ``Config`` adds ours (uvicorn itself is not
    changed, so other servers in the process are not affected)."""
    from gradio import http_server

    guard = ConnectionGuard(connection_limits(settings, proxies))
    real = http_server.uvicorn
    options = server_options(settings, guard)

    def config(**kwargs: Any) -> Any:
        return real.Config(**{**kwargs, **options})

    http_server.uvicorn = SimpleNamespace(Config=config, Server=real.Server)  # type: ignore[assignment]
    LAST_GUARD[:] = [guard]
    try:
        yield guard
    finally:
        http_server.uvicorn = real

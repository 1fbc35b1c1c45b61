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
  ``app_max_connections`` in all (itself kept :data:`FD_RESERVE` below the process's open-file limit), is refused by
  the listening socket itself (:class:`GuardedListener`), before asyncio makes a transport, a task and a protocol of
  it: it is sent one short ``503`` (``Retry-After``), nothing is read, and it is **held** ``app_refused_hold_s``
  (to twice that, drawn at random) before it is closed, in a pool of its own (the descriptors left between the total
  cap and the open-file limit; beyond that pool it is closed at once).  A trusted proxy's address
  (``app_trusted_proxies``) has only the total cap: it carries every client's connections;
* **idle before the first request** — ``app_idle_timeout_s`` from the accept (drawn between half of it and all of
  it) or from the end of the previous response to the first byte of a request;
* **headers** — ``app_header_timeout_s`` from that first byte to the end of the request's headers;
* **keep-alive** — uvicorn's own ``timeout_keep_alive`` (``app_keep_alive_s``);
* bodies — read by the app's middleware (:mod:`grebench.site._limits`) under ``app_body_timeout_s``, at most
  ``app_bodies_in_flight`` at once and ``app_body_memory_bytes`` of them in memory.

Why refusals are held, not closed at once: an attacker whose connection is closed reconnects at once.  Closing every
over-cap connection as it came (issue 48's first guard) let 20,000 reconnecting idle sockets from 8 addresses keep
the listen queue full (about 2,200 accepts and closes a second, each a task, a transport and a protocol in Python);
the kernel then dropped a fresh client's connection attempt, which its own kernel retried 1, 3 and 7 s later.  A held
refusal costs the attacker its socket for ``app_refused_hold_s``, so the reconnects fall from as fast as a CPU can
make them to (held sockets) / (hold) a second, and what is still refused at once (beyond the pool) is refused in a
few microseconds at the socket, faster than a client can connect.

Floods from many addresses (issue 62 §4: 20,000 idle connections from 200 addresses, 100 an address, so the
per-address cap never acts): the total cap holds them, and at it a fresh address evicts an idle connection of the
fullest address (:meth:`ConnectionGuard.admit`).  What slowed a fresh client: the flood's first seconds (20,000
connections overflow the kernel's accept queue; a fresh client's SYN dropped there is sent again 1 s later), the
machine's other load, the flood sockets beyond the tarpit (refused and back at once), and the flood coming back **in
bursts**: the refusals held in the flood's first second all came due together ``app_refused_hold_s`` later, and the
idle connections accepted together were all closed together ``app_idle_timeout_s`` later, each burst reconnecting at
once and queueing ahead of the fresh client.  The bursts are the app's to spread: holds are drawn between
``app_refused_hold_s`` and twice it, first-request timeouts between half of ``app_idle_timeout_s`` and all of it
(:meth:`ConnectionGuard.first_request_s`); the listen backlog is as long as the kernel allows
(:data:`LISTEN_BACKLOG`), and the app raises its soft open-file limit to the hard one at launch
(:func:`raise_open_file_limit`: the caps and the tarpit are sized from it).

The same limits stand in front of the app in ``compose.yaml`` (nginx, docs/deployment.md), and the app must not face
the internet without it: this guard is the second line (issue 62 §4: under 20,000 idle connections from 200
addresses every fresh client was answered, within 2 s on a lightly loaded 2-core machine but not on a busy one;
through nginx within 0.27 s on the busy one).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import ipaddress
import random
import resource
import socket
import threading
import time
import typing
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from grebench.settings import AppSettings

#: File descriptors kept free of client connections: the store, the exports, Gradio's files, logs, the event loop.
FD_RESERVE = 256
#: Addresses :meth:`ConnectionGuard._victim` looks at for an idle connection to evict before it refuses.
VICTIM_SEARCH = 64
#: Most refusals one ``accept`` call makes before it lets the event loop run (each takes microseconds).
REFUSALS_PER_ACCEPT = 256
#: Seconds an accepted connection may wait for its protocol (asyncio's task making its transport) before its count
#: is released: a connection whose transport failed is never counted for ever.
PENDING_S = 30.0
#: The listen backlog asked for (the kernel caps it at ``net.core.somaxconn``).
LISTEN_BACKLOG = 65535
#: The receive buffer of a held refusal, in bytes (the kernel doubles it and keeps a floor of its own).
HELD_RCVBUF = 2048
_DISCARD = memoryview(bytearray(256 * 1024))  # where a held refusal's early bytes go (never read)
#: What a refused connection is sent before it is held: an HTTP client reads why and when to come back.
REFUSAL = (b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: %d\r\nContent-Type: text/plain\r\n"
           b"Content-Length: 34\r\nConnection: close\r\n\r\ntoo many connections; retry later\n")

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
    refused_hold_s: float = 0.0     # seconds a refused connection is held before it is closed (0: closed at once)
    held_cap: int = 0               # refused connections held at once (the descriptors left beyond ``total``)


def open_file_limit() -> int:
    """The process's soft limit on open files."""
    return int(resource.getrlimit(resource.RLIMIT_NOFILE)[0])


def raise_open_file_limit() -> int:
    """Raise the process's soft open-file limit to its hard limit, as far as the kernel lets; the soft limit now.

    The caps and the pool of held refusals are sized from the soft limit (:func:`connection_limits`), and a login
    shell's or a service manager's default soft limit is often 1,024 under a hard one of 500,000 or more: at 1,024 the
    total cap is 768 and no refusal can be held, so a reconnecting flood is closed and back again as fast as it can
    connect.  Raising the soft limit needs no privilege (the hard one is the operator's: ``ulimit -Hn``, systemd's
    ``LimitNOFILE``, compose's ``ulimits: nofile``)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft != resource.RLIM_INFINITY and soft < target:
        for value in (target, 1 << 20, 65536):  # an infinite or huge hard limit may be above the kernel's nr_open
            if soft < value <= target:
                try:
                    resource.setrlimit(resource.RLIMIT_NOFILE, (value, hard))
                    break
                except (ValueError, OSError):
                    continue
    return open_file_limit()


def connection_limits(app: AppSettings, proxies: Sequence[Network] = ()) -> ConnectionLimits:
    """The :class:`ConnectionLimits` of the app's settings; the total cap stays :data:`FD_RESERVE` below the open-file
    limit whatever the setting says, and held refusals take only the descriptors left above it."""
    files = open_file_limit()
    total = max(1, min(app.app_max_connections, files - FD_RESERVE))
    held = max(0, min(app.app_refused_held, files - FD_RESERVE - total))
    return ConnectionLimits(float(app.app_idle_timeout_s), float(app.app_header_timeout_s),
                            app.app_keep_alive_s, app.app_connections_per_address, total, tuple(proxies),
                            float(app.app_refused_hold_s), held)


class Evictable(typing.Protocol):
    """A connection the guard may close for a newcomer at the total cap."""

    def counted_address(self) -> str:
        """The address its count is under."""

    def evict(self) -> None:
        """Close it; its count was released by the guard (its ``connection_lost`` must not release it again)."""


@dataclass
class ConnectionGuard:
    """Open connections per client address and in all, shared by a server's connections (one event loop thread; a
    lock for readers in tests)."""

    limits: ConnectionLimits
    by_address: Counter[str] = field(default_factory=Counter)
    total: int = 0
    refused: int = 0
    timed_out: int = 0
    evicted: int = 0                # idle connections closed at the total cap for a newcomer
    held_peak: int = 0              # most refused connections held at once
    #: refused connections being held: a heap of (when to close, sequence, socket), the first due first
    held: list[tuple[float, int, socket.socket]] = field(default_factory=list)
    _held_seq: int = 0
    #: spreads the holds and the idle timeouts (a burst of connections must not all come due in one moment)
    rng: random.Random = field(default_factory=random.Random)
    #: connections counted at the listening socket and not yet taken over by their protocol: fd -> (address, when)
    pending: dict[int, tuple[str, float]] = field(default_factory=dict)
    #: connections waiting for a request, per address, oldest first (evictable at the total cap)
    idle: dict[str, dict[int, Evictable]] = field(default_factory=dict)
    _buckets: dict[int, set[str]] = field(default_factory=dict)  # addresses by their count
    _top: int = 0                   # the largest count of any address
    _lock: threading.RLock = field(default_factory=threading.RLock)

    def _exempt(self, address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in net for net in self.limits.exempt)

    def admit(self, address: str) -> bool:
        """Count a new connection from ``address``; False (and nothing counted) when a cap is reached.  At the total
        cap, the oldest connection that has not sent a request from the address holding the most connections (at
        least two more than ``address`` would) is evicted for it (:meth:`_victim`), so a fresh client is served
        while attackers hold the cap from a few addresses."""
        victim: Evictable | None = None
        with self._lock:
            count = self.by_address[address]
            if count >= self.limits.per_address and not self._exempt(address):
                self.refused += 1
                return False
            if self.total >= self.limits.total:
                victim = self._victim(count + 1)
                if victim is None:
                    self.refused += 1
                    return False
                self._release(victim.counted_address())
                self.evicted += 1
            self._count(address, +1)
        if victim is not None:
            victim.evict()  # its count is already released
        return True

    def _count(self, address: str, step: int) -> None:
        """Add ``step`` (±1) to ``address``'s count, keeping :attr:`_buckets` (addresses by count) and its top."""
        before = self.by_address[address]
        after = before + step
        if before:
            self._buckets[before].discard(address)
        if after > 0:
            self.by_address[address] = after
            self._buckets.setdefault(after, set()).add(address)
            self._top = max(self._top, after)
        else:
            del self.by_address[address]
        self.total += step
        while self._top > 0 and not self._buckets.get(self._top):
            self._top -= 1

    def _release(self, address: str) -> None:
        self._count(address, -1)

    def _victim(self, newcomer: int) -> Evictable | None:
        """The oldest idle connection (no request yet) of an address holding at least ``newcomer + 1`` connections,
        the fullest first; trusted proxies are never evicted.  Looks at :data:`VICTIM_SEARCH` addresses at most."""
        looked = 0
        for count in range(self._top, newcomer, -1):
            for address in self._buckets.get(count, ()):
                looked += 1
                waiting = self.idle.get(address)
                if waiting and not self._exempt(address):
                    key = next(iter(waiting))
                    victim = waiting.pop(key)
                    if not waiting:
                        del self.idle[address]
                    return victim
                if looked >= VICTIM_SEARCH:
                    return None
        return None

    def waiting(self, address: str, conn: Evictable) -> None:
        """``conn`` from ``address`` waits for a request: it may be evicted for a newcomer at the total cap."""
        with self._lock:
            self.idle.setdefault(address, {})[id(conn)] = conn

    def busy(self, address: str, conn: Evictable) -> None:
        """``conn`` started a request or closed: no longer evictable."""
        with self._lock:
            waiting = self.idle.get(address)
            if waiting is not None and waiting.pop(id(conn), None) is not None and not waiting:
                del self.idle[address]

    def release(self, address: str) -> None:
        """A counted connection from ``address`` closed."""
        with self._lock:
            self._release(address)

    def admit_accepted(self, fd: int, address: str) -> bool:
        """:meth:`admit` at the listening socket: the count waits under ``fd`` for the connection's protocol
        (:meth:`take`).  A stale entry on the same descriptor (its connection closed before a protocol took it) is
        released first."""
        stale = self.pending.pop(fd, None)
        if stale is not None:
            self.release(stale[0])
        if not self.admit(address):
            return False
        self.pending[fd] = (address, time.monotonic())
        return True

    def take(self, fd: int, address: str) -> bool:
        """Whether the connection on ``fd`` from ``address`` was counted at the listening socket (its protocol now
        owns the count); False: count it with :meth:`admit`."""
        entry = self.pending.get(fd)
        if entry is None or entry[0] != address:
            return False
        del self.pending[fd]
        return True

    def first_request_s(self) -> float:
        """Seconds a newly accepted connection may wait for its first request: drawn between half of ``idle_s`` and
        all of it, so that a burst of idle connections accepted together is not closed together (and does not
        reconnect together: 4,096 idle connections closed in one moment and back the next cost a fresh client up to
        1.2 s).  Not shortened when the app is busy: each idle connection closed sooner is back at once and admitted
        again, and admission (a transport, a protocol, a task) is what costs the event loop most (2 s for the first
        request at 3/4 of the total cap made a fresh client's median answer 0.88 s and its slowest 3.3 s, against
        0.19 s and 1.5 s, 20,000 idle connections from 200 addresses, a shared 2-core machine at load 7); at the
        total cap a fresh address evicts an idle connection instead (:meth:`admit`)."""
        return self.limits.idle_s * (0.5 + 0.5 * self.rng.random())

    def hold(self, conn: socket.socket, now: float) -> None:
        """A refused connection: sent :data:`REFUSAL`, then held (nothing read) between ``refused_hold_s`` and twice
        that from now (drawn at random: refusals made in one burst come due spread over a whole hold, not all at
        once), or closed at once when the pool is full or holding is off."""
        try:
            # the smallest receive buffer: what the client sends is never read, and a full pool of held sockets
            # must not hold the kernel's TCP memory (a default buffer is ~128 KiB: 15,648 held = 2 GB, past the
            # kernel's TCP memory-pressure line, where every connection of the machine suffers)
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, HELD_RCVBUF)
            conn.send(REFUSAL % round(self.limits.refused_hold_s or 1))
            conn.recv_into(_DISCARD)  # what arrived before the accept (up to the first window) is dropped, once
        except OSError:
            pass
        if self.limits.refused_hold_s > 0 and len(self.held) < self.limits.held_cap:
            due = now + self.limits.refused_hold_s * (1.0 + self.rng.random())
            self._held_seq += 1
            heapq.heappush(self.held, (due, self._held_seq, conn))
            self.held_peak = max(self.held_peak, len(self.held))
        else:
            conn.close()

    def close_due(self, now: float) -> None:
        """Close the held refusals whose time is up (the first due first: a few steps, whatever the pool's size)."""
        while self.held and self.held[0][0] <= now:
            heapq.heappop(self.held)[2].close()

    def sweep(self, now: float) -> None:
        """:meth:`close_due`, and release the counts that no protocol took within :data:`PENDING_S` (a walk over the
        pending connections: once a second, never per accept)."""
        self.close_due(now)
        for fd, (address, when) in list(self.pending.items()):
            if now - when > PENDING_S:
                del self.pending[fd]
                self.release(address)

    def close_held(self) -> None:
        """Close every held refusal (the server stops)."""
        while self.held:
            self.held.pop()[2].close()


class GuardedListener(socket.socket):
    """The app's listening socket: :meth:`accept` refuses over-cap connections itself (see the module docstring).

    asyncio calls ``accept`` until it raises :class:`BlockingIOError`; each call returns the next admitted
    connection, counted in the guard, after refusing at most :data:`REFUSALS_PER_ACCEPT` others, so a flood of
    refusals never keeps the event loop from the connections it serves."""

    guard: ConnectionGuard
    _sweeping = False

    def accept(self) -> tuple[socket.socket, Any]:
        now = time.monotonic()
        self.guard.close_due(now)
        for _ in range(REFUSALS_PER_ACCEPT):
            conn, peer = super().accept()  # BlockingIOError: nothing waits
            address = str(peer[0]) if peer else "unknown"
            if self.guard.admit_accepted(conn.fileno(), address):
                self._sweep_later()
                return conn, peer
            conn.setblocking(False)
            self.guard.hold(conn, now)
            self._sweep_later()
        raise BlockingIOError("refusals for now; the loop runs before the next")

    def _sweep_later(self) -> None:
        """While anything is held or pending, sweep every second (no new connection may come to do it)."""
        if self._sweeping or not (self.guard.held or self.guard.pending):
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._sweeping = True

        def tick() -> None:
            self._sweeping = False
            if self.fileno() == -1:
                return
            self.guard.sweep(time.monotonic())
            self._sweep_later()

        loop.call_later(1.0, tick)

    def close(self) -> None:
        self.guard.close_held()
        super().close()


def guarded_listener(host: str, port: int, backlog: int, guard: ConnectionGuard) -> GuardedListener:
    """A :class:`GuardedListener` bound to ``host:port`` (the first address ``host`` resolves to), listening."""
    family, kind, proto, _, address = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                                         flags=socket.AI_PASSIVE)[0]
    sock = GuardedListener(family, kind, proto)
    sock.guard = guard
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(backlog)
        sock.setblocking(False)
    except OSError:
        socket.socket.close(sock)
        raise
    return sock


def guarded_protocol(guard: ConnectionGuard) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with ``guard``'s caps and the idle and header timeouts (see the module docstring)."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class GuardedH11Protocol(H11Protocol):
        _address: str | None = None
        _timer: asyncio.TimerHandle | None = None
        _reading_headers = False
        _evicted = False

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            peer = transport.get_extra_info("peername")
            address = str(peer[0]) if peer else "unknown"
            sock = transport.get_extra_info("socket")
            counted = sock is not None and guard.take(sock.fileno(), address)  # counted at the listener
            if not counted and not guard.admit(address):
                transport.abort()  # the descriptor is returned now; nothing was read
                return
            self._address = address
            super().connection_made(transport)
            self._arm(guard.first_request_s())
            guard.waiting(address, self)

        def counted_address(self) -> str:
            return self._address or "unknown"

        def evict(self) -> None:
            self._address, self._evicted = None, True  # the guard released its count
            self._disarm()
            if not self.transport.is_closing():
                self.transport.abort()

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
                if self._address is not None:
                    guard.busy(self._address, self)
            super().data_received(data)
            if self._reading_headers and self.conn.their_state is not h11.IDLE:
                self._reading_headers = False  # headers complete: the body is the middleware's to time
                self._disarm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
                self._reading_headers = False  # waiting for the next request: idle again
                self._arm(max(guard.limits.idle_s, float(guard.limits.keep_alive_s)))
                if self._address is not None:
                    guard.waiting(self._address, self)

        def connection_lost(self, exc: Exception | None) -> None:
            if self._address is None:
                if self._evicted:
                    super().connection_lost(exc)
                return  # refused at accept: never counted, never set up
            self._disarm()
            guard.busy(self._address, self)
            guard.release(self._address)
            self._address = None
            super().connection_lost(exc)

    return GuardedH11Protocol


def server_options(app: AppSettings, guard: ConnectionGuard) -> dict[str, Any]:
    """uvicorn ``Config`` options of the app's settings: the guarded protocol, keep-alive, the concurrency limit and the
    listen backlog."""
    return {"http": guarded_protocol(guard), "timeout_keep_alive": app.app_keep_alive_s,
            "limit_concurrency": guard.limits.total + 1,  # uvicorn counts the new one itself (>=)
            # the kernel's accept queue: as long as it allows (net.core.somaxconn caps it; 4,096 on Linux >= 5.4):
            # a flood's connections arrive faster than any Python server accepts them, and a full queue drops a
            # fresh client's SYN, which its kernel sends again only 1 s later (then 3 s, 7 s)
            "backlog": LISTEN_BACKLOG,
            "h11_max_incomplete_event_size": 64 * 1024}


#: The guard of the server most recently started by :func:`guarded_uvicorn` (tests and the benchmark read it).
LAST_GUARD: list[ConnectionGuard] = []


@contextlib.contextmanager
def guarded_uvicorn(app: AppSettings, proxies: Sequence[Network] = ()) -> Iterator[ConnectionGuard]:
    """While active, the uvicorn ``Config`` that Gradio's ``launch`` builds gets :func:`server_options`, and the
    server it starts listens on a :func:`guarded_listener`.

    Gradio makes its ``uvicorn.Config`` itself from a fixed set of arguments and starts its own ``Server`` subclass;
    its module's ``uvicorn`` and ``Server`` names are pointed, for the duration of ``launch`` only, at a namespace
    whose ``Config`` adds our options and at a subclass whose ``run`` passes uvicorn the guarded socket (uvicorn's
    documented ``sockets`` argument).  uvicorn itself is not changed, so other servers in the process are not
    affected."""
    from gradio import http_server

    raise_open_file_limit()
    guard = ConnectionGuard(connection_limits(app, proxies))
    real, real_server = http_server.uvicorn, http_server.Server
    options = server_options(app, guard)

    def config(**kwargs: Any) -> Any:
        return real.Config(**{**kwargs, **options})

    class GuardedServer(real_server):  # type: ignore[misc, valid-type]
        def run(self, sockets: list[socket.socket] | None = None) -> None:
            if sockets is None:
                sockets = [guarded_listener(self.config.host, self.config.port, self.config.backlog, guard)]
            super().run(sockets=sockets)

    http_server.uvicorn = SimpleNamespace(Config=config, Server=real.Server)  # type: ignore[assignment]
    http_server.Server = GuardedServer  # type: ignore[misc]
    LAST_GUARD[:] = [guard]
    try:
        yield guard
    finally:
        http_server.uvicorn = real
        http_server.Server = real_server  # type: ignore[misc]

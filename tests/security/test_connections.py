"""Issue 48 §5: slow and idle connections cannot hold the app down (real sockets to a launched Gradio app on
127.0.0.1, clients bound to other 127.0.0.x addresses, the limits at their smallest).

* Connections beyond ``app_connections_per_address`` from one address are refused by the listening socket: sent a
  503 at once, held ``app_refused_hold_s`` (so a reconnecting attacker cannot keep the listen queue full), then
  closed; beyond the pool of held refusals they are closed at once; another address is served at once throughout.
* A connection that sends no request is closed after ``app_idle_timeout_s``; one that sends its headers a byte at a
  time after ``app_header_timeout_s`` (before the app ever sees it).
* A body that does not arrive within ``app_body_timeout_s`` is refused with 408; beyond ``app_bodies_in_flight``
  bodies being read, a request with a body gets 503 before any of it is read.
* Without the guard (``demo.launch`` as before this change) the idle connections stay open.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from grebench.site._connections import LAST_GUARD
from tests.security.test_proxy_and_uploads import _launch, _settings


def _open(url: str, source: str) -> socket.socket:
    host, port = url.split("//", 1)[1].split(":")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((source, 0))
    sock.settimeout(5)
    sock.connect((host, int(port)))
    return sock


def _closed(sock: socket.socket, within: float) -> bool:
    """Whether the server closes ``sock`` within ``within`` seconds (EOF or reset)."""
    sock.settimeout(within)
    try:
        return sock.recv(65536) == b"" or True  # any answer then EOF counts; a timeout means still open
    except TimeoutError:
        return False
    except OSError:
        return True


def _answer(sock: socket.socket, timeout: float = 5.0) -> bytes:
    """Everything the server sends until it closes the connection (the answers here say ``connection: close``)."""
    sock.settimeout(timeout)
    out = b""
    while chunk := sock.recv(65536):
        out += chunk
    return out


def _served_within(url: str, source: str, seconds: float) -> float:
    started = time.monotonic()
    with httpx.Client(timeout=seconds, transport=httpx.HTTPTransport(local_address=source)) as http:
        assert http.get(f"{url}/gradio_api/info").status_code == 200
    return time.monotonic() - started


@pytest.fixture
def app(tmp_path: Path) -> Iterator[tuple[str, Any]]:
    demo, url = _launch(_settings(tmp_path, app_connections_per_address=8, app_idle_timeout_s=1,
                                  app_header_timeout_s=1, app_body_timeout_s=1, app_bodies_in_flight=2,
                                  app_requests_per_address_per_min=10000, app_refused_hold_s=2,
                                  app_refused_held=20))
    try:
        yield url, LAST_GUARD[0]
    finally:
        demo.close()


def test_connections_beyond_the_per_address_cap_are_refused_held_then_closed_and_another_address_is_served(
        app: tuple[str, Any]) -> None:
    url, guard = app
    socks = [_open(url, "127.0.0.2") for _ in range(40)]
    try:
        started = time.monotonic()
        for s in socks[8:]:  # each refusal says why at once, whatever the client sent
            s.settimeout(2)
            assert s.recv(4096).startswith(b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 2\r\n")
        assert guard.by_address.get("127.0.0.2") == 8  # the first 8 held by the app, counted
        assert guard.held_peak == 20  # the pool of held refusals is full: the last 12 were closed at once
        # a held refusal's receive buffer is the smallest the kernel allows: what its client sends is never read
        assert max(held.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) for *_, held in guard.held) <= 8192
        assert _served_within(url, "127.0.0.3", 2.0) < 2.0
        closed_at_once = [s for s in socks[8:] if _closed(s, 0.05)]
        assert len(closed_at_once) == 12
        held = [s for s in socks[8:] if s not in closed_at_once]
        assert all(_closed(s, 5.0) for s in held)  # closed when their hold (2 s) ends
        assert time.monotonic() - started >= 1.5
        assert not guard.held and not guard.pending  # the pool emptied; nothing left counted at the listener
    finally:
        for s in socks:
            s.close()


def test_an_idle_connection_and_a_slow_header_are_closed_before_the_app_sees_them(app: tuple[str, Any]) -> None:
    url, guard = app
    idle = _open(url, "127.0.0.4")
    slow = _open(url, "127.0.0.5")
    started = time.monotonic()
    header = b"GET /gradio_api/info HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 40
    closed_at = None
    for byte in header:  # one byte every 0.1 s: the headers would take 5 s
        try:
            slow.send(bytes([byte]))
        except OSError:
            closed_at = time.monotonic() - started
            break
        time.sleep(0.1)
    assert closed_at is not None and closed_at < 3.0, closed_at  # header timeout 1 s after the first byte
    assert _closed(idle, 2.0)  # idle timeout 1 s
    assert guard.timed_out >= 2 and guard.by_address.get("127.0.0.4") is None
    idle.close()
    slow.close()


def test_a_slow_body_is_refused_and_bodies_in_flight_are_capped(app: tuple[str, Any]) -> None:
    url, _ = app
    head = (b"POST /gradio_api/call/who HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000000\r\n\r\n" + b"x" * 1000)
    first, second = _open(url, "127.0.0.6"), _open(url, "127.0.0.7")
    first.sendall(head)
    second.sendall(head)
    time.sleep(0.3)
    third = _open(url, "127.0.0.8")
    third.sendall(head)
    answer = _answer(third)
    assert b" 503 " in answer.split(b"\r\n")[0] and b"request bodies" in answer, answer  # two in flight already
    late = _answer(first)
    assert b" 408 " in late.split(b"\r\n")[0] and b"not received within 1 s" in late, late
    for s in (first, second, third):
        s.close()


def test_without_the_guard_idle_connections_stay_open(tmp_path: Path) -> None:
    """The attack of the issue against ``demo.launch`` as before: nothing closes a connection that sends nothing."""
    import gradio as gr

    from grebench.site import launch_kwargs

    settings = _settings(tmp_path, app_idle_timeout_s=1)
    with gr.Blocks() as demo:
        gr.Textbox()
    _, url, _ = demo.launch(**{**launch_kwargs(settings), "prevent_thread_lock": True, "quiet": True})
    try:
        sock = _open(url.rstrip("/"), "127.0.0.9")
        assert not _closed(sock, 2.5)
        sock.close()
    finally:
        demo.close()


def test_a_count_no_protocol_takes_is_released_and_a_reused_descriptor_is_not_counted_twice() -> None:
    from grebench.site._connections import PENDING_S, ConnectionGuard, ConnectionLimits

    guard = ConnectionGuard(ConnectionLimits(1.0, 1.0, 5, per_address=2, total=10))
    assert guard.admit_accepted(7, "10.0.0.1") and guard.admit_accepted(8, "10.0.0.1")
    assert not guard.admit_accepted(9, "10.0.0.1")  # over the per-address cap
    assert guard.take(8, "10.0.0.1") and not guard.take(8, "10.0.0.1")  # taken once
    assert guard.admit_accepted(7, "10.0.0.2")  # fd 7 reused before a protocol took it: the stale count released
    assert guard.by_address == {"10.0.0.1": 1, "10.0.0.2": 1} and guard.total == 2
    guard.sweep(time.monotonic() + PENDING_S + 1)  # fd 7 never taken: released
    assert guard.by_address == {"10.0.0.1": 1} and guard.total == 1


class _Conn:
    def __init__(self, guard: Any, address: str) -> None:
        self.guard, self.address, self.evicted = guard, address, False

    def counted_address(self) -> str:
        return self.address

    def evict(self) -> None:
        self.evicted = True


def test_at_the_total_cap_a_newcomer_evicts_the_oldest_idle_connection_of_the_fullest_address() -> None:
    from grebench.site._connections import ConnectionGuard, ConnectionLimits

    guard = ConnectionGuard(ConnectionLimits(1.0, 1.0, 5, per_address=4, total=6))
    conns = []
    for address in ["10.0.0.1"] * 4 + ["10.0.0.2"] * 2:
        assert guard.admit(address)
        conns.append(_Conn(guard, address))
        guard.waiting(address, conns[-1])
    guard.busy("10.0.0.1", conns[0])  # the oldest of the fullest address is answering a request: not evictable
    assert guard.admit("10.0.0.3")  # the cap is full: the oldest idle one of 10.0.0.1 (4 connections) makes room
    assert [c.evicted for c in conns] == [False, True, False, False, False, False]
    assert guard.by_address == {"10.0.0.1": 3, "10.0.0.2": 2, "10.0.0.3": 1} and guard.total == 6
    assert guard.admit("10.0.0.4") and conns[2].evicted  # 10.0.0.1 is still the fullest
    assert guard.admit("10.0.0.5") and conns[3].evicted != conns[4].evicted  # 10.0.0.1 and .2 held 2 each: one
    assert guard.admit("10.0.0.6")  # the other still held 2
    # every address holds 1 now: a newcomer (1) evicts only from 2 or more, an address already holding 1 from 3
    assert not guard.admit("10.0.0.7") and not guard.admit("10.0.0.2")
    assert guard.evicted == 4 and guard.total == 6 and guard.refused == 2


def test_an_attacker_holding_the_total_cap_from_two_addresses_does_not_keep_a_fresh_client_out(
        tmp_path: Path) -> None:
    demo, url = _launch(_settings(tmp_path, app_connections_per_address=8, app_max_connections=16,
                                  app_idle_timeout_s=30, app_keep_alive_s=1, app_refused_hold_s=2,
                                  app_refused_held=8, app_requests_per_address_per_min=10000))
    guard = LAST_GUARD[0]
    deadline = time.monotonic() + 10
    while guard.total and time.monotonic() < deadline:  # the launch's own start-up check, kept alive 1 s
        time.sleep(0.05)
    socks = [_open(url, f"127.0.0.{10 + k % 2}") for k in range(16)]
    try:
        deadline = time.monotonic() + 10
        while guard.total < 16 and time.monotonic() < deadline:  # progress, not a fixed wait: every one counted
            time.sleep(0.05)
        assert guard.total == 16 and len(guard.idle) == 2
        assert _served_within(url, "127.0.0.12", 2.0) < 2.0  # the cap was full: one idle attacker made room
        assert guard.evicted == 1 and sum(_closed(s, 0.2) for s in socks) == 1
    finally:
        for s in socks:
            s.close()
        demo.close()


def test_refusals_held_in_one_burst_come_due_spread_over_a_hold_and_idle_timeouts_are_spread_too() -> None:
    """Issue 62 §4: 15,648 refusals held in the first second of a flood all came due 30 s later, and 4,096 idle
    connections accepted together were all closed together; each came back at once, in a burst a fresh client
    queued behind.  Holds are drawn between the hold and twice it, first-request timeouts between half and all."""
    from grebench.site._connections import ConnectionGuard, ConnectionLimits

    guard = ConnectionGuard(ConnectionLimits(10.0, 1.0, 5, per_address=2, total=10, refused_hold_s=30.0,
                                             held_cap=200))
    pairs = [socket.socketpair() for _ in range(100)]
    try:
        for ours, _ in pairs:
            ours.setblocking(False)
            guard.hold(ours, 1000.0)
        due = sorted(when for when, *_ in guard.held)
        assert due[0] >= 1030.0 and due[-1] < 1060.0 and due[-1] - due[0] > 15.0  # spread over the second hold
        guard.close_due(1045.0)  # the first due first, whatever order they were held in
        assert all(when > 1045.0 for when, *_ in guard.held) and 0 < len(guard.held) < 100
        guard.close_held()
        assert not guard.held and all(ours.fileno() == -1 for ours, _ in pairs)
        waits = [guard.first_request_s() for _ in range(200)]
        assert min(waits) >= 5.0 and max(waits) <= 10.0 and max(waits) - min(waits) > 2.5
    finally:
        for ours, theirs in pairs:
            ours.close()
            theirs.close()


def test_the_app_raises_its_soft_open_file_limit_to_the_hard_one() -> None:
    import resource

    from grebench.site._connections import raise_open_file_limit

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    lower = min(soft, 1024)
    if hard <= lower:
        pytest.skip(f"the hard open-file limit ({hard}) leaves nothing to raise")
    resource.setrlimit(resource.RLIMIT_NOFILE, (lower, hard))
    try:
        raised = raise_open_file_limit()
        assert raised == resource.getrlimit(resource.RLIMIT_NOFILE)[0] > lower
        assert raised == hard or hard > 65536  # the hard limit itself, unless above what the kernel allows
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

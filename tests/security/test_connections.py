"""Issue 48 §5: slow and idle connections cannot hold the app down (real sockets to a launched Gradio app on
127.0.0.1, clients bound to other 127.0.0.x addresses, the limits at their smallest).

* Connections beyond ``app_connections_per_address`` from one address are closed as soon as they are accepted;
  another address is served at once.
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
                                  app_requests_per_address_per_min=10000))
    try:
        yield url, LAST_GUARD[0]
    finally:
        demo.close()


def test_connections_beyond_the_per_address_cap_are_closed_and_another_address_is_served(
        app: tuple[str, Any]) -> None:
    url, guard = app
    socks = [_open(url, "127.0.0.2") for _ in range(40)]
    try:
        time.sleep(0.3)
        assert guard.by_address.get("127.0.0.2") == 8  # the first 8 held, the other 32 closed at once
        assert sum(_closed(s, 0.2) for s in socks[8:]) == 32
        assert _served_within(url, "127.0.0.3", 2.0) < 2.0
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

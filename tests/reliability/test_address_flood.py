"""Issue 62 §4: idle connections from many addresses, straight at the app, do not keep a fresh client out.

Per-address caps cannot stop many addresses: 2,000 idle connections from 50 loopback addresses are 40 an address,
under ``app_connections_per_address`` (64), so only the total cap (``app_max_connections``, here 256) and the tarpit
(``app_refused_held``, here 512 refusals held) stand in the way.  The test waits until the app is seen holding both
full (the guard's own counts: progress, not a fixed wait), then asks as a fresh client (an address holding nothing)
and asserts it is answered, not how fast (the benchmark, ``benchmarks/address_flood.py``, measures that at 20,000
connections from 200 addresses).  Skipped, visibly, where the open-file limit cannot be raised far enough for the
flood and the app in one process.
"""

from __future__ import annotations

import resource
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from grebench.site._connections import LAST_GUARD, raise_open_file_limit
from tests.security.test_proxy_and_uploads import _launch, _settings

CONNECTIONS, ADDRESSES = 2000, 50
TOTAL, HELD = 256, 512
#: descriptors this process needs: the flood's sockets, the app's (admitted + held), its reserve, and room
NEEDED = CONNECTIONS + TOTAL + HELD + 256 + 512


def _wait_for(condition: Any, what: str, limit: float = 120.0) -> None:
    """Until ``condition()`` holds (polled); ``limit`` only guards against a hang, it is not a speed bar."""
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, f"never observed: {what}"
        time.sleep(0.02)


@pytest.fixture
def app(tmp_path: Path) -> Iterator[tuple[str, Any]]:
    if raise_open_file_limit() < NEEDED:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        pytest.skip(f"the open-file limit cannot be raised to {NEEDED} (soft {soft}, hard {hard}): "
                    "the flood and the app share this process")
    demo, url = _launch(_settings(tmp_path, app_max_connections=TOTAL, app_refused_held=HELD,
                                  app_refused_hold_s=600, app_idle_timeout_s=600, app_keep_alive_s=1,
                                  app_requests_per_address_per_min=100000))
    try:
        yield url, LAST_GUARD[0]
    finally:
        demo.close()


def test_idle_connections_from_fifty_addresses_fill_the_total_cap_and_the_tarpit_and_a_fresh_client_is_served(
        app: tuple[str, Any]) -> None:
    url, guard = app
    host, port = url.split("//", 1)[1].split(":")
    _wait_for(lambda: guard.total == 0, "the launch's own start-up check closed")
    flood: list[socket.socket] = []
    try:
        for k in range(CONNECTIONS):  # non-blocking: the kernel completes each handshake, the app accepts them
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setblocking(False)
            sock.bind((f"127.3.0.{k % ADDRESSES + 1}", 0))
            sock.connect_ex((host, int(port)))
            flood.append(sock)
        # every flood connection accepted and judged: the total cap full, the tarpit full, the rest closed at once
        _wait_for(lambda: guard.total == TOTAL and len(guard.held) == HELD
                  and guard.refused >= CONNECTIONS - TOTAL, "the total cap and the pool of held refusals full")
        assert len(guard.by_address) == ADDRESSES  # every address got its share of the cap ...
        assert max(guard.by_address.values()) <= 64  # ... under the per-address cap: only the total cap acted
        assert not guard.pending

        with httpx.Client(timeout=60, transport=httpx.HTTPTransport(local_address="127.3.1.1")) as fresh:
            answer = fresh.get(f"{url}/gradio_api/info")
        assert answer.status_code == 200  # a fresh address is served while the flood is held ...
        assert guard.evicted >= 1  # ... by taking an idle flood connection's place at the total cap
        assert len(guard.held) == HELD  # and the flood is still held: nothing came back to reconnect
        with httpx.Client(timeout=60, transport=httpx.HTTPTransport(local_address="127.3.1.2")) as fresh:
            assert fresh.get(f"{url}/").status_code == 200  # the page itself, from another fresh address
    finally:
        for sock in flood:
            sock.close()

"""Security-battery fixtures: the canary key, an outbound-connection guard, a table resolver."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from typing import Any

import pytest

CANARY = "sk-CANARY-sec-4b1d9e77aa"
#: What the battery's submitted host names resolve to (no DNS query ever leaves the machine).
RESOLVER = {"models.example.test": ["127.0.0.1"], "redirect.example.test": ["127.0.0.1"],
            "sneaky.example": ["10.9.8.7"], "eval.example": ["93.184.216.99"], "api.model.example": ["93.184.216.34"]}


class OutboundGuard:
    """Records (and refuses) every connection outside the allowed loopback ports and every DNS query of a name."""

    def __init__(self) -> None:
        self.allowed: set[tuple[str, int]] = set()
        self.refused: list[Any] = []
        self.lookups: list[str] = []

    def allow(self, host: str, port: int) -> None:
        """Let connections to one loopback (host, port) through (the app under test, a fake server)."""
        self.allowed.add((host, port))


def _is_ip(text: Any) -> bool:
    try:
        ipaddress.ip_address(str(text))
    except ValueError:
        return False
    return True


@pytest.fixture
def guard(monkeypatch: pytest.MonkeyPatch) -> OutboundGuard:
    """``socket.connect`` fails for anything but the allowed loopback ports; name lookups fail (numbers pass)."""
    state = OutboundGuard()
    real_connect = socket.socket.connect
    real_gai = socket.getaddrinfo

    def connect(sock: socket.socket, address: Any) -> Any:
        if isinstance(address, tuple) and (str(address[0]), int(address[1])) in state.allowed:
            return real_connect(sock, address)
        state.refused.append(address)
        raise ConnectionRefusedError(f"test guard: outbound connection to {address!r} refused")

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host is None or _is_ip(host):
            return real_gai(host, *args, **kwargs)
        state.lookups.append(str(host))
        raise socket.gaierror(f"test guard: DNS lookup of {host!r} refused")

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return state


def free_port() -> int:
    """An unused loopback port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def leaks(haystacks: Iterable[tuple[str, bytes | str]], needle: str = CANARY) -> list[str]:
    """Names of the haystacks containing ``needle`` (as text or UTF-8 bytes)."""
    out = []
    for name, data in haystacks:
        if (needle.encode() in data) if isinstance(data, bytes) else (needle in data):
            out.append(name)
    return out

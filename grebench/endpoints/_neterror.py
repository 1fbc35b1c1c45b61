"""What went wrong on the network, in words: DNS, refused, closed, TLS or timeout (never one message for all).

HTTP libraries wrap the cause several times (requests → urllib3 ``MaxRetryError`` → ``NewConnectionError`` →
``ConnectionRefusedError``; httpx → ``ConnectError`` → ``socket.gaierror``; litellm/openai → ``APIConnectionError``
→ httpx).  :func:`network_cause` walks that chain (``__cause__``, ``__context__``, ``reason``, ``args``) and names
the first cause it recognises.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator

_DNS_WORDS = ("name or service not known", "nodename nor servname", "temporary failure in name resolution",
              "failed to resolve", "name resolution", "no address associated", "getaddrinfo failed")


def _chain(exc: BaseException, limit: int = 40) -> Iterator[BaseException]:
    seen: set[int] = set()
    todo: list[object] = [exc]
    while todo and len(seen) < limit:
        item = todo.pop(0)
        if not isinstance(item, BaseException) or id(item) in seen:
            continue
        seen.add(id(item))
        yield item
        todo += [item.__cause__, item.__context__, getattr(item, "reason", None), *item.args]


def network_cause(exc: BaseException) -> str | None:
    """``dns`` | ``refused`` | ``closed`` | ``tls`` | ``timeout`` for a network failure, or None when the chain
    names none of them."""
    found: list[str] = []
    for item in _chain(exc):
        name = type(item).__name__
        text = str(item).lower()
        if isinstance(item, socket.gaierror) or name == "NameResolutionError" or any(w in text for w in _DNS_WORDS):
            return "dns"  # the most specific: a wrapper may also say "connection" or "timed out"
        if isinstance(item, ssl.SSLError) or name in ("SSLError", "SSLCertVerificationError") or \
                "certificate verify failed" in text or "wrong version number" in text:
            found.append("tls")
        elif isinstance(item, ConnectionRefusedError) or "connection refused" in text:
            found.append("refused")
        elif isinstance(item, (TimeoutError, socket.timeout)) or "timeout" in name.lower() or "timed out" in text:
            found.append("timeout")
        elif isinstance(item, (ConnectionResetError, ConnectionAbortedError, BrokenPipeError)) or name in (
                "RemoteDisconnected", "RemoteProtocolError", "ProtocolError") or "connection reset" in text or \
                "connection aborted" in text or "without response" in text:
            found.append("closed")
    for kind in ("tls", "refused", "timeout", "closed"):
        if kind in found:
            return kind
    return None


#: One clear phrase per cause (the host is named by the caller).
CAUSE_TEXT = {
    "dns": "the host name does not resolve (DNS)",
    "refused": "connection refused (nothing listens at that address and port)",
    "closed": "the connection was closed by the other side before an answer",
    "tls": "the TLS handshake failed (certificate or protocol)",
    "timeout": "no answer in time",
}


def describe_network_error(exc: BaseException) -> str | None:
    """:data:`CAUSE_TEXT` of the cause :func:`network_cause` finds, or None."""
    cause = network_cause(exc)
    return None if cause is None else CAUSE_TEXT[cause]

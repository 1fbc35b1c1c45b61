"""Loopback model servers that grebench started itself: the only endpoints typed decisions are sent to.

A decision (``/v1/systemone``) sends a judge's whole state to the server, and only a ``transformers serve`` that
grebench runs (:class:`grebench.runtime.LocalServer`) is known to answer it as documented, so :meth:`LLMClient.
decide_many` refuses any other address.  The client knows nothing of the runtime (a layer above it): the pool that
starts a server (:class:`grebench.runtime.LocalServers`) registers it for the duration of a block with
:func:`local_endpoints`, as :func:`pinned_endpoints` does for submitted endpoints.  A process-wide table (not a
context variable) because the calls run in worker threads.
"""

from __future__ import annotations

import ipaddress
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

_LOCAL: dict[str, int] = {}
_LIMITS: dict[str, int] = {}  # concurrent calls a registered server is given (measured for its machine)
_LOCK = threading.Lock()


class LocalEndpointError(ValueError):
    """An endpoint that is not a loopback model server started by grebench."""


def server_root(api_base: str) -> str:
    """``http://127.0.0.1:PORT`` of a base URL given with or without ``/v1`` (and trailing slashes)."""
    root = api_base.strip().rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


def is_loopback(api_base: str) -> bool:
    """Whether a base URL is plain http(s) on a loopback address (127.0.0.0/8, ::1 or localhost)."""
    parts = urlsplit(api_base.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.username or parts.password:
        return False
    if parts.hostname == "localhost":
        return True
    try:
        return ipaddress.ip_address(parts.hostname).is_loopback
    except ValueError:
        return False


@contextmanager
def local_endpoints(api_bases: Iterable[str], concurrency: int | None = None) -> Iterator[None]:
    """Mark these loopback servers as grebench's own for the duration of the block (nesting is counted);
    ``concurrency``: how many calls each is sent at once (what the machine can take; None: ``bench_concurrency``)."""
    roots = [server_root(a) for a in api_bases]
    for root in roots:
        if not is_loopback(root):
            raise LocalEndpointError(f"{root} is not a loopback address: only a model server grebench started on "
                                     "127.0.0.1 is registered as local")
    with _LOCK:
        for root in roots:
            _LOCAL[root] = _LOCAL.get(root, 0) + 1
            if concurrency is not None:
                _LIMITS[root] = max(1, concurrency)
    try:
        yield
    finally:
        with _LOCK:
            for root in roots:
                _LOCAL[root] -= 1
                if not _LOCAL[root]:
                    del _LOCAL[root]
                    _LIMITS.pop(root, None)


def local_concurrency(api_base: str | None) -> int | None:
    """How many calls at once a registered local server takes (None: not set, or not a local server)."""
    if not api_base:
        return None
    with _LOCK:
        return _LIMITS.get(server_root(api_base))


def is_local(api_base: str | None) -> bool:
    """Whether ``api_base`` is a model server grebench started on this machine (registered, loopback)."""
    if not api_base:
        return False
    root = server_root(api_base)
    with _LOCK:
        return root in _LOCAL


def check_local(api_base: str | None) -> str:
    """The server root of ``api_base`` if it is a registered local server, else :class:`LocalEndpointError`."""
    if not api_base:
        raise LocalEndpointError("a decision needs the api_base of a local model server grebench started")
    root = server_root(api_base)
    if not is_loopback(root):
        raise LocalEndpointError(f"decisions go only to a local model server grebench started on 127.0.0.1; "
                                 f"{api_base} is not a loopback address")
    with _LOCK:
        known = root in _LOCAL
    if not known:
        raise LocalEndpointError(f"{api_base} is not a model server grebench started (a LocalServer registered "
                                 "with grebench.llm.local_endpoints): decisions are refused there")
    return root

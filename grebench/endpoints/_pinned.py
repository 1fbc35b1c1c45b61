"""HTTP transports that connect to a submission's pinned address while keeping its host name for Host and SNI.

The bench stage calls a submitted endpoint only through these transports, with ``follow_redirects=False``::

    client = httpx.Client(transport=pinned_transport(endpoint), follow_redirects=False)
    openai_client = openai.OpenAI(base_url=endpoint.url, api_key=key, http_client=client)
    litellm.completion(model="openai/<model>", client=openai_client, ...)

The URL keeps the original host name, so httpx sends it as the Host header and as the TLS server name (the
certificate is verified against it); only the TCP connection goes to the address checked by
:func:`grebench.endpoints.check_url`.  A connection to any other host or port is refused.
"""

from __future__ import annotations

from typing import Any

import httpcore
import httpx

from grebench.endpoints._urlcheck import PinnedEndpoint


class PinnedConnectError(httpcore.ConnectError):
    """A connection to something other than the pinned host and port was attempted."""


def _target(endpoint: PinnedEndpoint, host: str, port: int) -> str:
    if host.strip("[]").lower() != endpoint.host.lower() or port != endpoint.port:
        raise PinnedConnectError(f"connection to {host}:{port} refused: only {endpoint.host}:{endpoint.port} is pinned")
    return endpoint.ip


class _PinnedSyncBackend(httpcore.SyncBackend):
    def __init__(self, endpoint: PinnedEndpoint) -> None:
        self.endpoint = endpoint

    def connect_tcp(self, host: str, port: int, *args: Any, **kwargs: Any) -> httpcore.NetworkStream:
        return super().connect_tcp(_target(self.endpoint, host, port), port, *args, **kwargs)


class _PinnedAsyncBackend(httpcore.AnyIOBackend):
    def __init__(self, endpoint: PinnedEndpoint) -> None:
        self.endpoint = endpoint

    async def connect_tcp(self, host: str, port: int, *args: Any, **kwargs: Any) -> httpcore.AsyncNetworkStream:
        return await super().connect_tcp(_target(self.endpoint, host, port), port, *args, **kwargs)


def pinned_transport(endpoint: PinnedEndpoint, verify: bool = True) -> httpx.HTTPTransport:
    """A sync httpx transport whose every TCP connection goes to ``endpoint.ip`` (no proxies from the env)."""
    transport = httpx.HTTPTransport(verify=verify, trust_env=False)
    # httpx has no public hook for the network backend; the pool is rebuilt with the same TLS context.
    transport._pool = httpcore.ConnectionPool(ssl_context=transport._pool._ssl_context,
                                              network_backend=_PinnedSyncBackend(endpoint))
    return transport


def pinned_async_transport(endpoint: PinnedEndpoint, verify: bool = True) -> httpx.AsyncHTTPTransport:
    """The async twin of :func:`pinned_transport` (for ``httpx.AsyncClient`` / ``openai.AsyncOpenAI``)."""
    transport = httpx.AsyncHTTPTransport(verify=verify, trust_env=False)
    transport._pool = httpcore.AsyncConnectionPool(ssl_context=transport._pool._ssl_context,
                                                   network_backend=_PinnedAsyncBackend(endpoint))
    return transport

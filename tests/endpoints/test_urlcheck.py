"""The SSRF guard: every bad URL is refused with a reason, names resolve only through the injected table,
and the pinned transport connects to the checked address while keeping the original Host."""

from __future__ import annotations

import ipaddress
import socket
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any, ClassVar, Iterator

import httpx
import pytest

from grebench.endpoints import PinnedEndpoint, URLRejected, check_redirect, check_url, pinned_transport
from tests.conftest import FAST_ENV

RESOLVER = {"api.model.example": ["93.184.216.34"], "internal.example": ["10.1.2.3"],
            "rebind.example": ["93.184.216.34", "127.0.0.1"], "mapped.example": ["::ffff:127.0.0.1"],
            "eval.example": ["93.184.216.99"]}
OWN = ["http://eval.example:8000", "http://127.0.0.1:7860"]


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any connection attempt fails the test."""
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"outbound connection attempted: {args!r}")

    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


@pytest.mark.parametrize(("url", "reason"), [
    ("https://169.254.169.254/latest/meta-data", "link-local"),
    ("https://[::ffff:127.0.0.1]/v1", "IPv4-mapped"),
    ("https://2130706433/v1", "numerically encoded"),
    ("https://0177.0.0.1/v1", "numerically encoded"),
    ("https://0x7f.1/v1", "numerically encoded"),
    ("https://127.1/v1", "numerically encoded"),
    ("https://127.0.0.1:22/", "port 22"),
    ("https://127.0.0.1/v1", "loopback"),
    ("http://example.com/v1", "plain http"),
    ("file:///etc/passwd", "scheme 'file'"),
    ("https://10.0.0.5/v1", "private"),
    ("https://internal.example/v1", "private"),
    ("https://rebind.example/v1", "loopback"),
    ("https://mapped.example/v1", "IPv4-mapped"),
    ("https://eval.example:8000/v1", "own services"),
    ("https://[::1]/v1", "loopback"),
    ("https://0.0.0.0/v1", "unspecified"),
    ("https://224.0.0.1/v1", "multicast"),
    ("https://user:pw@api.model.example/v1", "credentials"),
    ("https://localhost/v1", "local name"),
    ("https://nowhere.example/v1", "does not resolve"),
    ("https://api.model.example:6379/v1", "port 6379"),
    ("gopher://api.model.example/", "scheme"),
])
def test_bad_urls_are_rejected_with_a_reason(url: str, reason: str, no_network: None) -> None:
    with pytest.raises(URLRejected, match=reason):
        check_url(url, own_services=OWN, resolver=RESOLVER)


def test_good_url_is_pinned_to_the_checked_address(no_network: None) -> None:
    endpoint = check_url("https://API.model.example./v1/", own_services=OWN, resolver=RESOLVER)
    assert endpoint == PinnedEndpoint("https://api.model.example/v1", "api.model.example", "93.184.216.34", 443)
    plain = check_url("http://api.model.example:8080/v1", http_allowlist=["api.model.example"], resolver=RESOLVER)
    assert plain.port == 8080 and plain.url == "http://api.model.example:8080/v1"
    with pytest.raises(URLRejected, match="link-local"):
        check_redirect(endpoint, "http://169.254.169.254/", http_allowlist=["169.254.169.254"], resolver=RESOLVER)


class _Recorder(BaseHTTPRequestHandler):
    seen: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        _Recorder.seen.append(self.headers["Host"])
        if self.path.endswith("/redirect"):
            self.send_response(302)
            self.send_header("Location", "http://169.254.169.254/latest/meta-data")
            self.end_headers()
            return
        body = b'{"data": []}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def local_server() -> Iterator[int]:
    server = HTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_pinned_transport_connects_to_the_pinned_ip_with_the_original_host(local_server: int) -> None:
    # pinned by hand to loopback (the real check would refuse it) to observe the connection locally
    endpoint = PinnedEndpoint(f"http://model.example:{local_server}/v1", "model.example", "127.0.0.1", local_server)
    _Recorder.seen.clear()
    with httpx.Client(transport=pinned_transport(endpoint), follow_redirects=False, timeout=5) as client:
        response = client.get(f"{endpoint.url}/models")
        assert response.status_code == 200 and response.json() == {"data": []}
        redirect = client.get(f"{endpoint.url}/redirect")
        assert redirect.status_code == 302  # not followed
        with pytest.raises(httpx.ConnectError, match=r"only model\.example"):
            client.get(f"http://other.example:{local_server}/v1/models")
    assert _Recorder.seen == [f"model.example:{local_server}"] * 2
    with pytest.raises(URLRejected, match="link-local"):
        check_redirect(endpoint, redirect.headers["location"], http_allowlist=["169.254.169.254"])


def test_every_url_in_the_settings_is_an_own_service(no_network: None) -> None:
    """A plugin's estimator server (any spec naming a URL) is refused like vllm's, by a rule about the settings."""
    from grebench.endpoints import check_submitted_url, own_service_urls
    from grebench.settings import load_settings

    settings = load_settings(env={**FAST_ENV, "GREBENCH_ESTIMATOR": "mine:https://eval.example:9443/score",
                                  "GREBENCH_SCORING_LLM_API_BASE": "https://api.model.example:8443/v1"})
    own = own_service_urls(settings)
    assert "https://eval.example:9443/score" in own and "https://api.model.example:8443/v1" in own
    for url in ("https://eval.example:9443/v1", "https://eval.example/v1", "https://api.model.example:8443/other"):
        with pytest.raises(URLRejected, match="own services"):
            check_submitted_url(url, settings, RESOLVER)
    # without those settings the same public host is an ordinary submission
    plain = load_settings(env={**FAST_ENV, })
    assert check_submitted_url("https://api.model.example/v1", plain, RESOLVER).ip == "93.184.216.34"


@pytest.mark.parametrize("address", [
    "fec0::1", "feff::1", "64:ff9b::a00:1", "64:ff9b:1::1", "::a00:1", "100::1", "2001:2::1", "2001:db8::1",
    "3fff::1", "5f00::1", "fd00::1", "0.1.2.3", "100.64.0.1", "192.0.0.8", "192.0.2.1", "198.18.0.1",
    "198.51.100.1", "203.0.113.1", "240.0.0.1", "255.255.255.255",
])
def test_special_purpose_ranges_are_refused(address: str) -> None:
    """Issue 19: fec0::/10 passed; every IANA special-purpose range is refused, literal or resolved."""
    from grebench.endpoints._urlcheck import blocked_reason

    assert blocked_reason(ipaddress.ip_address(address)) is not None
    host = f"[{address}]" if ":" in address else address
    with pytest.raises(URLRejected):
        check_url(f"https://{host}/v1", resolver={})
    with pytest.raises(URLRejected, match="only public addresses"):
        check_url("https://api.example.org/v1", resolver={"api.example.org": [address]})


@pytest.mark.parametrize("address", ["8.8.8.8", "2606:4700:4700::1111", "1.1.1.1"])
def test_public_addresses_still_pass(address: str) -> None:
    assert check_url("https://api.example.org/v1", resolver={"api.example.org": [address]}).ip == address


def test_a_long_url_is_refused_for_its_length() -> None:
    with pytest.raises(URLRejected, match=r"100,0\d\d characters long \(limit 2,048\)"):
        check_url("https://api.example.org/" + "a" * 100_000, resolver={})

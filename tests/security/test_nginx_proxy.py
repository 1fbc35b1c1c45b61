"""The deployment's reverse proxy (``deploy/nginx``, what ``compose.yaml`` mounts) in front of a local upstream: its
main config and server block load in a real nginx, it forwards the client's address, and it refuses an oversized
body itself while the upload route takes one file of the import form's size.  Needs an ``nginx`` binary (Debian:
``apt-get install nginx-light``); without one the tests are skipped, visibly.  ``benchmarks/connection_limits.py
--proxy nginx`` holds the same proxy under thousands of idle and slow connections."""

from __future__ import annotations

import http.server
import importlib.util
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import ClassVar

import pytest

NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
pytestmark = pytest.mark.skipif(NGINX is None, reason="nginx is not installed here (Debian: apt-get install "
                                "nginx-light): the deployment's proxy config is not exercised")
REPO = Path(__file__).resolve().parents[2]


def _benchmark() -> ModuleType:
    spec = importlib.util.spec_from_file_location("connection_limits", REPO / "benchmarks" / "connection_limits.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Upstream(http.server.BaseHTTPRequestHandler):
    """Answers with the X-Forwarded-For it was given and the bytes of body it read; counts the requests."""

    seen: ClassVar[list[tuple[str, str, int]]] = []

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        read = len(self.rfile.read(length)) if length else 0
        forwarded = self.headers.get("X-Forwarded-For") or ""
        self.seen.append((self.command, forwarded, read))
        body = f"{forwarded} {read}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    bench = _benchmark()
    upstream = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    port = bench._free_port()
    nginx = bench.start_nginx(tmp_path_factory.mktemp("nginx"), port, upstream.server_address[1])
    try:
        deadline = time.monotonic() + 60
        while True:  # ready when it accepts
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert nginx.poll() is None and time.monotonic() < deadline, "nginx did not start"
                time.sleep(0.05)
        yield port
    finally:
        nginx.terminate()
        nginx.wait(timeout=30)
        upstream.shutdown()


def _request(port: int, head: str, body: bytes = b"", source: str = "127.0.0.9") -> tuple[int, bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=30, source_address=(source, 0)) as sock:
        sock.sendall(head.encode() + body)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    status = int(data.split(b" ", 2)[1])
    return status, data.split(b"\r\n\r\n", 1)[-1]


def test_the_proxy_forwards_the_client_address(proxy: int) -> None:
    status, body = _request(proxy, "GET /gradio_api/info HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert status == 200 and body == b"127.0.0.9 0"


def test_an_oversized_body_is_refused_by_the_proxy_and_an_upload_passes(proxy: int) -> None:
    before = len(_Upstream.seen)
    big = b"x" * (2 * 1024 * 1024)
    status, _ = _request(proxy, f"POST /gradio_api/call/x HTTP/1.1\r\nHost: x\r\nContent-Length: {len(big)}\r\n"
                                "Connection: close\r\n\r\n", big)
    assert status == 413 and len(_Upstream.seen) == before  # the app never saw it
    status, body = _request(proxy, f"POST /gradio_api/upload HTTP/1.1\r\nHost: x\r\nContent-Length: {len(big)}\r\n"
                                   "Connection: close\r\n\r\n", big)
    assert status == 200 and body == f"127.0.0.9 {len(big)}".encode()

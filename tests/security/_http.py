"""A raw HTTP/1.1 client for the app-limit attacks: it streams a chunked body (no Content-Length) and stops sending as
soon as the server answers, the way an attacker's client would push until it is cut off.  httpx cannot: it sends the
whole body before it looks for an answer."""

from __future__ import annotations

import json
import select
import socket
from dataclasses import dataclass
from typing import Any


@dataclass
class Answer:
    """What came back: the status (None when the connection closed before one), the body, and bytes sent."""

    status: int | None
    body: bytes
    sent: int

    def json(self) -> Any:
        """The body as JSON."""
        return json.loads(self.body.decode("utf-8"))


def _read_answer(sock: socket.socket) -> tuple[int | None, bytes]:
    data = b""
    sock.settimeout(30)
    try:
        while True:
            if b"\r\n\r\n" in data:
                head, _, body = data.partition(b"\r\n\r\n")
                length = [int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:")]
                if length and len(body) >= length[0]:
                    break
            block = sock.recv(65536)
            if not block:
                break
            data += block
    except OSError:
        pass  # the server closed on us (what it does with a body it refused): keep what arrived
    if not data.startswith(b"HTTP/1.1 "):
        return None, data
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def post_streamed(url: str, path: str, total: int, *, content_type: str = "application/json",
                  piece: bytes = b"0" * 65536, source: str = "127.0.0.1", prefix: bytes = b"",
                  declare: int | None = None) -> Answer:
    """POST ``prefix`` then ``piece`` repeated up to ``total`` bytes to ``url + path`` from ``source``: chunked, or
    with ``Content-Length: declare`` when given; stops as soon as the server answers (progress-driven, no sleeps)."""
    host, port = url.split("//", 1)[1].split(":")
    with socket.create_connection((host, int(port)), source_address=(source, 0)) as sock:
        framing = f"Content-Length: {declare}" if declare is not None else "Transfer-Encoding: chunked"
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: {content_type}\r\n"
                     f"{framing}\r\n\r\n".encode("ascii"))
        sent, answered = 0, False
        pieces = ([prefix] if prefix else []) + [piece] * ((total - len(prefix)) // len(piece) + 1)
        for block in pieces:
            if select.select([sock], [], [], 0)[0]:
                answered = True
                break
            block = block[:max(0, total - sent)]
            if not block:
                break
            try:
                sock.sendall(block if declare is not None else b"%x\r\n%s\r\n" % (len(block), block))
            except OSError:
                answered = True
                break
            sent += len(block)
        if not answered and declare is None:
            try:
                sock.sendall(b"0\r\n\r\n")
            except OSError:
                pass
        status, body = _read_answer(sock)
        return Answer(status, body, sent)

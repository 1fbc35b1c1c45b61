"""A local OpenAI-compatible chat-completions server with hostile modes, for tests.

It speaks the real wire protocol (JSON and server-sent events, ``usage``,
``logprobs`` with ``top_logprobs``), so the product's real litellm client code
runs against it.  Bind is 127.0.0.1 on an ephemeral port; every handler loop is
bounded in time and ends within a fraction of a second of :meth:`stop`.

Usage::

    with FakeOpenAIServer(reply=lambda messages: "<summary>...</summary>") as server:
        server.script("http500", "http500")      # the next two requests fail, then the default mode
        ... api_base=server.url ...
        assert len(server.requests) == 3

Modes (``server.mode`` for every request, ``server.script(...)`` for the next ones):

``ok``            normal reply from the ``reply`` function
``hang``          accept the connection, never send headers
``drip``          send headers, then one byte every ``drip_interval_s`` (never a full event)
``endless``       stream content chunks without end
``slow``          a well-formed stream of the reply, one chunk every ``drip_interval_s`` (a slow CPU server still
                  producing tokens); the seconds from its first to its last chunk go to ``stream_seconds``
``stall``         a stream that sends one content chunk, then nothing (a server that stopped)
``huge``          a 50 MB answer (streamed as chunks, or one JSON body when not streaming)
``html``          an HTML error page with status 200
``bad_json``      invalid JSON / invalid SSE data with status 200
``http500``       HTTP 500 with an OpenAI-style error body
``ratelimit``     HTTP 429 with ``Retry-After: 1000000``
``ratelimit_short`` HTTP 429 with ``Retry-After: 1``
``empty``         a reply whose content is ""
``whitespace``    a reply whose content is only blanks and newlines
``ignore_format`` a plausible review without any of the requested tags
``wrong_json``    valid JSON that is not a chat completion, status 200, even when asked to stream

A server made with ``streams=False`` never streams, like several OpenAI-compatible servers and proxies: every
mode answers as if the request said ``"stream": false`` (``ok`` is one JSON ``chat.completion``, ``huge`` one 50 MB
JSON body, ``endless`` a JSON body that never ends, ``drip`` a JSON body of one blank every ``drip_interval_s``).
``event_content_type`` is the Content-Type of a stream (``text/event-stream``; a mislabelled stream says otherwise).
``mode_of``, when given, picks the mode of each request from its JSON body (after any scripted modes): an endpoint
that hangs on some prompts and answers others, whatever the order in which a client sends them.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler
from typing import Any, Callable

from tests.fakes._loopback import LoopbackServer

MODES = ("ok", "hang", "drip", "endless", "slow", "stall", "huge", "html", "bad_json", "http500", "ratelimit",
         "ratelimit_short", "empty", "whitespace", "ignore_format", "wrong_json")

DEFAULT_REVIEW = (
    "<summary>The paper proposes a method and evaluates it on standard benchmarks.</summary>\n"
    "<strengths>\n1. Clear writing.\n   - The method section is easy to follow.\n2. Strong baselines.\n"
    "3. Code is released.\n4. Ablations are thorough.\n</strengths>\n"
    "<weaknesses>\n1. Limited novelty.\n   - Similar ideas exist.\n2. Small datasets.\n3. No error bars.\n"
    "4. Missing related work.\n</weaknesses>\n"
    "<questions>\n- How does the method scale?\n</questions>"
)
IGNORE_FORMAT_REVIEW = (
    "This is an interesting paper. I liked the experiments, but the novelty is limited. "
    "The authors should compare with more baselines. Overall I lean towards rejection."
)
MAX_HANDLER_S = 60.0  # hard bound on any single hostile handler


def default_reply(messages: list[dict[str, Any]]) -> str:
    """A well-formed tagged review, whatever the prompt."""
    return DEFAULT_REVIEW


class FakeOpenAIServer:
    """OpenAI-compatible ``/v1/chat/completions`` and ``/v1/models`` on 127.0.0.1, with scripted behaviour."""

    def __init__(self, reply: Callable[[list[dict[str, Any]]], str] | None = None, mode: str = "ok",
                 model: str = "fake-model", drip_interval_s: float = 0.5, chunk_chars: int = 40,
                 streams: bool = True, event_content_type: str = "text/event-stream",
                 mode_of: Callable[[dict[str, Any]], str] | None = None) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}")
        self.reply = reply or default_reply
        self.mode = mode
        self.model = model
        self.drip_interval_s = drip_interval_s
        self.chunk_chars = chunk_chars
        self.streams = streams
        self.event_content_type = event_content_type
        self.mode_of = mode_of
        self.requests: list[dict[str, Any]] = []
        self.stream_seconds: list[float] = []  # per ``slow`` stream: first chunk to last, as sent
        self._script: deque[str] = deque()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._server: LoopbackServer | None = None

    # -- lifecycle ---------------------------------------------------------
    def handler_class(self) -> type[_Handler]:
        """The request handler (subclasses of the fake override this to change the protocol)."""
        return _Handler

    def start(self) -> FakeOpenAIServer:
        """Bind an ephemeral port and serve in a daemon thread."""
        server = self

        class Handler(self.handler_class()):  # type: ignore[misc]
            fake = server

        self._server = LoopbackServer(Handler, poll_interval=0.05)
        return self

    def stop(self) -> None:
        """Stop serving; hanging handlers notice within ~0.1 s and return."""
        self._stop.set()
        if self._server is not None:
            self._server.close()

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The bound port."""
        assert self._server is not None, "server not started"
        return self._server.port

    @property
    def url(self) -> str:
        """Base URL to hand to an OpenAI-compatible client (ends in /v1)."""
        return f"http://127.0.0.1:{self.port}/v1"

    # -- scripting ---------------------------------------------------------
    def script(self, *modes: str) -> None:
        """Queue modes for the next requests (then ``self.mode`` again)."""
        for mode in modes:
            if mode not in MODES:
                raise ValueError(f"unknown mode {mode!r}")
        with self._lock:
            self._script.extend(modes)

    def next_mode(self) -> str:
        """The mode of the request being handled now."""
        with self._lock:
            return self._script.popleft() if self._script else self.mode

    def mode_for(self, body: dict[str, Any]) -> str:
        """The mode of a request with this JSON body: a scripted one first, then ``mode_of(body)`` when given, else
        :meth:`next_mode` (which subclasses may override)."""
        if self.mode_of is None:
            return self.next_mode()
        with self._lock:
            if self._script:
                return self._script.popleft()
        mode = self.mode_of(body)
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}")
        return mode

    def record(self, entry: dict[str, Any]) -> None:
        """Remember one request (body and headers)."""
        with self._lock:
            self.requests.append(entry)

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        """Recorded chat-completion requests."""
        return [r for r in self.requests if r["path"].endswith("/chat/completions")]

    def stopping(self, started: float) -> bool:
        """Whether a long handler must end now."""
        return self._stop.is_set() or time.monotonic() - started > MAX_HANDLER_S


class _Handler(BaseHTTPRequestHandler):
    fake: FakeOpenAIServer
    protocol_version = "HTTP/1.1"
    timeout = 5  # socket timeout: a write to a client that stopped reading ends instead of blocking forever

    def log_message(self, format: str, *args: Any) -> None:
        pass

    # -- helpers -----------------------------------------------------------
    def _send(self, status: int, body: bytes, content_type: str = "application/json",
              headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(obj).encode(), headers=headers)

    def _start_stream(self, content_type: str | None = None) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type or self.fake.event_content_type)
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def _event(self, obj: Any) -> None:
        payload = obj if isinstance(obj, str) else json.dumps(obj)
        self.wfile.write(f"data: {payload}\n\n".encode())
        self.wfile.flush()

    # -- routes ------------------------------------------------------------
    def do_GET(self) -> None:
        self.fake.record({"method": "GET", "path": self.path, "headers": dict(self.headers), "body": None})
        if self.path.rstrip("/").endswith("/models"):
            self._json(200, {"object": "list", "data": [{"id": self.fake.model, "object": "model", "owned_by": "t"}]})
        else:
            self._json(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = {"_invalid": raw.decode(errors="replace")}
        self.fake.record({"method": "POST", "path": self.path, "headers": dict(self.headers), "body": body})
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._json(404, {"error": {"message": "not found"}})
            return
        try:
            self._chat(body, self.fake.mode_for(body))
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            pass  # the client hung up (expected for hostile modes)

    def _chat(self, body: dict[str, Any], mode: str) -> None:
        fake = self.fake
        started = time.monotonic()
        stream = bool(body.get("stream")) and fake.streams
        if mode == "hang":
            while not fake.stopping(started):
                time.sleep(0.05)
            return
        if mode == "drip":
            self._start_stream(None if stream else "application/json")
            while not fake.stopping(started):
                # an SSE comment byte / a JSON blank: keeps the socket alive, never completes an event or a body
                self.wfile.write(b":" if stream else b" ")
                self.wfile.flush()
                end = time.monotonic() + fake.drip_interval_s
                while time.monotonic() < end and not fake.stopping(started):
                    time.sleep(0.02)
            return
        if mode == "stall" and stream:
            self._start_stream()
            self._event(_chunk(fake.model, [{"index": 0, "delta": {"role": "assistant", "content": "<summary>"},
                                              "finish_reason": None}]))
            while not fake.stopping(started):
                time.sleep(0.02)
            return
        if mode == "html":
            self._send(200, b"<!DOCTYPE html><html><body><h1>502 Bad Gateway</h1></body></html>", "text/html")
            return
        if mode == "bad_json":
            if stream:
                self._start_stream()
                self._event("{not json")
                self._event("[DONE]")
            else:
                self._send(200, b"{not json", "application/json")
            return
        if mode == "wrong_json":
            self._json(200, {"object": "error", "message": "model not loaded", "code": 40401})
            return
        if mode == "http500":
            self._json(500, {"error": {"message": "internal error", "type": "server_error"}})
            return
        if mode in ("ratelimit", "ratelimit_short"):
            wait = "1000000" if mode == "ratelimit" else "1"
            self._json(429, {"error": {"message": "rate limited", "type": "rate_limit"}}, headers={"Retry-After": wait})
            return
        messages = body.get("messages") or []
        text = {"empty": "", "whitespace": "   \n\t \n", "ignore_format": IGNORE_FORMAT_REVIEW}.get(mode)
        if text is None:
            text = fake.reply(messages) if mode in ("ok", "slow") else ""
        want_logprobs = bool(body.get("logprobs"))
        top = int(body.get("top_logprobs") or 0)
        if mode == "endless" and stream:
            self._stream_endless(started)
        elif mode == "endless":
            self._json_endless(started)
        elif mode == "huge":
            self._huge(stream, started)
        elif stream:
            self._stream(text, messages, want_logprobs, top, body, pace_s=fake.drip_interval_s if mode == "slow"
                         else 0.0, started=started)
        else:
            self._json(200, _completion(fake.model, text, messages, want_logprobs, top))

    def _stream(self, text: str, messages: list[dict[str, Any]], want_logprobs: bool, top: int,
                body: dict[str, Any], pace_s: float = 0.0, started: float = 0.0) -> None:
        fake = self.fake
        self._start_stream()
        step = fake.chunk_chars
        pieces = [text[i:i + step] for i in range(0, len(text), step)] or [""]
        first_sent = time.monotonic()
        for i, piece in enumerate(pieces):
            if pace_s and i:
                end = time.monotonic() + pace_s
                while time.monotonic() < end and not fake.stopping(started):
                    time.sleep(0.01)
            delta: dict[str, Any] = {"content": piece}
            if i == 0:
                delta["role"] = "assistant"
            choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": None}
            if want_logprobs:
                choice["logprobs"] = {"content": _token_logprobs(piece, top)}
            self._event(_chunk(fake.model, [choice]))
        self._event(_chunk(fake.model, [{"index": 0, "delta": {}, "finish_reason": "stop"}]))
        if pace_s:
            with fake._lock:
                fake.stream_seconds.append(time.monotonic() - first_sent)
        if (body.get("stream_options") or {}).get("include_usage"):
            self._event(_chunk(fake.model, [], usage=_usage(messages, text)))
        self._event("[DONE]")

    def _stream_endless(self, started: float) -> None:
        self._start_stream()
        first = True
        while not self.fake.stopping(started):
            delta = {"content": "more words " * 20}
            if first:
                delta["role"] = "assistant"
                first = False
            self._event(_chunk(self.fake.model, [{"index": 0, "delta": delta, "finish_reason": None}]))

    def _json_endless(self, started: float) -> None:
        """A chat.completion body whose content string never ends (no Content-Length: ends when the socket does)."""
        self._start_stream("application/json")
        head = _completion(self.fake.model, "", [], False, 0)
        self.wfile.write(json.dumps(head).split('"content": ""')[0].encode() + b'"content": "')
        while not self.fake.stopping(started):
            self.wfile.write(b"more words " * 400)

    def _huge(self, stream: bool, started: float) -> None:
        total = 50_000_000
        if not stream:
            self._json(200, _completion(self.fake.model, "x" * total, [], False, 0))
            return
        self._start_stream()
        sent, block = 0, "y" * 65_536
        first = True
        while sent < total and not self.fake.stopping(started):
            delta = {"content": block, **({"role": "assistant"} if first else {})}
            first = False
            self._event(_chunk(self.fake.model, [{"index": 0, "delta": delta, "finish_reason": None}]))
            sent += len(block)
        self._event(_chunk(self.fake.model, [{"index": 0, "delta": {}, "finish_reason": "stop"}]))
        self._event("[DONE]")


def _usage(messages: list[dict[str, Any]], text: str) -> dict[str, int]:
    prompt = sum(len(str(m.get("content", "")).split()) for m in messages) + 3
    completion = len(text.split())
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _token_logprobs(text: str, top: int) -> list[dict[str, Any]]:
    tokens = [t for t in text.split(" ") if t] or ([text] if text else [])
    out = []
    for i, tok in enumerate(tokens):
        lp = -0.1 * (1 + i % 5)
        alts = [{"token": tok, "logprob": lp, "bytes": list(tok.encode())}]
        alts += [{"token": f"alt{j}", "logprob": lp - 1.0 - j, "bytes": list(f"alt{j}".encode())}
                 for j in range(top - 1)]
        out.append({"token": tok, "logprob": lp, "bytes": list(tok.encode()), "top_logprobs": alts[:top]})
    return out


def _chunk(model: str, choices: list[dict[str, Any]], usage: dict[str, int] | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": int(time.time()),
                           "model": model, "choices": choices}
    if usage is not None:
        obj["usage"] = usage
    return obj


def _completion(model: str, text: str, messages: list[dict[str, Any]], want_logprobs: bool,
                top: int) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
    if want_logprobs:
        choice["logprobs"] = {"content": _token_logprobs(text, top)}
    return {"id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [choice], "usage": _usage(messages, text)}


class CallGate:
    """The fake LLM's reply function: counts calls, and the call numbered ``hold_at`` waits until released.

    ``reached`` is set when the held call arrives: the serve is then provably mid-generation, whatever the speed of
    the machine. ``done`` holds the papers whose call returned a review.
    """

    def __init__(self, paper_of: Callable[[dict[str, Any]], str] | None = None, delay_s: float = 0.05) -> None:
        self.paper_of = paper_of or (lambda request: json.dumps(request["body"]["messages"], sort_keys=True))
        self.delay_s = delay_s  # every answered call takes at least this long (calls overlap the way real ones do)
        self.calls = 0
        self.hold_at: int | None = None
        self.done: set[str] = set()
        self.reached = threading.Event()
        self.released = threading.Event()
        self._lock = threading.Lock()

    def arm(self, at: int) -> None:
        self.hold_at = at
        self.reached.clear()
        self.released.clear()

    def __call__(self, messages: list[dict[str, Any]]) -> str:
        with self._lock:
            self.calls += 1
            number = self.calls
        if number == self.hold_at:
            self.reached.set()
            self.released.wait(timeout=300)  # freed after the kill (the guard only frees a forgotten thread)
            return DEFAULT_REVIEW  # to a client that was killed meanwhile: never delivered, never "done"
        time.sleep(self.delay_s)
        self.done.add(self.paper_of({"body": {"messages": messages}}))
        return DEFAULT_REVIEW

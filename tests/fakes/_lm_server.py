"""A threaded loopback HTTP server running a tiny transformers checkpoint (shared by the vLLM and SGLang fakes)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from tests.fakes._loopback import LoopbackServer

Handler = Callable[[str, str, dict[str, Any] | None], tuple[int, Any]]


class TinyLM:
    """Full teacher-forcing forward pass of a local checkpoint: per-position log-prob of every prompt token."""

    def __init__(self, path: Path) -> None:
        import torch
        from transformers import AutoModelForCausalLM

        self.torch = torch
        self.model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, local_files_only=True).eval()
        self.lock = threading.Lock()

    def prompt_logprobs(self, ids: list[int]) -> list[tuple[float, int]]:
        """(log-prob of token j given tokens < j, rank of token j) for j >= 1."""
        return [(lp, rank) for lp, rank, _, _ in self.prompt_logprobs_top(ids, 0)]

    def next_logprobs(self, ids: list[int]) -> list[float]:
        """Log-probs of every token of the vocabulary after ``ids``."""
        torch = self.torch
        with self.lock, torch.inference_mode():
            return [float(x) for x in torch.log_softmax(self.model(torch.tensor([ids])).logits[0, -1].float(), -1)]

    def prompt_logprobs_top(self, ids: list[int], k: int, asked: list[int] | None = None
                            ) -> list[tuple[float, int, list[tuple[int, float]], list[tuple[int, float]]]]:
        """As :meth:`prompt_logprobs`, with the k most likely tokens at each position as (token id, log-prob), and
        the log-probs of the ``asked`` token ids there."""
        torch = self.torch
        with self.lock, torch.inference_mode():
            logp = torch.log_softmax(self.model(torch.tensor([ids])).logits[0].float(), -1)
        out = []
        for j in range(1, len(ids)):
            row = logp[j - 1]
            best = torch.topk(row, k) if k else None
            top = [] if best is None else [(int(i), float(v)) for v, i in zip(best.values, best.indices, strict=True)]
            out.append((float(row[ids[j]]), int((row > row[ids[j]]).sum()) + 1, top,
                        [(t, float(row[t])) for t in asked or []]))
        return out


def handler_class(handler: Handler) -> type[BaseHTTPRequestHandler]:
    """A request handler class answering ``handler(method, path, json_body)`` with JSON (an empty body for None)."""

    class _H(BaseHTTPRequestHandler):
        def _reply(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            status, payload = handler(method, self.path, body)
            data = b"" if payload is None else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._reply("GET")

        def do_POST(self) -> None:
            self._reply("POST")

        def log_message(self, *args: Any) -> None:
            pass

    return _H


@contextmanager
def serve(handler: Handler) -> Iterator[str]:
    """Serve ``handler(method, path, json_body)`` on 127.0.0.1:<ephemeral>; yields the base URL."""
    server = LoopbackServer(handler_class(handler))
    try:
        yield server.base_url
    finally:
        server.close()

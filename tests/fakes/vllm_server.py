"""A fake vLLM OpenAI-compatible server: ``/v1/models`` and ``/v1/completions`` with ``prompt_logprobs``.

Response shape as vLLM returns it: ``choices[0].prompt_logprobs`` is a list aligned with the prompt tokens, ``None``
for the first, then a dict keyed by token id (a string once JSON-encoded) of ``{logprob, rank, decoded_token}``
holding the actual prompt token (plus the top-k when ``prompt_logprobs`` > 0; this fake only sends the actual one).
``fail_first`` makes the first N completion calls answer 503 to exercise the client's retries.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.fakes._lm_server import TinyLM, serve


@contextmanager
def fake_vllm(checkpoint: Path, model_name: str | None = None, fail_first: int = 0) -> Iterator[str]:
    """Run the fake on a loopback port; yields its base URL.  Records calls in ``state`` for assertions."""
    lm = TinyLM(checkpoint)
    name = model_name or str(checkpoint)
    state = {"fails": fail_first, "calls": 0}

    def handle(method: str, path: str, body: dict[str, Any] | None) -> tuple[int, Any]:
        if method == "GET" and path == "/v1/models":
            return 200, {"object": "list", "data": [{"id": name, "object": "model", "owned_by": "vllm"}]}
        if method == "POST" and path == "/v1/completions" and body is not None:
            state["calls"] += 1
            if state["fails"] > 0:
                state["fails"] -= 1
                return 503, {"error": "overloaded"}
            ids = body["prompt"]
            if not isinstance(ids, list) or body.get("prompt_logprobs") is None:
                return 400, {"error": "expected token-id prompt and prompt_logprobs"}
            plp: list[Any] = [None]
            for tok, (lp, rank) in zip(ids[1:], lm.prompt_logprobs(ids), strict=True):
                plp.append({str(tok): {"logprob": lp, "rank": rank, "decoded_token": f"<{tok}>"}})
            choice = {"index": 0, "text": "x", "logprobs": None, "finish_reason": "length", "prompt_logprobs": plp}
            return 200, {"id": "cmpl-fake", "object": "text_completion", "model": name, "choices": [choice],
                         "usage": {"prompt_tokens": len(ids), "completion_tokens": 1}}
        return 404, {"error": f"no route {method} {path}"}

    with serve(handle) as url:
        yield url

"""A fake vLLM OpenAI-compatible server: ``/health``, ``/v1/models`` and ``/v1/completions`` with ``prompt_logprobs``.

Response shape as vLLM returns it: ``choices[0].prompt_logprobs`` is a list aligned with the prompt tokens, ``None``
for the first, then a dict keyed by token id (a string once JSON-encoded) of ``{logprob, rank, decoded_token}``
holding the actual prompt token plus the top-k when ``prompt_logprobs`` = k > 0.
``fail_first`` makes the first N completion calls answer 503 to exercise the client's retries.  A batch (``prompt`` a
list of token-id prompts) answers one choice per prompt, ``index`` its position.

``python -m tests.fakes.vllm_server --model PATH --port N [--host 127.0.0.1 ...]`` runs it the way vLLM's
``api_server`` module is run (the vllm-local tests start it through a fake ``vllm`` package).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.fakes._lm_server import TinyLM, handler_class, serve


def vllm_handler(checkpoint: Path, model_name: str | None = None,
                 fail_first: int = 0) -> Callable[[str, str, dict[str, Any] | None], tuple[int, Any]]:
    """The fake's request handler (``state`` on it counts calls, the prompts they carried and the failures left)."""
    lm = TinyLM(checkpoint)
    name = model_name or str(checkpoint)
    state = {"fails": fail_first, "calls": 0, "prompts": 0}

    def handle(method: str, path: str, body: dict[str, Any] | None) -> tuple[int, Any]:
        if method == "GET" and path == "/health":
            return 200, None
        if method == "GET" and path == "/v1/models":
            return 200, {"object": "list", "data": [{"id": name, "object": "model", "owned_by": "vllm"}]}
        if method == "POST" and path == "/v1/completions" and body is not None:
            state["calls"] += 1
            if state["fails"] > 0:
                state["fails"] -= 1
                return 503, {"error": "overloaded"}
            ids = body["prompt"]
            if isinstance(ids, list) and ids and isinstance(ids[0], list):  # a batch: one choice per prompt
                choices = []
                for i, one in enumerate(ids):
                    state["calls"] -= 1  # counted once per call, not per prompt
                    status, answer = handle(method, path, body | {"prompt": one})
                    if status != 200:
                        return status, answer
                    choices.append(answer["choices"][0] | {"index": i})
                return 200, {"id": "cmpl-fake", "object": "text_completion", "model": name, "choices": choices,
                             "usage": {"prompt_tokens": sum(len(p) for p in ids), "completion_tokens": len(ids)}}
            state["prompts"] += 1
            if isinstance(ids, list) and body.get("prompt_logprobs") is None and body.get("logprobs"):
                # one generated token, greedy among ``allowed_token_ids``, with its raw log-prob (vLLM's default
                # ``raw_logprobs`` mode: before the allowed-tokens mask)
                logp = lm.next_logprobs(ids)
                allowed = body.get("allowed_token_ids") or range(len(logp))
                tok = max(allowed, key=lambda t: logp[t])
                choice = {"index": 0, "text": f"<{tok}>", "finish_reason": "length", "prompt_logprobs": None,
                          "logprobs": {"tokens": [f"<{tok}>"], "token_logprobs": [logp[tok]],
                                       "top_logprobs": [{f"<{tok}>": logp[tok]}], "text_offset": [0]}}
                return 200, {"id": "cmpl-fake", "object": "text_completion", "model": name, "choices": [choice],
                             "usage": {"prompt_tokens": len(ids), "completion_tokens": 1}}
            if not isinstance(ids, list) or body.get("prompt_logprobs") is None:
                return 400, {"error": "expected token-id prompt and prompt_logprobs"}
            plp: list[Any] = [None]
            for tok, (lp, rank, top, _) in zip(ids[1:], lm.prompt_logprobs_top(ids, int(body["prompt_logprobs"])),
                                            strict=True):
                entry = {str(t): {"logprob": v, "rank": r + 1, "decoded_token": f"<{t}>"}
                         for r, (t, v) in enumerate(top)}
                plp.append(entry | {str(tok): {"logprob": lp, "rank": rank, "decoded_token": f"<{tok}>"}})
            choice = {"index": 0, "text": "x", "logprobs": None, "finish_reason": "length", "prompt_logprobs": plp}
            return 200, {"id": "cmpl-fake", "object": "text_completion", "model": name, "choices": [choice],
                         "usage": {"prompt_tokens": len(ids), "completion_tokens": 1}}
        return 404, {"error": f"no route {method} {path}"}

    handle.state = state  # type: ignore[attr-defined]
    return handle


@contextmanager
def fake_vllm(checkpoint: Path, model_name: str | None = None, fail_first: int = 0) -> Iterator[str]:
    """Run the fake on a loopback port; yields its base URL."""
    with serve(vllm_handler(checkpoint, model_name, fail_first)) as url:
        yield url


def main(argv: list[str] | None = None) -> None:
    """Serve on ``--host``:``--port`` until killed, as ``python -m vllm.entrypoints.openai.api_server`` does."""
    from http.server import ThreadingHTTPServer

    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args, _rest = parser.parse_known_args(argv)  # --dtype, --kv-cache-memory-bytes: accepted, not used
    handler = vllm_handler(Path(args.model))

    httpd = ThreadingHTTPServer((args.host, args.port), handler_class(handler))
    print(f"fake vLLM serving {args.model} on {args.host}:{args.port}", flush=True)
    httpd.serve_forever()


if __name__ == "__main__":
    main()

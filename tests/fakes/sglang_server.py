"""A fake SGLang server: ``/get_model_info`` and ``/generate`` with ``return_logprob`` and ``logprob_start_len``.

``meta_info.input_token_logprobs`` is a list of ``[logprob, token_id, text]`` for the input tokens from
``logprob_start_len`` on; the first of them has ``None`` as log-prob when it is the first prompt token, as in SGLang.
A batch (``input_ids`` a list of prompts, ``logprob_start_len`` one value or one per prompt) answers a list.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.fakes._lm_server import TinyLM, serve


@contextmanager
def fake_sglang(checkpoint: Path) -> Iterator[str]:
    """Run the fake on a loopback port; yields its base URL."""
    lm = TinyLM(checkpoint)

    def handle(method: str, path: str, body: dict[str, Any] | None) -> tuple[int, Any]:
        if method == "GET" and path == "/get_model_info":
            return 200, {"model_path": str(checkpoint), "is_generation": True}
        if method == "POST" and path == "/generate" and body is not None:
            ids = body["input_ids"]
            if ids and isinstance(ids[0], list):  # a batch: one answer per prompt, in order
                starts = body.get("logprob_start_len", -1)
                asked = body.get("token_ids_logprob")
                answers = []
                for i, one in enumerate(ids):
                    item = body | {"input_ids": one, "logprob_start_len": starts[i] if isinstance(starts, list)
                                   else starts}
                    if asked and isinstance(asked[0], list):
                        item["token_ids_logprob"] = asked[i]
                    status, answer = handle(method, path, item)
                    if status != 200:
                        return status, answer
                    answers.append(answer)
                return 200, answers
            start = int(body.get("logprob_start_len", -1))
            if not body.get("return_logprob") or start < 0:
                return 200, {"text": "", "meta_info": {"prompt_tokens": len(ids)}}
            k = int(body.get("top_logprobs_num") or 0)
            asked = [int(t) for t in body.get("token_ids_logprob") or []]
            rows = [None, *lm.prompt_logprobs_top(ids, k, asked)]
            items = [[None if rows[j] is None else rows[j][0], ids[j], None] for j in range(start, len(ids))]
            meta: dict[str, Any] = {"prompt_tokens": len(ids), "input_token_logprobs": items}
            if asked:  # SGLang's token_ids_logprob: the asked tokens' log-probs at each position
                meta["input_token_ids_logprobs"] = [None if rows[j] is None else [[v, t, None] for t, v in rows[j][3]]
                                                    for j in range(start, len(ids))]
            if k:
                meta["input_top_logprobs"] = [None if rows[j] is None else [[v, t, None] for t, v in rows[j][2]]
                                              for j in range(start, len(ids))]
            return 200, {"text": "", "meta_info": meta}
        return 404, {"error": f"no route {method} {path}"}

    with serve(handle) as url:
        yield url

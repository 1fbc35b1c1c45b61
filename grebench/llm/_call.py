"""One streamed attempt at a chat call, bounded by an outer deadline and a size cap.

Why a worker thread: litellm's ``timeout`` becomes the HTTP client's
per-read timeout, which an endpoint defeats by sending one byte every few
seconds, and nothing in litellm bounds an endless stream.  So the attempt runs
in a daemon thread that iterates the stream and stops at the size cap, while
the calling thread waits on it with the outer deadline.  At the deadline the
caller abandons the worker (sets a flag the worker checks after every chunk,
and returns a timeout); the worker's own HTTP timeout, or the next chunk,
ends it later and its result is discarded.  No call can block the queue for
longer than ``timeout_s``.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from grebench.llm._types import ChatRequest


@dataclass
class Attempt:
    """What one attempt produced: text and chunks, or the exception / timeout that ended it."""

    text: str = ""
    chunks: list[Any] = field(default_factory=list)
    logprobs: list[dict[str, Any]] = field(default_factory=list)
    truncated: bool = False
    content_type: str | None = None
    exception: BaseException | None = None
    timed_out: bool = False
    idle_s: float = 0.0


def _logprob_entries(choice: Any) -> list[dict[str, Any]]:
    lp = getattr(choice, "logprobs", None)
    content = getattr(lp, "content", None) if lp is not None else None
    if content is None and isinstance(lp, dict):
        content = lp.get("content")
    out = []
    for item in content or []:
        get = item.get if isinstance(item, dict) else (lambda k, _i=item: getattr(_i, k, None))
        top = get("top_logprobs") or []
        out.append({
            "token": get("token"), "logprob": get("logprob"),
            "top": [{"token": (t.get("token") if isinstance(t, dict) else t.token),
                     "logprob": (t.get("logprob") if isinstance(t, dict) else t.logprob)} for t in top],
        })
    return out


def stream_attempt(request: ChatRequest, api_key: str | None, timeout_s: float, max_chars: int) -> Attempt:
    """Run one streamed call; never blocks longer than ``timeout_s`` (plus a few ms)."""
    import litellm

    attempt = Attempt()
    abandoned = threading.Event()
    finished = threading.Event()
    last_data = [time.monotonic()]
    kwargs = dict(request.api_params)
    if kwargs.get("logprobs") is False:
        kwargs.pop("logprobs")
        kwargs.pop("top_logprobs", None)

    def work() -> None:
        response = None
        try:
            response = litellm.completion(
                model=request.model, messages=[{"role": r, "content": c} for r, c in request.messages],
                api_base=request.api_base, api_key=api_key, stream=True, timeout=timeout_s,
                stream_options={"include_usage": True}, max_retries=0, num_retries=0, drop_params=True, **kwargs)
            headers = (getattr(response, "_hidden_params", None) or {}).get("additional_headers") or {}
            attempt.content_type = headers.get("llm_provider-content-type")
            parts: list[str] = []
            size = 0
            for chunk in response:
                last_data[0] = time.monotonic()
                if abandoned.is_set():
                    break
                attempt.chunks.append(chunk)
                for choice in getattr(chunk, "choices", None) or []:
                    piece = getattr(getattr(choice, "delta", None), "content", None) or ""
                    attempt.logprobs.extend(_logprob_entries(choice))
                    if piece:
                        room = max_chars - size
                        parts.append(piece[:room])
                        size += min(len(piece), room)
                        if len(piece) > room:
                            attempt.truncated = True
                if attempt.truncated:
                    break
            attempt.text = "".join(parts)
        except BaseException as exc:
            attempt.exception = exc
        finally:
            stream = getattr(response, "completion_stream", None)
            if stream is not None and hasattr(stream, "close"):
                try:
                    stream.close()  # release the connection of a stream we stopped reading
                except Exception:
                    pass
            finished.set()

    worker = threading.Thread(target=work, name="grebench-llm-call", daemon=True)
    worker.start()
    if not finished.wait(timeout_s):
        abandoned.set()  # the worker may still write to `attempt`: hand back a fresh record
        return Attempt(timed_out=True, idle_s=time.monotonic() - last_data[0])
    return attempt

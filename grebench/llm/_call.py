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

Pinned endpoints: a submitted model's base URL was checked (:func:`grebench.endpoints.check_url`) and its address
pinned.  While :func:`pinned_endpoints` is active, a call whose ``api_base`` is one of those URLs goes through an
``openai.OpenAI`` client built on an ``httpx.Client`` with :func:`grebench.endpoints.pinned_transport` and
``follow_redirects=False``, handed to litellm as ``client=``: litellm's OpenAI provider then uses that client for
the (streamed) request instead of building one from ``api_base``, so no second DNS lookup and no redirect can send
the call anywhere but the checked address.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from grebench.llm._types import ChatRequest

if TYPE_CHECKING:
    from grebench.endpoints import PinnedEndpoint

_PINS: dict[str, PinnedEndpoint] = {}
_PINS_LOCK = threading.Lock()


def _pin_key(api_base: str | None) -> str:
    return (api_base or "").strip().rstrip("/")


@contextmanager
def pinned_endpoints(endpoints: Iterable[PinnedEndpoint]) -> Iterator[None]:
    """Route calls to these endpoints' URLs only to their checked addresses, for the duration of the block.

    A process-wide table (not a context variable) because the calls run in worker threads.
    """
    added = []
    with _PINS_LOCK:
        for endpoint in endpoints:
            key = _pin_key(endpoint.url)
            if key in _PINS and _PINS[key] != endpoint:
                raise ValueError(f"{endpoint.url} is already pinned to another address")
            if key not in _PINS:
                _PINS[key] = endpoint
                added.append(key)
    try:
        yield
    finally:
        with _PINS_LOCK:
            for key in added:
                _PINS.pop(key, None)


def pinned_for(api_base: str | None) -> PinnedEndpoint | None:
    """The pinned endpoint of a base URL, or None for an unpinned (operator-configured) one."""
    with _PINS_LOCK:
        return _PINS.get(_pin_key(api_base)) if api_base else None


class PinnedProviderError(ValueError):
    """A pinned endpoint can only be called as an OpenAI-compatible server (model ``openai/<id>``)."""


def _pinned_client(endpoint: PinnedEndpoint, model: str, api_key: str | None, timeout_s: float) -> Any:
    """An ``openai.OpenAI`` client whose every connection goes to ``endpoint.ip``, never following redirects."""
    import httpx
    import openai

    from grebench.endpoints import pinned_transport

    if not model.startswith("openai/"):
        raise PinnedProviderError(f"a submitted base URL is called as an OpenAI-compatible endpoint; the model "
                                  f"string must be openai/<model id>, got {model.split('/', 1)[0]}/…")
    http = httpx.Client(transport=pinned_transport(endpoint), follow_redirects=False, trust_env=False,
                        timeout=timeout_s)
    return openai.OpenAI(base_url=endpoint.url, api_key=api_key or "no-key", http_client=http, max_retries=0,
                         timeout=timeout_s)


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

    endpoint = pinned_for(request.api_base)

    def work() -> None:
        response = None
        client = None
        try:
            if endpoint is not None:
                client = _pinned_client(endpoint, request.model, api_key, timeout_s)
                kwargs["client"] = client
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
            if client is not None:
                client.close()
            finished.set()

    worker = threading.Thread(target=work, name="grebench-llm-call", daemon=True)
    worker.start()
    if not finished.wait(timeout_s):
        abandoned.set()  # the worker may still write to `attempt`: hand back a fresh record
        return Attempt(timed_out=True, idle_s=time.monotonic() - last_data[0])
    return attempt

"""One attempt at a chat call, streamed unless the request says otherwise, bounded by an outer deadline and a size cap.

Why a worker thread: litellm's ``timeout`` becomes the HTTP client's
per-read timeout, which an endpoint defeats by sending one byte every few
seconds, and nothing in litellm bounds an endless stream.  So the attempt runs
in a daemon thread that iterates the stream and stops at the size cap, while
the calling thread waits on it with the outer deadline.  At the deadline the
caller abandons the worker (sets a flag the worker checks after every chunk,
and returns a timeout); the worker's own HTTP timeout, or the next chunk,
ends it later and its result is discarded.  No call can block the queue for
longer than ``timeout_s``.

Replies without streaming (:mod:`grebench.llm._plain`): an endpoint that answers a streamed request with one JSON
``chat.completion`` gets its JSON read and used; a request with ``stream=False`` (``stream = false`` for a
candidate) is sent without streaming through a :class:`~grebench.llm._plain.CappedClient`.  Either way the body is
read in chunks under the size cap and the worker stops at the deadline flag, like a stream.

Pinned endpoints: a submitted model's base URL was checked (:func:`grebench.endpoints.check_url`) and its address
pinned.  While :func:`pinned_endpoints` is active, a call whose ``api_base`` is one of those URLs goes through an
``openai.OpenAI`` client built on an ``httpx.Client`` with :func:`grebench.endpoints.pinned_transport` and
``follow_redirects=False``, handed to litellm as ``client=``: litellm's OpenAI provider then uses that client for
the (streamed) request instead of building one from ``api_base``, so no second DNS lookup and no redirect can send
the call anywhere but the checked address.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from grebench import stop
from grebench.llm._plain import (
    CappedClient,
    body_cap,
    completion_from_body,
    is_json,
    raw_http_response,
    read_body,
)
from grebench.llm._types import PUBLIC_API_BASES, ChatRequest

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


def _http_client(endpoint: PinnedEndpoint | None, timeout_s: float, plain: tuple[int, Callable[[], bool]] | None,
                 trust_env: bool = True) -> Any:
    """The HTTP client under :func:`_openai_client`: pinned to a checked address, and/or reading bodies capped.

    ``plain`` = (body cap, stop flag) makes it a :class:`CappedClient` (non-streamed calls).
    """
    import httpx

    options: dict[str, Any] = {"timeout": timeout_s, "trust_env": trust_env}
    if endpoint is not None:
        from grebench.endpoints import pinned_transport

        options.update(transport=pinned_transport(endpoint), follow_redirects=False, trust_env=False)
    return CappedClient(plain[0], plain[1], **options) if plain is not None else httpx.Client(**options)


def _openai_client(request: ChatRequest, api_key: str | None, timeout_s: float, endpoint: PinnedEndpoint | None,
                   http: Any) -> Any:
    """An ``openai.OpenAI`` client on ``http``, handed to litellm as ``client=`` (its OpenAI provider uses it)."""
    import openai

    if not request.model.startswith("openai/") and not (request.isolated and endpoint is None):
        what = "a submitted base URL is called" if endpoint is not None else "stream = false needs"
        raise PinnedProviderError(f"{what} as an OpenAI-compatible endpoint; the model string must be "
                                  f"openai/<model id>, got {request.model.split('/', 1)[0]}/…")
    base_url: str | None
    if endpoint is not None or request.isolated:  # a submitted model gets its own key or none: never the operator's
        base_url = endpoint.url if endpoint is not None else isolated_base(request)
        client = openai.OpenAI(base_url=base_url, api_key=api_key or "no-key", http_client=http, max_retries=0,
                               timeout=timeout_s, organization="", project="")
        # the SDK fills these from OPENAI_ORG_ID / OPENAI_PROJECT_ID / OPENAI_ADMIN_KEY / OPENAI_CUSTOM_HEADERS when
        # not given: a submitted model's calls carry none of the operator's values
        client.organization = client.project = client.admin_api_key = client.webhook_secret = None
        client._custom_headers = {}
        return client
    # an operator-configured model: what litellm itself would use for an openai/ model
    base_url = request.api_base or os.environ.get("OPENAI_API_BASE") or None
    key = api_key or os.environ.get("OPENAI_API_KEY") or "no-key"
    return openai.OpenAI(base_url=base_url, api_key=key, http_client=http, max_retries=0, timeout=timeout_s)


def isolated_base(request: ChatRequest) -> str:
    """The base URL of an isolated request: its own, or its provider's public OpenAI-compatible endpoint."""
    if request.api_base:
        return request.api_base
    provider = request.model.split("/", 1)[0]
    if provider not in PUBLIC_API_BASES:
        raise PinnedProviderError(f"provider {provider!r} has no known public endpoint for a submitted model")
    return PUBLIC_API_BASES[provider]


@dataclass
class Attempt:
    """What one attempt produced: text and chunks, or the exception / timeout that ended it."""

    text: str = ""
    chunks: list[Any] = field(default_factory=list)
    logprobs: list[dict[str, Any]] = field(default_factory=list)
    truncated: bool = False
    content_type: str | None = None
    streamed: bool = True
    http_status: int | None = None  # known for non-streamed calls (litellm reports some 200 replies as 500)
    reply: Any = None  # the whole litellm ModelResponse of a non-streamed reply (usage, cost)
    exception: BaseException | None = None
    timed_out: bool = False
    idle_s: float = 0.0
    limit_s: float = 0.0  # the deadline that ended it: the total (``llm_timeout_s``) or the idle limit
    idle_limit: bool = False  # ended by no data for ``llm_idle_timeout_s`` (a local server), not by a total deadline


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


def call_attempt(request: ChatRequest, api_key: str | None, timeout_s: float, max_chars: int,
                 idle_timeout_s: float | None = None) -> Attempt:
    """Run one call (streamed unless ``request.stream`` is false); never blocks longer than ``timeout_s`` + a few ms.

    ``idle_timeout_s`` (a model server grebench started on this machine): no total deadline; the call is given up
    only when no data arrived for that long, so a slow CPU server still producing tokens is never cut off (the
    size cap and the request's ``max_tokens`` bound its length).  Remote endpoints keep ``timeout_s`` as a total.
    """
    import litellm

    attempt = Attempt()
    abandoned = threading.Event()
    finished = threading.Event()
    last_data = [time.monotonic()]
    kwargs = dict(request.api_params)
    if kwargs.get("logprobs") is False:
        kwargs.pop("logprobs")
        kwargs.pop("top_logprobs", None)
    if request.stream:
        kwargs["stream_options"] = {"include_usage": True}
    endpoint = pinned_for(request.api_base)
    cap = body_cap(max_chars)

    def arrived() -> bool:
        """Note that data arrived; whether the caller gave up (then the read stops)."""
        last_data[0] = time.monotonic()
        return abandoned.is_set()

    def work() -> None:
        response = None
        http = None
        try:
            model, api_base = request.model, request.api_base
            if request.isolated and endpoint is None:
                # every hosted provider a submission may name speaks the OpenAI protocol at a fixed public URL:
                # one explicit client, nothing read from the environment (no proxy either)
                http = _http_client(None, timeout_s, None if request.stream else (cap, arrived), trust_env=False)
                api_base = isolated_base(request)
                kwargs["client"] = _openai_client(request, api_key, timeout_s, None, http)
                model = "openai/" + request.model.split("/", 1)[1]
            elif endpoint is not None or not request.stream:
                http = _http_client(endpoint, timeout_s, None if request.stream else (cap, arrived))
                kwargs["client"] = _openai_client(request, api_key, timeout_s, endpoint, http)
            response = litellm.completion(
                model=model, messages=[{"role": r, "content": c} for r, c in request.messages],
                api_base=api_base, api_key=api_key, stream=request.stream, timeout=timeout_s,
                max_retries=0, num_retries=0, drop_params=True, **kwargs)
            headers = (getattr(response, "_hidden_params", None) or {}).get("additional_headers") or {}
            attempt.content_type = headers.get("llm_provider-content-type")
            raw = raw_http_response(response) if request.stream and is_json(attempt.content_type) else None
            if not request.stream:
                attempt.streamed = False
                _take_reply(attempt, response, max_chars)
            elif raw is not None:  # one JSON body instead of a stream: read it (a stream would be empty)
                attempt.streamed = False
                body = read_body(raw, cap, arrived)
                _take_reply(attempt, completion_from_body(body, attempt.content_type or "", litellm), max_chars)
            else:
                _read_stream(attempt, response, arrived, max_chars)
        except BaseException as exc:
            # the openai SDK reports a capped read as a connection error: the capped client kept the real reason
            attempt.exception = getattr(http, "error", None) or exc
        finally:
            if isinstance(http, CappedClient):
                attempt.content_type = attempt.content_type or http.content_type
                attempt.http_status = http.status_code
            stream = getattr(response, "completion_stream", None)
            if stream is not None and hasattr(stream, "close"):
                try:
                    stream.close()  # release the connection of a stream we stopped reading
                except Exception:
                    pass
            if http is not None:
                http.close()
            finished.set()

    worker = threading.Thread(target=work, name="grebench-llm-call", daemon=True)
    worker.start()
    try:
        if idle_timeout_s is None:
            if not stop.wait(finished, timeout_s):
                abandoned.set()  # the worker may still write to `attempt`: hand back a fresh record
                return Attempt(timed_out=True, idle_s=time.monotonic() - last_data[0], limit_s=timeout_s)
            return attempt
        while True:  # wait as long as data keeps arriving: each arrival moves the idle deadline
            idle = time.monotonic() - last_data[0]
            if idle >= idle_timeout_s:
                abandoned.set()
                return Attempt(timed_out=True, idle_s=idle, limit_s=idle_timeout_s, idle_limit=True)
            if stop.wait(finished, idle_timeout_s - idle):
                return attempt
    except stop.Interrupted:
        abandoned.set()  # a stop: the daemon worker and its HTTP request are abandoned, never waited for
        raise


def _read_stream(attempt: Attempt, response: Any, arrived: Callable[[], bool], max_chars: int) -> None:
    """Iterate a litellm stream into ``attempt``, stopping at the size cap or when the caller gave up."""
    parts: list[str] = []
    size = 0
    for chunk in response:
        if arrived():
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


def _take_reply(attempt: Attempt, reply: Any, max_chars: int) -> None:
    """Text (capped at ``max_chars``), log-probs and the whole reply (for usage and cost) of a non-streamed call."""
    choices = getattr(reply, "choices", None) or []
    choice = choices[0] if choices else None
    content = getattr(getattr(choice, "message", None), "content", None) or ""
    text = content if isinstance(content, str) else str(content)
    attempt.text = text[:max_chars]
    attempt.truncated = len(text) > max_chars
    attempt.logprobs = _logprob_entries(choice) if choice is not None else []
    attempt.reply = reply

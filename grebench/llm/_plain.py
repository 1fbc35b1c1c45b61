"""Replies that arrive without streaming: one JSON ``chat.completion`` body, read under a size cap and a stop flag.

They come two ways:

* a streamed call whose endpoint ignores ``"stream": true`` and answers plain JSON (several OpenAI-compatible
  servers do by default, and so do some proxies).  litellm's stream parser finds no server-sent events in such a
  body and yields nothing, which used to end as "empty response".  For OpenAI-compatible providers litellm hands
  back the HTTP response unread, so :func:`raw_http_response` finds it and :func:`read_body` reads the JSON from
  it; where it cannot be found, the empty stream is reported as :data:`NOT_STREAMED`;
* a candidate configured with ``stream = false``: the call is made without streaming through an ``openai.OpenAI``
  client built on a :class:`CappedClient`, which reads every body with :func:`read_body`.

Either way the body is read in chunks: more than :func:`body_cap` bytes (decoded) or the caller's deadline stops
the read, so an endless or huge body costs at most the cap in memory and the deadline in time.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx

#: What a streamed call reports when the reply is clearly not a stream and cannot be used as one.
NOT_STREAMED = "the endpoint answered without streaming; set stream = false for this candidate"
_BODY_OVERHEAD = 1 << 20  # JSON envelope, usage and per-token log-probs around the text
_BYTES_PER_CHAR = 16  # a \uXXXX escape is 6 bytes; log-probs add more per character of text


class PlainReplyError(Exception):
    """A non-streamed reply that cannot be used; the message is what the user reads."""


class BodyTooLarge(PlainReplyError):
    """The body passed :func:`body_cap` and was cut off."""


class ReadStopped(Exception):
    """The caller gave up on this call (its deadline passed) while the body was still arriving."""


def body_cap(max_chars: int) -> int:
    """Largest non-streamed body read for a reply capped at ``max_chars`` characters (bytes, after decoding)."""
    return _BYTES_PER_CHAR * max(0, max_chars) + _BODY_OVERHEAD


def read_body(response: httpx.Response, cap: int, stop: Callable[[], bool]) -> bytes:
    """Read a not yet read response body, at most ``cap`` bytes; raise :class:`BodyTooLarge` beyond it.

    ``stop`` is asked after every chunk: a body that drips past the caller's deadline ends the read then
    (:class:`ReadStopped`).  The response is closed either way.
    """
    try:
        declared = response.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > cap:
            raise BodyTooLarge(_too_large(cap, f"it declares {int(declared):,} bytes"))
        parts: list[bytes] = []
        size = 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > cap:
                raise BodyTooLarge(_too_large(cap, "more kept arriving"))
            if stop():
                raise ReadStopped("the call was abandoned at its deadline")
            parts.append(chunk)
        return b"".join(parts)
    finally:
        response.close()


def _too_large(cap: int, why: str) -> str:
    return (f"the endpoint's non-streamed reply is larger than {cap:,} bytes ({why}): cut off "
            f"(the cap is 16 bytes per character of llm_max_response_chars + 1 MiB)")


def is_json(content_type: str | None) -> bool:
    """Whether a Content-Type is JSON (one document: not NDJSON, which some providers stream)."""
    mime = (content_type or "").split(";")[0].strip().lower()
    return mime in ("application/json", "text/json") or mime.endswith("+json")


def raw_http_response(streamed: Any) -> httpx.Response | None:
    """The unread HTTP response under a litellm stream wrapper (OpenAI-compatible providers), or None.

    litellm wraps the ``openai.Stream``, which keeps the ``httpx.Response`` and reads it only when iterated.
    """
    stream = getattr(streamed, "completion_stream", None)
    response = getattr(stream, "response", None)
    if not isinstance(response, httpx.Response) or response.is_stream_consumed:
        return None
    return response


def completion_from_body(body: bytes, content_type: str, litellm: Any) -> Any:
    """The litellm ``ModelResponse`` of a JSON ``chat.completion`` body; :class:`PlainReplyError` if it is none.

    A body that is not JSON at all raises ``json.JSONDecodeError`` (reported as invalid JSON, like a bad stream).
    """
    text = body.decode("utf-8", errors="replace")
    data = _from_events(text) if text.lstrip().startswith(("data:", ":", "event:")) else json.loads(text)
    choices = data.get("choices") if isinstance(data, dict) else None
    message = choices[0].get("message") if isinstance(choices, list) and choices and \
        isinstance(choices[0], dict) else None
    if not isinstance(message, dict) or not isinstance(message.get("content", ""), (str, type(None))):
        snippet = json.dumps(data, ensure_ascii=False)[:200]
        raise PlainReplyError(f"the endpoint answered without streaming (Content-Type {content_type or 'not set'}) "
                              f"and its reply is not a chat completion: {snippet}")
    return litellm.ModelResponse(**data)


def _from_events(text: str) -> dict[str, Any]:
    """A chat completion assembled from server-sent events that came labelled as JSON (a mislabelled stream)."""
    content: list[str] = []
    logprobs: list[Any] = []
    last: dict[str, Any] = {}
    usage = None
    for line in text.splitlines():
        if not line.startswith("data:") or line[5:].strip() == "[DONE]":
            continue
        last = json.loads(line[5:])
        usage = last.get("usage") or usage
        for choice in last.get("choices") or []:
            content.append((choice.get("delta") or {}).get("content") or "")
            logprobs.extend(((choice.get("logprobs") or {}).get("content")) or [])
    choice = {"index": 0, "message": {"role": "assistant", "content": "".join(content)}, "finish_reason": "stop",
              **({"logprobs": {"content": logprobs}} if logprobs else {})}
    return {"id": last.get("id", "chatcmpl"), "object": "chat.completion", "created": last.get("created", 0),
            "model": last.get("model", ""), "choices": [choice], **({"usage": usage} if usage else {})}


class CappedClient(httpx.Client):
    """An ``httpx.Client`` that reads every non-streamed body through :func:`read_body`.

    ``content_type`` and ``status_code`` keep the last reply's (an HTML page is reported as such), ``error`` the
    :class:`PlainReplyError` that ended a read: the openai SDK wraps exceptions from ``send`` into a generic
    connection error, so the caller looks here for the real reason.
    """

    def __init__(self, cap: int, stop: Callable[[], bool], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cap, self.stop = cap, stop
        self.content_type: str | None = None
        self.status_code: int | None = None
        self.error: PlainReplyError | None = None

    def send(self, request: httpx.Request, *, stream: bool = False, **kwargs: Any) -> httpx.Response:
        """Send; when the caller wants the body read, read it here, capped and stoppable."""
        response = super().send(request, stream=True, **kwargs)
        self.content_type, self.status_code = response.headers.get("content-type"), response.status_code
        if stream:
            return response
        try:
            body = read_body(response, self.cap, self.stop)
        except PlainReplyError as exc:
            self.error = exc
            raise
        # httpx's own read() fills this attribute; the body is in memory now, so the response is complete
        response._content = body
        return response

"""One decision call: POST ``/v1/systemone`` to a local server, under the client's deadline, retried on 5xx/timeouts.

Why a worker thread, as for chat calls (:mod:`grebench.llm._call`): httpx's timeout bounds each read, not the
whole reply, so the POST runs in a daemon thread that reads the body in chunks (capped at :data:`MAX_REPLY_BYTES`)
and the caller waits on it for ``llm_timeout_s`` at most; at the deadline the caller abandons it (a flag the worker
checks after every chunk).  The proxy settings of the environment are ignored (``trust_env=False``): the server is
on loopback, and a proxy in between would see every state.  The body is read by the chat calls' capped reader
(:func:`grebench.llm._plain.read_body`).

HTTP 429, 5xx, timeouts and connection errors are retried with exponential back-off and jitter, like chat calls;
another status, and a reply that does not answer the question (:class:`MalformedDecision`), fail at once: the same
request gets the same answer.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from grebench import stop
from grebench.llm._decision import DecisionRequest, DecisionResult, MalformedDecision, choose, parse_reply
from grebench.llm._plain import BodyTooLarge, ReadStopped, read_body
from grebench.store import utcnow

log = logging.getLogger(__name__)
MAX_REPLY_BYTES = 1 << 20
PATH = "/v1/systemone"


@dataclass
class _Reply:
    status: int | None = None
    body: bytes = b""
    error: str | None = None
    retry: bool = False


def _post(url: str, payload: dict, timeout_s: float) -> _Reply:
    """POST ``payload``; never blocks longer than ``timeout_s`` (+ a few ms)."""
    import httpx

    reply = _Reply()
    abandoned = threading.Event()
    finished = threading.Event()

    def work() -> None:
        try:
            with httpx.Client(timeout=timeout_s, trust_env=False, follow_redirects=False) as http, \
                    http.stream("POST", url, json=payload) as response:
                reply.status, reply.body = response.status_code, read_body(response, MAX_REPLY_BYTES,
                                                                           abandoned.is_set)
        except BodyTooLarge:
            reply.error = f"the decision reply is larger than {MAX_REPLY_BYTES} bytes: cut off"
        except ReadStopped:
            return  # abandoned at the deadline: the caller has reported the timeout
        except (httpx.TimeoutException, httpx.TransportError) as exc:
            reply.error, reply.retry = f"{type(exc).__name__}: {exc}", True
        except Exception as exc:
            reply.error = f"{type(exc).__name__}: {exc}"
        finally:
            finished.set()

    threading.Thread(target=work, name="grebench-decision", daemon=True).start()
    try:
        done = stop.wait(finished, timeout_s)
    except stop.Interrupted:
        abandoned.set()  # the daemon worker is left behind: it ends with its request or with the process
        raise
    if not done:
        abandoned.set()
        return _Reply(error=f"timed out after {timeout_s:g} s", retry=True)
    return reply


def _detail(body: bytes) -> str:
    text = body.decode("utf-8", "replace").strip().replace("\n", " ")
    return text[:500] or "(empty body)"


def call_decision(request: DecisionRequest, root: str, timeout_s: float, max_retries: int,
                  sleep: Callable[[float], None], rng: random.Random, backoff_base_s: float,
                  backoff_max_s: float) -> DecisionResult:
    """The uncached decision with retries (no store access: safe in worker threads)."""
    started = time.monotonic()
    attempts = 0
    error = "no attempt made"
    while attempts <= max_retries:
        stop.check()  # a request boundary: a stop requested before (or during a back-off) sends nothing more
        attempts += 1
        reply = _post(root + PATH, request.body(), timeout_s)
        retry = reply.retry
        if reply.error is not None:
            error = reply.error
        elif reply.status is not None and reply.status != 200:
            error = f"HTTP {reply.status}: {_detail(reply.body)}"
            retry = reply.status == 429 or reply.status >= 500
        else:
            try:
                probabilities, tokens_in = parse_reply(request, reply.body)
            except MalformedDecision as exc:
                error = str(exc)
            else:
                choice, probability = choose(request.labels, probabilities)
                return DecisionResult(status="ok", probabilities=probabilities, choice=choice,
                                      probability=probability, tokens_in=tokens_in,
                                      latency_s=round(time.monotonic() - started, 3), error=None,
                                      attempts=attempts, cached=False, generated_at=utcnow(),
                                      request_key=request.cache_key())
        if not retry:
            break
        if attempts > max_retries:
            error = f"{error} (after {attempts} attempts)"
            break
        wait = min(backoff_max_s, backoff_base_s * 2 ** (attempts - 1)) * (0.5 + rng.random())
        log.info("decision call to %s failed (%s); retry %d in %.1f s", root, error, attempts, wait)
        sleep(wait)
    return DecisionResult(status="failed", probabilities=None, choice=None, probability=None, tokens_in=None,
                          latency_s=round(time.monotonic() - started, 3), error=error, attempts=attempts,
                          cached=False, generated_at=utcnow(), request_key=request.cache_key())

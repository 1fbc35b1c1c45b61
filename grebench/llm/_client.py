"""The one way the product calls an LLM: cached, retried, deadline-bound, concurrency-bounded."""

from __future__ import annotations

import logging
import os
import random
import time
from dataclasses import replace
from typing import Any, Callable, Sequence

from grebench import stop
from grebench._offline import apply_offline_defaults
from grebench.endpoints import describe_network_error, network_cause
from grebench.llm import _cache
from grebench.llm._call import Attempt, call_attempt
from grebench.llm._decide import call_decision
from grebench.llm._decision import DecisionRequest, DecisionResult
from grebench.llm._local import check_local, is_local, local_concurrency
from grebench.llm._plain import NOT_STREAMED, PlainReplyError, is_json
from grebench.llm._tokens import count_tokens
from grebench.llm._types import SUBMISSION_KEY_PREFIX, ChatRequest, ChatResult
from grebench.settings import Settings
from grebench.store import Store, utcnow

log = logging.getLogger(__name__)
BACKOFF_BASE_S = 1.0
BACKOFF_MAX_S = 30.0


def _sleep(seconds: float) -> None:
    """Back-off sleep (ends at once on a stop); tests replace this module attribute to make retries instant."""
    stop.sleep(seconds)


_HTML = "the endpoint returned HTML instead of JSON (wrong api_base, or a proxy error page)"


#: Network causes that mean the endpoint was never reached (:func:`grebench.endpoints.network_cause`): nothing
#: listens, the name does not resolve, the TLS handshake fails.  A timeout or a closed connection reached something.
UNREACHABLE = frozenset({"dns", "refused", "tls"})


class _GiveUp(Exception):
    """A failure that retrying cannot fix."""


class _Retry(Exception):
    """A failure worth retrying, with the wait the server asked for (if any)."""

    def __init__(self, message: str, wait_s: float | None = None, unreachable: bool = False) -> None:
        super().__init__(message)
        self.wait_s = wait_s
        self.unreachable = unreachable  # the endpoint was never reached (DNS, refused, TLS): no answer at all


def _import_litellm() -> Any:
    apply_offline_defaults()
    import litellm

    litellm.telemetry = False
    litellm.suppress_debug_info = True
    litellm.set_verbose = False
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm"):
        logging.getLogger(name).setLevel(logging.WARNING)
    return litellm


def _retry_after(exc: BaseException) -> float | None:
    response_headers = getattr(getattr(exc, "response", None), "headers", None)
    for source in (getattr(exc, "litellm_response_headers", None), response_headers):
        if source is None:
            continue
        try:
            value = source.get("retry-after") or source.get("Retry-After")
        except Exception:
            value = None
        if value is not None:
            try:
                return float(value)
            except ValueError:
                return None
    return None


def _classify(attempt: Attempt, timeout_s: float, max_retry_after_s: float, litellm: Any) -> None:
    """Raise _Retry or _GiveUp for a failed attempt; return for a usable one."""
    if attempt.timed_out and attempt.idle_limit:
        raise _Retry(f"no data for {attempt.idle_s:.1f} s (llm_idle_timeout_s = {attempt.limit_s:g} s): the local "
                     "server stopped sending")
    if attempt.timed_out:
        raise _Retry(f"timed out after {timeout_s:g} s (no data for {attempt.idle_s:.1f} s)")
    exc = attempt.exception
    content_type = (attempt.content_type or "").split(";")[0].strip().lower()
    if isinstance(exc, PlainReplyError):  # a non-streamed reply that cannot be used: retrying gives the same
        raise _GiveUp(str(exc))
    if content_type == "text/html" and attempt.http_status is not None and attempt.http_status < 400:
        raise _GiveUp(_HTML)  # litellm calls a 200 page that is no completion a 500: the real status says otherwise
    if exc is not None:
        message = str(exc).splitlines()[0][:500] if str(exc) else type(exc).__name__
        status = getattr(exc, "status_code", None)
        if "Expecting" in str(exc) and ("line 1 column" in str(exc) or "JSONDecodeError" in str(exc)):
            raise _GiveUp(f"invalid JSON from the endpoint: {message}")
        if isinstance(exc, litellm.RateLimitError) or status == 429:
            wait = _retry_after(exc)
            if wait is not None and wait > max_retry_after_s:
                raise _GiveUp(f"HTTP 429 with Retry-After {wait:g} s (more than llm_max_retry_after_s="
                              f"{max_retry_after_s:g} s): gave up without waiting")
            raise _Retry(f"HTTP 429: {message}", wait)
        if isinstance(exc, (litellm.Timeout, litellm.APIConnectionError)) or (status is not None and status >= 500):
            # litellm reports a failed connection as "HTTP 500 … Connection error.": name DNS, refused, closed, TLS
            network = status is None or isinstance(exc, litellm.APIConnectionError) or "Connection error" in message
            cause = describe_network_error(exc) if network else None
            kind = network_cause(exc) if network else None
            if cause:  # the cause, not litellm's "HTTP 500": no server answered at all
                raise _Retry(cause, unreachable=kind in UNREACHABLE)
            raise _Retry(f"HTTP {status}: {message}" if status else message)
        raise _GiveUp(f"HTTP {status}: {message}" if status else f"{type(exc).__name__}: {message}")
    if content_type == "text/html" or attempt.text.lstrip().lower().startswith(("<!doctype html", "<html")):
        raise _GiveUp(_HTML)
    if not attempt.text and attempt.streamed and is_json(content_type):
        raise _GiveUp(NOT_STREAMED)  # an empty "stream" that said it was one JSON document
    if not attempt.text.strip():
        raise _GiveUp("empty response" if not attempt.text else "whitespace-only response")


_UNSTREAMED_SEEN: set[tuple[str, str | None]] = set()


def _note_unstreamed(request: ChatRequest) -> None:
    """Say once per endpoint that it answered a streamed request with plain JSON (handled; nothing to fix)."""
    key = (request.model, request.api_base)
    if key not in _UNSTREAMED_SEEN:
        _UNSTREAMED_SEEN.add(key)
        log.info("%s at %s answered without streaming: its JSON reply is used (stream = false for the candidate "
                 "asks for that directly)", request.model, request.api_base or "the provider")


class LLMClient:
    """Chat completions through litellm, and typed decisions from local servers, cached in ``llm_calls``.

    ``complete`` serves an ``ok`` result from the cache without any call.
    Otherwise it streams the reply, or reads one JSON reply when the request
    says ``stream=False`` or the endpoint does not stream (see
    :mod:`grebench.llm._call` for how the deadline holds), retries 429/5xx/timeouts with exponential back-off and
    jitter (honouring Retry-After up to ``llm_max_retry_after_s``; a longer one
    gives up at once), caps the reply at ``llm_max_response_chars`` and records
    the outcome.  The API key is read from ``os.environ[request.api_key_env]``
    at call time and scrubbed from every error text.
    """

    def __init__(self, settings: Settings, store: Store | None = None,
                 sleep: Callable[[float], None] | None = None) -> None:
        self.settings = settings
        self.store = store
        self._sleep = sleep
        self._rng = random.Random()
        # endpoints (model, api_base) a call found unreachable after all its retries: the other calls to it (in
        # flight or queued) give up at their next attempt instead of each retrying a dead server in turn
        self._unreachable: dict[tuple[str, str | None], str] = {}

    # -- single call -------------------------------------------------------
    def complete(self, request: ChatRequest) -> ChatResult:
        """Cached result, or a fresh call (recorded in the store when there is one)."""
        if self.store is not None:
            hit = _cache.lookup(self.store, request)
            if hit is not None:
                return hit
        result = self._call(request)
        if self.store is not None:
            _cache.save(self.store, request, result)
        return result

    def _call(self, request: ChatRequest) -> ChatResult:
        """The uncached call with retries (no store access: safe in worker threads)."""
        s = self.settings
        started = time.monotonic()
        api_key: str | None = None
        if request.isolated:
            refused = _isolation_refusal(request)
            if refused:
                return self._result(request, None, refused, 0, started)
        if request.api_key_env:
            api_key = os.environ.get(request.api_key_env)
            if not api_key:
                return self._result(request, None, f"environment variable {request.api_key_env} is not set "
                                    "(it should hold the API key)", 0, started)
        elif request.api_base:
            api_key = "no-key"  # OpenAI-compatible servers without auth still need some key in the client
        litellm = _import_litellm()
        attempts = 0
        error = "no attempt made"
        unreachable = False
        endpoint = (request.model, request.api_base)
        while attempts <= s.limits.llm_max_retries:
            stop.check()  # a request boundary: after a stop no new attempt is sent
            if endpoint in self._unreachable:
                error = f"{self._unreachable[endpoint]} (not asked: an earlier call gave up on this endpoint)"
                unreachable = True
                break
            attempts += 1
            # a model server grebench started here: the idle limit decides (a slow CPU still sending is not cut
            # off); every other endpoint has a total budget per attempt
            attempt = call_attempt(request, api_key, s.limits.llm_timeout_s, s.limits.llm_max_response_chars,
                                   idle_timeout_s=s.limits.llm_idle_timeout_s if is_local(request.api_base) else None)
            try:
                _classify(attempt, s.limits.llm_timeout_s, s.limits.llm_max_retry_after_s, litellm)
            except _GiveUp as exc:
                error, unreachable = str(exc), False
                break
            except _Retry as exc:
                error, unreachable = str(exc), exc.unreachable
                if attempts > s.limits.llm_max_retries:
                    error = f"{error} (after {attempts} attempts)"
                    if unreachable:
                        self._unreachable.setdefault(endpoint, error)
                    break
                backoff = min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2 ** (attempts - 1)) * (0.5 + self._rng.random())
                wait = max(backoff, exc.wait_s or 0.0)
                log.info("LLM call to %s failed (%s); retry %d in %.1f s", request.model,
                         self._scrub(error, api_key), attempts, wait)
                (self._sleep or _sleep)(wait)
                continue
            if request.stream and not attempt.streamed:
                _note_unstreamed(request)
            return self._success(request, attempt, attempts, started, litellm)
        return self._result(request, self._scrub(error, api_key), None, attempts, started, unreachable)

    @staticmethod
    def _scrub(text: str, api_key: str | None) -> str:
        if api_key and api_key != "no-key" and len(api_key) >= 4:
            text = text.replace(api_key, "***")
        return text

    def _result(self, request: ChatRequest, error: str | None, text: str | None, attempts: int,
                started: float, unreachable: bool = False) -> ChatResult:
        return ChatResult(status="failed", text=None, error=error if error is not None else text, tokens_in=None,
                          tokens_out=None, cost_usd=None, latency_s=round(time.monotonic() - started, 3),
                          attempts=attempts, truncated=False, cached=False, logprobs=None, generated_at=utcnow(),
                          request_key=request.cache_key(), unreachable=unreachable)

    def _success(self, request: ChatRequest, attempt: Attempt, attempts: int, started: float,
                 litellm: Any) -> ChatResult:
        messages = [{"role": r, "content": c} for r, c in request.messages]
        tokens_in = tokens_out = None
        cost = None
        try:
            built = attempt.reply if attempt.reply is not None else \
                litellm.stream_chunk_builder(attempt.chunks, messages=messages)
            usage = getattr(built, "usage", None)
            if usage is not None:
                tokens_in, tokens_out = usage.prompt_tokens, usage.completion_tokens
            try:
                cost = float(litellm.completion_cost(completion_response=built, model=request.model))
            except Exception:
                cost = None
        except Exception as exc:
            log.debug("could not rebuild the streamed response: %s", exc)
        if tokens_in is None:
            tokens_in = sum(count_tokens(c) for _, c in request.messages)
        if tokens_out is None or attempt.truncated:
            tokens_out = count_tokens(attempt.text)
        return ChatResult(status="ok", text=attempt.text, error=None, tokens_in=tokens_in, tokens_out=tokens_out,
                          cost_usd=cost, latency_s=round(time.monotonic() - started, 3), attempts=attempts,
                          truncated=attempt.truncated, cached=False, logprobs=attempt.logprobs or None,
                          generated_at=utcnow(), request_key=request.cache_key())

    # -- many calls --------------------------------------------------------
    def complete_many(self, requests: Sequence[ChatRequest],
                      on_done: Callable[[ChatResult], None] | None = None) -> list[ChatResult]:
        """Run many requests, at most ``bench_concurrency`` at a time per provider; results in request order.

        Store reads and writes and ``on_done`` happen in the calling thread (a
        DuckDB connection is not shared across threads); only the HTTP calls
        run in worker threads.  ``on_done`` sees each result as it completes.
        """
        results: list[ChatResult | None] = [None] * len(requests)
        pending: list[int] = []
        for i, request in enumerate(requests):
            hit = _cache.lookup(self.store, request) if self.store is not None else None
            if hit is None:
                pending.append(i)
            else:
                results[i] = hit
                if on_done is not None:
                    on_done(hit)
        def done(i: int, result: ChatResult) -> None:
            if self.store is not None:
                _cache.save(self.store, requests[i], result)
            results[i] = result
            if on_done is not None:
                on_done(result)

        self._fan_out(pending, lambda i: requests[i].provider, lambda i: self._call(requests[i]), done)
        return [r for r in results if r is not None]

    def _fan_out(self, keys: Sequence[Any], gate: Callable[[Any], str], call: Callable[[Any], Any],
                 done: Callable[[Any, Any], None]) -> None:
        """``call(key)`` for every key through the streaming dispatcher (:class:`grebench.dispatch.Dispatcher`, the
        one the server estimators use), pinned to its gate ``gate(key)`` (a provider, a server; a local server
        grebench started: the concurrency measured for it), at most ``bench_concurrency`` at a time per gate;
        ``done(key, result)`` runs in the calling thread as each one completes.  A call that raises ends the
        fan-out with its own exception (the client's calls turn failures into error results themselves)."""
        if not keys:
            return
        from grebench.dispatch import Dispatcher, DispatchError

        limit = max(1, self.settings.bench.bench_concurrency)
        # a model server grebench started on this machine takes what the machine can (measured when it started)
        gates = [gate(k) for k in keys]
        limits = {g: local_concurrency(g) or limit for g in dict.fromkeys(gates)}

        def run(_gate: str, key: Any) -> Any:
            stop.check()  # queued behind the gate while a stop came: send nothing
            return call(key)

        dispatcher: Dispatcher[Any, Any] = Dispatcher(list(limits), run, per_server=limits, routing="pinned",
                                                      retryable=lambda _exc: False)
        try:
            dispatcher.run(list(keys), groups=gates, on_result=lambda i, result: done(keys[i], result))
        except DispatchError as exc:
            # a stop (or a failure): queued calls never start; running ones end at their next boundary, and their
            # HTTP requests live on daemon threads that do not keep the process alive
            raise (exc.__cause__ or exc) from None

    # -- typed decisions ---------------------------------------------------
    def decide_many(self, requests: Sequence[DecisionRequest],
                    on_done: Callable[[DecisionResult], None] | None = None,
                    server: Callable[[], str] | None = None) -> list[DecisionResult]:
        """Answer typed decisions (``/v1/systemone``) of local servers; results in request order.

        Cached ok decisions make no call.  ``server``, when given, is called only if some decision is not cached:
        it starts (or finds) the server and returns its ``api_base``, which the uncached requests go to (their
        keys name the endpoint by ``endpoint_id``, not by address).  Every uncached one must go to a loopback server
        grebench started
        (:func:`grebench.llm.local_endpoints`): otherwise :class:`grebench.llm.LocalEndpointError` is raised
        before any call.  At most the server's measured concurrency (:func:`grebench.runtime.server_concurrency`;
        else ``bench_concurrency``) calls run at once per server, each under ``llm_timeout_s``,
        retried on 5xx/timeouts up to ``llm_max_retries`` times (see :mod:`grebench.llm._decide`).  The same
        request twice is called once.  Store access and ``on_done`` stay in the calling thread.
        """
        results: list[DecisionResult | None] = [None] * len(requests)
        pending: dict[str, list[int]] = {}
        for i, request in enumerate(requests):
            hit = _cache.lookup_decision(self.store, request) if self.store is not None else None
            if hit is None:
                pending.setdefault(request.cache_key(), []).append(i)
            else:
                results[i] = hit
                if on_done is not None:
                    on_done(hit)
        if pending and server is not None:
            base = server()
            requests = [replace(r, api_base=base) for r in requests]
        roots = {key: check_local(requests[idx[0]].api_base) for key, idx in pending.items()}
        s = self.settings

        def call(key: str) -> DecisionResult:
            return call_decision(requests[pending[key][0]], roots[key], s.limits.llm_timeout_s,
                                 s.limits.llm_max_retries, self._sleep or _sleep, self._rng, BACKOFF_BASE_S,
                                 BACKOFF_MAX_S)

        def done(key: str, result: DecisionResult) -> None:
            if self.store is not None:
                _cache.save_decision(self.store, requests[pending[key][0]], result)
            for i in pending[key]:
                results[i] = result
                if on_done is not None:
                    on_done(result)

        self._fan_out(list(pending), roots.__getitem__, call, done)
        return [r for r in results if r is not None]


def _isolation_refusal(request: ChatRequest) -> str | None:
    """Why an isolated (publicly submitted) request cannot be sent, or None: it may only use the submitter's own key
    (the evaluation's ``SUBMISSION_KEY_PREFIX`` variable) and, with no base URL of its own, must have one."""
    if request.api_key_env and not request.api_key_env.startswith(SUBMISSION_KEY_PREFIX):
        return "a submitted model may only use its submitter's key, never a variable of the operator's environment"
    if not request.api_base and not (request.api_key_env and os.environ.get(request.api_key_env)):
        return ("no API key was submitted for this hosted model: submit your own key (the operator's keys are never "
                "used for submitted models)")
    return None

"""HTTP policy for the OpenReview clients: bounded retries, a bounded total wait, clear error messages.

openreview-py mounts its own urllib3 ``Retry`` (8 retries of 429/5xx with up to
120 s back-off each, logged with ``print`` on stdout).  We replace that adapter
on every prefix of the client's session with :class:`BoundedRetry`, which

* retries 429/5xx, refused and dropped connections at most ``openreview_max_retries`` times,
* on 429 waits for ``Retry-After`` or, without that header, for the body's
  ``resetTime`` / ``details.resetTime`` (OpenReview's ``RateLimitError`` shape),
* counts every wait against one :class:`WaitBudget` per ingest and gives up at
  once, with :class:`RateLimitExhausted`, when a wait would exceed
  ``openreview_max_wait_s`` (so an absurd ``Retry-After`` fails fast instead of hanging),
* sleeps through an injectable function (by default :func:`grebench.stop.sleep`: a stop ends a back-off at once, the
  ingest is then recorded ``interrupted``), so tests need not wait.
"""

from __future__ import annotations

import json
import logging
import re
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Callable

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from grebench import stop

log = logging.getLogger(__name__)

RETRY_STATUSES = (429, 500, 502, 503, 504)


class RateLimitExhausted(Exception):
    """OpenReview asked us to wait longer than this ingest may wait in total."""


@dataclass
class WaitBudget:
    """Total waiting allowed to one ingest, shared by all its requests, plus what the last answer looked like."""

    max_wait_s: float
    sleep: Callable[[float], None] = stop.sleep
    waited_s: float = 0.0
    retries: int = 0
    last: dict[str, Any] = field(default_factory=dict)

    def wait(self, seconds: float, why: str) -> None:
        """Sleep ``seconds`` unless that would exceed the budget; then raise with a clear message."""
        seconds = max(0.0, seconds)
        if self.waited_s + seconds > self.max_wait_s:
            raise RateLimitExhausted(
                f"OpenReview rate limit: asked to wait {seconds:.0f} s more ({why}) after {self.waited_s:.0f} s "
                f"in total; the limit is {self.max_wait_s:.0f} s per ingest (openreview_max_wait_s), giving up; "
                "rerun later to resume"
            )
        self.retries += 1
        self.waited_s += seconds
        log.warning("OpenReview: %s; waiting %.1f s (%.1f s in total)", why, seconds, self.waited_s)
        if seconds > 0:
            self.sleep(seconds)

    def record(self, response: requests.Response, *_args: Any, **_kwargs: Any) -> None:
        """Session response hook: remember the last answer, to explain a later parse failure."""
        self.last = {
            "status": response.status_code,
            "content_type": response.headers.get("Content-Type", ""),
            "path": requests.utils.urlparse(response.url).path,
        }


def reset_seconds(body: bytes, now: float | None = None) -> float | None:
    """Seconds until the ``resetTime`` of an OpenReview ``RateLimitError`` body (ISO date or epoch), if any."""
    try:
        payload = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(payload, dict):
        return None
    raw_details = payload.get("details")
    details = raw_details if isinstance(raw_details, dict) else {}
    reset = payload.get("resetTime", details.get("resetTime"))
    now = time.time() if now is None else now
    if isinstance(reset, (int, float)) and not isinstance(reset, bool):
        return max(0.0, (reset / 1000 if reset > 1e11 else reset) - now)
    if isinstance(reset, str):
        try:
            parsed = datetime.fromisoformat(reset.replace("Z", "+00:00"))
        except ValueError:
            return None
        parsed = parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
        return max(0.0, parsed.timestamp() - now)
    return None


class BoundedRetry(Retry):
    """urllib3 retry policy whose waits are bounded in total by a shared :class:`WaitBudget`."""

    def __init__(self, *args: Any, budget: WaitBudget | None = None, reset_wait: float | None = None,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.budget = budget or WaitBudget(max_wait_s=0.0)
        self.reset_wait = reset_wait

    def new(self, **kw: Any) -> BoundedRetry:
        kw.setdefault("budget", self.budget)
        kw.setdefault("reset_wait", None)
        return super().new(**kw)

    def increment(self, method: str | None = None, url: str | None = None, response: Any = None,
                  error: Exception | None = None, _pool: Any = None, _stacktrace: Any = None) -> BoundedRetry:
        reset_wait = None
        if response is not None and response.status == 429 and not response.headers.get("Retry-After"):
            try:  # the body is read here, before urllib3 drains it
                reset_wait = reset_seconds(response.data or b"")
            except Exception:  # a body we cannot read just means no resetTime
                reset_wait = None
        new = super().increment(method, url, response, error, _pool, _stacktrace)
        new.reset_wait = reset_wait
        return new

    def sleep(self, response: Any = None) -> None:
        status = getattr(response, "status", None)
        header_wait = self.get_retry_after(response) if response is not None else None
        if header_wait is not None:
            self.budget.wait(header_wait, f"HTTP {status}, Retry-After {header_wait:.0f} s")
        elif self.reset_wait is not None:
            self.budget.wait(self.reset_wait, f"HTTP {status}, resetTime in {self.reset_wait:.0f} s")
        else:
            why = f"HTTP {status}" if status else "connection failed"
            self.budget.wait(max(self.get_backoff_time(), 0.5), f"{why}, backing off")


class TimeoutAdapter(HTTPAdapter):
    """HTTPAdapter with a default timeout (openreview-py passes none)."""

    def __init__(self, timeout_s: float, **kwargs: Any) -> None:
        self.timeout_s = timeout_s
        super().__init__(**kwargs)

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        if kwargs.get("timeout") is None:
            kwargs["timeout"] = self.timeout_s
        return super().send(request, **kwargs)


def mount_policy(session: requests.Session, budget: WaitBudget, max_retries: int, timeout_s: float) -> None:
    """Replace every adapter openreview-py mounted with ours, and record answers on ``budget``."""
    retry = BoundedRetry(
        total=max_retries, connect=max_retries, read=max_retries, status=max_retries, other=0,
        backoff_factor=0.5, backoff_max=30, backoff_jitter=0.0, status_forcelist=RETRY_STATUSES,
        allowed_methods=frozenset({"GET", "HEAD"}), raise_on_status=False, respect_retry_after_header=True,
        retry_after_max=10**9, budget=budget,
    )
    adapter = TimeoutAdapter(timeout_s, max_retries=retry)
    for prefix in list(session.adapters) or ["https://", "http://"]:
        session.mount(prefix, adapter)
    session.hooks.setdefault("response", []).append(budget.record)


def _plain(text: str, limit: int = 200) -> str:
    text = re.sub(r"<[^>]+>", " ", text)
    text = re.sub(r"\s+", " ", text).strip()
    return text[:limit] + ("..." if len(text) > limit else "")


def _at(exc: BaseException) -> str:
    """`` at HOST`` of the failed request (never its path or query: they may carry credentials), or nothing."""
    from urllib.parse import urlsplit

    request = getattr(exc, "request", None)
    url = getattr(request, "url", None)
    host = urlsplit(url).hostname if isinstance(url, str) else None
    return f" at {host}" if host else ""


def describe_error(exc: BaseException, budget: WaitBudget, what: str) -> str:
    """One clear line for a failed OpenReview request (never a traceback, never credentials)."""
    from openreview import OpenReviewException

    last = budget.last
    if isinstance(exc, RateLimitExhausted):
        return f"{what}: {exc}"
    if isinstance(exc, OpenReviewException):
        info = exc.args[0] if exc.args else {}
        if not isinstance(info, dict):
            return f"{what}: OpenReview error: {_plain(str(info))}"
        status = info.get("status") or last.get("status")
        if status == 429:
            return (f"{what}: OpenReview rate limit: still refused after {budget.retries} retries, waited "
                    f"{budget.waited_s:.0f} s in total, giving up; rerun later to resume")
        message = info.get("message")
        kind = last.get("content_type", "")
        if "html" in kind or (isinstance(message, str) and message.lstrip().startswith("<")):
            return f"{what}: OpenReview answered HTTP {status} with an HTML page ({_plain(str(message), 120)!r})"
        extra = f" after {budget.retries} retries" if isinstance(status, int) and status >= 500 else ""
        return f"{what}: OpenReview answered HTTP {status} {info.get('name', '')}{extra}: {_plain(str(message))}"
    if isinstance(exc, requests.Timeout):
        return f"{what}: OpenReview{_at(exc)} did not answer in time (openreview_timeout_s)"
    if isinstance(exc, requests.ConnectionError):  # DNS, refused, closed and TLS are told apart
        from grebench.endpoints import CAUSE_TEXT, network_cause

        cause = network_cause(exc)
        text = CAUSE_TEXT[cause] if cause is not None else f"connection failed ({_plain(str(exc), 120)})"
        retries = "" if cause in ("dns", "tls") else f" ({budget.retries} retries)"
        return f"{what}: cannot talk to OpenReview{_at(exc)}: {text}{retries}"
    if isinstance(exc, ValueError):  # includes requests' JSONDecodeError (also a RequestException)
        kind = last.get("content_type") or "unknown content type"
        return f"{what}: OpenReview answered HTTP {last.get('status')} with something that is not JSON ({kind})"
    if isinstance(exc, requests.RequestException):
        return f"{what}: request to OpenReview failed: {_plain(str(exc))}"
    return f"{what}: unexpected answer from OpenReview ({type(exc).__name__}: {_plain(str(exc))})"


# Everything a request through openreview-py can raise that is about the answer, not about our code.
def request_errors() -> tuple[type[BaseException], ...]:
    """Exception types that mean "this OpenReview request failed" (lazy: imports openreview)."""
    from openreview import OpenReviewException

    return (OpenReviewException, requests.RequestException, RateLimitExhausted, ValueError, KeyError,
            IndexError, TypeError, AttributeError)

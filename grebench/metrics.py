"""The service's metrics, in Prometheus text format through ``prometheus-client`` (served at ``/metrics`` by the app).

What the scheduler did is counted as it happens (:func:`job_finished`, :func:`store_checked`); what the app can
see is read when the metrics are scraped (the submission queue's length and the age of the last board version,
registered by the app: :func:`observe`).  One registry per process, made on first use (so ``import grebench``
imports nothing of prometheus-client); ``grebench serve`` runs the scheduler and the app in one process, so its
``/metrics`` has both.

=====================================  =========  ==============================================================
metric                                 type       what
=====================================  =========  ==============================================================
``grebench_jobs_total{job,outcome}``   counter    jobs run, by outcome (ok, failed, interrupted)
``grebench_job_failures_total{job}``   counter    jobs that failed
``grebench_job_duration_seconds{job}`` histogram  how long each job ran
``grebench_job_last_end_timestamp``    gauge      when each job last ended (Unix time)
``grebench_store_check_ok``            gauge      1 when the last store check passed, 0 when it found a problem
``grebench_submission_queue_length``   gauge      submissions and imports waiting or being evaluated
``grebench_board_age_seconds``         gauge      seconds since the last board version was published
=====================================  =========  ==============================================================
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_LOCK = threading.Lock()
#: Buckets of job durations (seconds): a queue pass takes a second, a scoring job hours.
DURATION_BUCKETS = (1, 5, 15, 60, 300, 900, 1800, 3600, 4 * 3600, 12 * 3600, float("inf"))


@dataclass(frozen=True)
class _Metrics:
    """The process's registry and its metrics (prometheus-client objects)."""

    registry: Any
    jobs: Any
    failures: Any
    duration: Any
    last_end: Any
    check: Any
    queue: Any
    board_age: Any


_MADE: list[_Metrics] = []


def _metrics() -> _Metrics:
    with _LOCK:
        if not _MADE:
            from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

            registry = CollectorRegistry()
            _MADE.append(_Metrics(
                registry=registry,
                jobs=Counter("grebench_jobs", "Scheduled jobs run, by outcome.", ["job", "outcome"],
                             registry=registry),
                failures=Counter("grebench_job_failures", "Scheduled jobs that failed.", ["job"], registry=registry),
                duration=Histogram("grebench_job_duration_seconds", "How long each scheduled job ran.", ["job"],
                                   buckets=DURATION_BUCKETS, registry=registry),
                last_end=Gauge("grebench_job_last_end_timestamp", "When each job last ended (Unix time).", ["job"],
                               registry=registry),
                check=Gauge("grebench_store_check_ok", "1 when the last store check passed, 0 when it found a "
                            "problem.", registry=registry),
                queue=Gauge("grebench_submission_queue_length", "Submissions and imports waiting or being "
                            "evaluated.", registry=registry),
                board_age=Gauge("grebench_board_age_seconds", "Seconds since the last board version was "
                                "published.", registry=registry)))
        return _MADE[0]


def job_finished(job: str, outcome: str, seconds: float, ended_at: float) -> None:
    """Count one job that ended (``outcome``: ok, failed, interrupted), its duration and end time."""
    m = _metrics()
    m.jobs.labels(job=job, outcome=outcome).inc()
    if outcome == "failed":
        m.failures.labels(job=job).inc()
    m.duration.labels(job=job).observe(seconds)
    m.last_end.labels(job=job).set(ended_at)


def store_checked(ok: bool) -> None:
    """The outcome of the latest store check."""
    _metrics().check.set(1 if ok else 0)


def observe(queue_length: Callable[[], float], board_age_s: Callable[[], float | None]) -> None:
    """Read the queue's length and the board's age at every scrape (a board never published: NaN)."""

    def age() -> float:
        value = board_age_s()
        return float("nan") if value is None else value

    m = _metrics()
    m.queue.set_function(queue_length)
    m.board_age.set_function(age)


def exposition() -> tuple[bytes, str]:
    """The metrics in Prometheus text format, and its content type."""
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    return generate_latest(_metrics().registry), CONTENT_TYPE_LATEST


def reset() -> None:
    """Forget every metric (tests)."""
    with _LOCK:
        _MADE.clear()

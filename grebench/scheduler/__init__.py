"""The scheduler: the service that runs the pipeline's jobs on a clock (see docs/operations.md).

Public API (importing it imports neither APScheduler nor any stage's heavy dependencies):

* :class:`SchedulerService` — the scheduled jobs of :data:`grebench.pipeline.JOBS` (``queue``, ``poll``,
  ``generate``, ``score``, ``site``, ``snapshot``) on their intervals, one at a time on one store, each run by
  :func:`grebench.pipeline.run_job`, with their state in the ``jobs`` table.
"""

from grebench.scheduler._replay import DAY_JOBS, ReplayedDay, history, replay, replay_days
from grebench.scheduler._service import (
    CHECK_JOB,
    JOB_KINDS,
    JobOutcome,
    JobState,
    JobStatus,
    SchedulerService,
    ServiceStatus,
    stored_status,
)

__all__ = ["CHECK_JOB", "DAY_JOBS", "JOB_KINDS", "JobOutcome", "JobState", "JobStatus", "ReplayedDay",
           "SchedulerService", "ServiceStatus", "history", "replay", "replay_days", "stored_status"]

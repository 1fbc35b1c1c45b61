"""The scheduler: the service that runs the pipeline's stages on a clock (see docs/operations.md).

Public API (importing it imports neither APScheduler nor any stage's heavy dependencies):

* :class:`SchedulerService` — jobs ``queue``, ``poll``, ``generate``, ``score``, ``site``, ``snapshot`` on their
  intervals, one at a time on one store, with their state in the ``jobs`` table.
* :data:`JOBS` — each job, a list of pipeline stages (:mod:`grebench.scheduler._jobs`).
* :func:`venue_sources` — the source specs the ``poll`` job ingests.
"""

from grebench.scheduler._jobs import JOBS, JobContext, venue_sources
from grebench.scheduler._service import JOB_KINDS, SchedulerService

__all__ = ["JOBS", "JOB_KINDS", "JobContext", "SchedulerService", "venue_sources"]

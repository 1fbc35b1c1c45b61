"""The scheduler stage: the service that runs the pipeline on a clock (see docs/operations.md).

Public API (importing it imports neither APScheduler nor any stage's heavy dependencies):

* :class:`SchedulerService` — jobs ``queue``, ``poll``, ``generate``, ``score``, ``site``, ``snapshot`` on their
  intervals, one at a time on one store, with their state in the ``jobs`` table.
* :func:`venue_sources` — the source specs the ``poll`` job ingests.
* :func:`generate_unreviewed`, :func:`reseal` — sealed generations for papers whose reviews are not public yet.
"""

from grebench.scheduler._generate import generate_unreviewed, reseal, unreviewed_paper_ids
from grebench.scheduler._jobs import JOBS, JobContext, venue_sources
from grebench.scheduler._service import JOB_KINDS, SchedulerService

__all__ = ["JOBS", "JOB_KINDS", "JobContext", "SchedulerService", "generate_unreviewed", "reseal",
           "unreviewed_paper_ids", "venue_sources"]

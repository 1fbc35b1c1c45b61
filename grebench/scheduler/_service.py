"""The scheduler service: APScheduler 3.x running the pipeline's jobs on a clock, one at a time, on one store.

A job is data (:data:`grebench.pipeline.JOBS`: its stages, the options it fixes, the setting of its interval) and is
run by :func:`grebench.pipeline.run_job` like every command; the service adds the clock and the ``jobs`` table.

DuckDB allows one writer, so every job runs in ONE worker thread (``ThreadPoolExecutor(1)``) on the one
:class:`~grebench.store.Store`.  APScheduler keeps its schedule in memory (``MemoryJobStore``: SQLAlchemy is not a
dependency); what must survive a restart lives in the store's ``jobs`` table instead: when each job last started and
finished, and whether the process died in it.  On start the service marks such jobs ``interrupted`` (like their
``runs`` rows) and schedules them at once; the others resume ``interval`` after their last finish.
Jobs use stable ids with ``replace_existing``, ``max_instances=1`` (never two of one kind), ``coalesce`` (a backlog
runs once) and ``misfire_grace_time`` = ``misfire_grace_s``: jobs queue behind each other in the single worker, so
the grace must exceed the longest job or a queued job would be dropped as missed.
"""

from __future__ import annotations

import json
import logging
import threading
import weakref
from contextlib import nullcontext
from datetime import UTC, datetime, timedelta
from typing import Any, NotRequired, Sequence, TypedDict

from grebench import stop
from grebench.endpoints import KeyVault
from grebench.pipeline import JOBS, SCHEDULED, JobObserver, SetupError, run_job
from grebench.progress import PlainProgress
from grebench.settings import Settings
from grebench.store import RunFailure, SimulatedClock, Store, WallClock, open_store, use_clock, utcnow
from grebench.submissions import SubmissionQueue, queue_path

log = logging.getLogger(__name__)
JOB_KINDS = SCHEDULED  # also the start order when several are due: queue, poll, generate, score, site, snapshot


class JobOutcome(TypedDict):
    """What one job did (:meth:`SchedulerService.run_job`): its recorded outcome, its run, its summary."""

    job: str
    run_id: str | None
    status: str                     # ok | failed | interrupted | not started
    run_status: str | None          # the run's status (None: no run was started)
    error: NotRequired[str | None]  # a job that did not start says none
    summary: dict[str, Any]         # the job's summary: its stages' JSON (:meth:`grebench.pipeline.JobResult.summary`)
    failures: list[RunFailure]


class JobState(TypedDict):
    """A job's row of the ``jobs`` table (:meth:`SchedulerService.states`)."""

    job_id: str
    status: str
    last_started_at: datetime | None
    last_finished_at: datetime | None
    runs: int
    last_error: str | None


def _failure_text(failures: Sequence[RunFailure], summary: dict[str, Any]) -> str | None:
    """What a failed job's record says: its first failure (``[stage] item: reason``, ``(+N more)``), else the
    error of its summary."""
    if failures:
        first = failures[0]
        item = f"{first['item']}: " if first.get("item") else ""
        more = f" (+{len(failures) - 1} more)" if len(failures) > 1 else ""
        return f"[{first['stage']}] {item}{first['reason']}{more}"
    error = summary.get("error")
    return str(error) if error else None


class SchedulerService:
    """The jobs, their state in the store, and the APScheduler that runs them (the store is opened here unless one
    is handed in; ``close_store``: :meth:`close` closes a handed-in store too)."""

    def __init__(self, settings: Settings, store: Store | None = None, *, vault: KeyVault | None = None,
                 queue: SubmissionQueue | None = None, kinds: Sequence[str] = JOB_KINDS, resolver: Any = None,
                 clock: WallClock | SimulatedClock | None = None, close_store: bool = False) -> None:
        unknown = [k for k in kinds if k not in JOB_KINDS]
        if unknown:
            raise ValueError(f"unknown job(s) {unknown}: choose from {', '.join(JOB_KINDS)}")
        self.settings = settings
        self._owns_store = store is None or close_store  # close_store: the caller hands the store over
        self.store = store or open_store(settings.db_path)
        self.vault = vault or KeyVault()
        self.queue = queue or SubmissionQueue(queue_path(settings))
        self.kinds = list(kinds)
        self.clock = clock  # None: the installed clock (the wall clock; a replay passes its simulated one)
        # what only the service has, for the stages that need it; resolver: name resolution of submitted hosts
        # (None = the system resolver; tests pass a table)
        self.services: dict[str, Any] = {"queue": self.queue, "vault": self.vault, "resolver": resolver}
        self.scheduler: Any = None
        self._lock = threading.Lock()  # one job at a time, even when called directly (run_job)
        self.recovered = self._recover()
        ref = weakref.WeakMethod(self._forced_exit)

        def forced_exit() -> None:
            method = ref()
            if method is not None:
                method()

        stop.at_forced_exit(forced_exit)

    def _forced_exit(self) -> None:
        """At a forced exit (a job reached no request boundary within ``stop_grace_s``; the watchdog thread): the
        running job is recorded ``interrupted`` through a cursor of its own, like its run (the store does that)."""
        if not self._lock.locked():
            return
        cur = self.store.con.cursor()
        try:
            cur.execute("UPDATE jobs SET status = 'interrupted', last_finished_at = ?, last_error = ? "
                        "WHERE status = 'running'",
                        [utcnow(), f"{stop.reason_text()}; no request boundary was reached within stop_grace_s"])
        finally:
            cur.close()

    # -- state -------------------------------------------------------------
    def _recover(self) -> list[str]:
        """Jobs the previous process died in: marked interrupted, like their runs rows (any writer marks those)."""
        with self.store.transaction() as con:
            for kind in JOB_KINDS:
                con.execute("INSERT INTO jobs (job_id, kind, status, runs) VALUES (?, ?, 'never', 0) "
                            "ON CONFLICT DO NOTHING", [kind, kind])
            died = [r[0] for r in con.execute("SELECT job_id FROM jobs WHERE status = 'running'").fetchall()]
            con.execute("UPDATE jobs SET status = 'interrupted', last_error = 'the process stopped during this job' "
                        "WHERE status = 'running'")
            # we hold the writer lock: any run still 'running' belongs to a process that is gone
            self.store.mark_stale_runs()
        if died:
            log.warning("resuming after a crash in job(s): %s", ", ".join(died))
        return died

    def states(self) -> list[JobState]:
        """The ``jobs`` table (read through a separate cursor: safe while a job runs in the worker)."""
        cur = self.store.con.cursor()
        try:
            res = cur.execute("SELECT job_id, status, last_started_at, last_finished_at, runs, last_error "
                              "FROM jobs ORDER BY job_id")
            return [{"job_id": job_id, "status": status, "last_started_at": started, "last_finished_at": finished,
                     "runs": runs, "last_error": error}
                    for job_id, status, started, finished, runs, error in res.fetchall()]
        finally:
            cur.close()

    def interval(self, kind: str) -> timedelta:
        """How often a job runs (from its ``*_interval_min`` setting)."""
        setting = str(JOBS[kind].interval)
        minutes = float(self.settings.value(setting))
        if minutes <= 0:
            raise ValueError(f"{setting} must be positive, got {minutes}")
        return timedelta(minutes=minutes)

    def next_runs(self, now: datetime | None = None) -> dict[str, datetime]:
        """When each job is next due (naive UTC): at once if it never finished or was interrupted."""
        now = now or utcnow()
        rows = {r["job_id"]: r for r in self.states()}
        out = {}
        for i, kind in enumerate(self.kinds):
            row = rows.get(kind)
            due = now + timedelta(milliseconds=10 * i)  # same-moment jobs start in JOB_KINDS order
            if row is not None and row["status"] in ("ok", "failed") and \
                    (finished := row["last_finished_at"]) is not None:
                due = max(due, finished + self.interval(kind))
            out[kind] = due
        return out

    # -- running -----------------------------------------------------------
    def run_job(self, kind: str) -> JobOutcome:
        """Run one job now (on the service's clock), recording its state; see :meth:`_run_job`."""
        if self.clock is None:
            return self._run_job(kind)
        with use_clock(self.clock):
            return self._run_job(kind)

    def _run_job(self, kind: str) -> JobOutcome:
        """Run one job now, recording its state; failures are recorded, never raised (the schedule goes on).

        The ``jobs`` row carries the job's true outcome: its run's status (``ok``, or ``failed`` when any item failed,
        with the first failure as ``last_error``), ``failed`` with the error when the job raised, ``interrupted``
        after a stop; one log line per job says the same.

        After a stop (:mod:`grebench.stop`) no job starts (``status: not started``); a job the stop reaches stops at
        its next request boundary and is recorded ``interrupted`` (run at once by the next start)."""
        if stop.stopping():
            log.info("job %s not started (%s)", kind, stop.reason_text())
            return {"job": kind, "run_id": None, "status": "not started", "run_status": None, "summary": {},
                    "failures": []}
        with self._lock:
            if stop.stopping():  # the stop came while this job waited for the one before it
                log.info("job %s not started (%s)", kind, stop.reason_text())
                return {"job": kind, "run_id": None, "status": "not started", "run_status": None, "summary": {},
                        "failures": []}
            store = self.store
            started: list[str] = []

            class MarkRunning(JobObserver):
                """The job is marked running once its run is recorded."""

                def started(self, _store: Store, run_id: str) -> None:
                    started.append(run_id)
                    store.con.execute("UPDATE jobs SET status = 'running', last_started_at = ?, last_run_id = ? "
                                      "WHERE job_id = ?", [utcnow(), run_id, kind])
                    store.checkpoint()

            error, run_status, summary, run_id, failures = None, "failed", {}, None, []
            try:
                done = run_job(self.settings, kind, open_store=lambda: nullcontext(store), command=f"scheduler:{kind}",
                               progress=PlainProgress(), services=self.services, observer=MarkRunning())
                summary, run_status, run_id, failures = done.summary(), done.status, done.run_id, done.failures
                status = run_status  # the job's outcome is its run's: a poll whose venue could not be read failed
                error = _failure_text(failures, summary) if status == "failed" else None
            except (stop.Interrupted, KeyboardInterrupt) as exc:  # run_job recorded the run as interrupted
                status = run_status = "interrupted"
                error = str(exc) or type(exc).__name__
                summary = {"interrupted": error}
                run_id = started[0] if started else None
            except Exception as exc:  # a job failure must not stop the scheduler (run_job recorded it on the run)
                if not isinstance(exc, SetupError):  # a setting to fix is said by the job's line; a bug needs its trace
                    log.exception("job %s failed", kind)
                status, error = "failed", f"{type(exc).__name__}: {exc}"
                summary = {"error": error}
                run_id = started[0] if started else None
                failures = store.run_failures(run_id) if run_id is not None else []
            store.con.execute(
                "UPDATE jobs SET status = ?, last_finished_at = ?, last_error = ?, runs = runs + 1, "
                "last_summary_json = ? WHERE job_id = ?",
                [status, utcnow(), error, json.dumps(summary, default=str)[:100_000], kind])
            store.checkpoint()
            # the operator's one line per job, with its real outcome (APScheduler's own lines are kept out of stderr)
            if status == "ok":
                log.info("job %s finished (ok)", kind)
            elif status == "failed":
                log.warning("job %s finished (failed: %s)", kind, error)
            else:
                log.warning("job %s interrupted (%s)", kind, error)
            return {"job": kind, "run_id": run_id, "status": status, "run_status": run_status, "error": error,
                    "summary": summary, "failures": failures}

    def run_all_once(self) -> list[JobOutcome]:
        """Every job once, in order (``grebench serve --once``: a cron-style cycle); after a stop none starts."""
        return [self.run_job(kind) for kind in self.kinds if not stop.stopping()]

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait until no job runs (at most ``timeout_s``); whether none does."""
        if self._lock.acquire(timeout=timeout_s):
            self._lock.release()
            return True
        return False

    def start(self) -> None:
        """Start APScheduler in a background thread with every job on its interval."""
        from apscheduler.executors.pool import ThreadPoolExecutor
        from apscheduler.jobstores.memory import MemoryJobStore
        from apscheduler.schedulers.background import BackgroundScheduler

        grace = int(self.settings.service.misfire_grace_s)
        self.scheduler = BackgroundScheduler(
            jobstores={"default": MemoryJobStore()}, executors={"default": ThreadPoolExecutor(1)},
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": grace}, timezone=UTC)
        for kind, due in self.next_runs().items():
            self.scheduler.add_job(self.run_job, "interval", args=[kind], id=kind, name=f"grebench {kind}",
                                   seconds=self.interval(kind).total_seconds(), replace_existing=True,
                                   next_run_time=due.replace(tzinfo=UTC))
        self.scheduler.start()
        log.info("scheduler started: %s", ", ".join(f"{k} every {self.interval(k)}" for k in self.kinds))

    def shutdown(self, wait: bool = True) -> None:
        """Stop scheduling (nothing new starts); with ``wait``, wait for the running job (after a stop it ends at its
        next request boundary)."""
        if self.scheduler is not None and self.scheduler.running:
            self.scheduler.shutdown(wait=wait)

    def close(self) -> None:
        """Stop, wait for the running job (after a stop it ends at its next request boundary), and close the store
        (if the service opened it)."""
        self.shutdown(wait=True)
        with self._lock:  # a job left running by shutdown(wait=False) must not lose its store under it
            pass
        if self._owns_store:
            self.store.close()

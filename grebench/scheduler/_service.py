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
import os
import threading
import time
import weakref
from contextlib import nullcontext
from datetime import UTC, datetime, timedelta
from typing import IO, Any, NotRequired, Sequence, TypedDict, cast

from grebench import metrics, stop
from grebench.endpoints import KeyVault
from grebench.pipeline import JOBS, SCHEDULED, JobObserver, SetupError, run_job
from grebench.progress import PlainProgress
from grebench.settings import ServiceSettings, Settings
from grebench.store import (
    CheckReport,
    RunFailure,
    SimulatedClock,
    Store,
    StoreDamaged,
    WallClock,
    backup_store,
    check_connection,
    note_damage,
    open_store,
    use_clock,
    utcnow,
)
from grebench.submissions import SubmissionQueue, queue_path

log = logging.getLogger(__name__)
#: The jobs' progress lines go through logging in the service: timestamped (and JSON, with log_format = json) like
#: every other line an operator reads
PROGRESS_LOG = logging.getLogger("grebench.progress")
#: The job id of the store's check (and backup) in the ``jobs`` table and APScheduler: not a pipeline job
CHECK_JOB = "check"
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


class LogLines:
    """A text stream whose every line is a log record (INFO) of ``logger``: a progress display writes to it."""

    def __init__(self, logger: logging.Logger) -> None:
        self.logger = logger

    def write(self, text: str) -> int:
        """Log each non-empty line."""
        for line in text.splitlines():
            if line.strip():
                self.logger.info("%s", line)
        return len(text)

    def flush(self) -> None:
        """Nothing is buffered."""

    def isatty(self) -> bool:
        """Never a terminal."""
        return False


class PublishedVersion(TypedDict):
    """The last board version: its id and when it was published (naive UTC)."""

    version: str
    published_at: datetime


class JobStatus(JobState):
    """A job's row with when it is next due (naive UTC; None: not scheduled in this service)."""

    next_due: datetime | None


class ServiceStatus(TypedDict):
    """What :meth:`SchedulerService.status` says (``board``: the last board version's id and time, or None)."""

    pid: int
    written_at: datetime
    jobs: list[JobStatus]
    board: PublishedVersion | None


def _iso(value: Any) -> str:
    """JSON for the status file: times as ISO-8601 UTC."""
    if isinstance(value, datetime):
        return value.isoformat() + ("Z" if value.tzinfo is None else "")
    return str(value)


def job_interval(service: ServiceSettings, kind: str) -> timedelta:
    """How often a job runs (from its ``*_interval_min`` setting; the check from ``check_interval_min``)."""
    setting = "check_interval_min" if kind == CHECK_JOB else str(JOBS[kind].interval)
    minutes = float(getattr(service, setting))
    if minutes <= 0:
        raise ValueError(f"{setting} must be positive, got {minutes}")
    return timedelta(minutes=minutes)


def due_times(service: ServiceSettings, rows: Sequence[JobState], kinds: Sequence[str],
              now: datetime | None = None) -> dict[str, datetime]:
    """When each of ``kinds`` is next due (naive UTC) by its row of the ``jobs`` table: at once if it never
    finished or was interrupted, else its interval after its last finish."""
    now = now or utcnow()
    by_id = {r["job_id"]: r for r in rows}
    out = {}
    for i, kind in enumerate(kinds):
        row = by_id.get(kind)
        due = now + timedelta(milliseconds=10 * i)  # same-moment jobs start in JOB_KINDS order
        if row is not None and row["status"] in ("ok", "failed") and \
                (finished := row["last_finished_at"]) is not None:
            due = max(due, finished + job_interval(service, kind))
        out[kind] = due
    return out


def stored_status(store: Store, service: ServiceSettings) -> ServiceStatus:
    """:meth:`SchedulerService.status` read from a store no service holds (read-only: nothing is written); next due
    times from the intervals, as a service started now would schedule them."""
    cur = store.con.cursor()
    try:
        res = cur.execute("SELECT job_id, status, last_started_at, last_finished_at, runs, last_error FROM jobs "
                          "ORDER BY job_id")
        rows: list[JobState] = [{"job_id": j, "status": st, "last_started_at": a, "last_finished_at": b, "runs": n,
                                 "last_error": e} for j, st, a, b, n, e in res.fetchall()]
    finally:
        cur.close()
    kinds = [*JOB_KINDS, CHECK_JOB]
    known = {r["job_id"] for r in rows}
    rows += [{"job_id": k, "status": "never", "last_started_at": None, "last_finished_at": None, "runs": 0,
              "last_error": None} for k in kinds if k not in known]
    due = due_times(service, rows, kinds)
    jobs: list[JobStatus] = [{**r, "next_due": due.get(r["job_id"])} for r in sorted(rows, key=lambda r: r["job_id"])]
    return {"pid": 0, "written_at": utcnow(), "jobs": jobs, "board": _last_version(store)}


def _last_version(store: Store) -> PublishedVersion | None:
    """The last board version's id and time (read through a cursor of its own)."""
    cur = store.con.cursor()
    try:
        found = cur.execute("SELECT version_id, published_at FROM board_versions "
                            "ORDER BY published_at DESC, version_id DESC LIMIT 1").fetchone()
    finally:
        cur.close()
    return None if found is None else {"version": str(found[0]), "published_at": found[1]}


class SchedulerService:
    """The jobs, their state in the store, and the APScheduler that runs them (the store is opened here unless one
    is handed in; ``close_store``: :meth:`close` closes a handed-in store too)."""

    def __init__(self, settings: Settings, store: Store | None = None, *, vault: KeyVault | None = None,
                 queue: SubmissionQueue | None = None, kinds: Sequence[str] = JOB_KINDS, resolver: Any = None,
                 clock: WallClock | SimulatedClock | None = None, close_store: bool = False,
                 checks: bool = False) -> None:
        unknown = [k for k in kinds if k not in JOB_KINDS]
        if unknown:
            raise ValueError(f"unknown job(s) {unknown}: choose from {', '.join(JOB_KINDS)}")
        self.settings = settings
        self._owns_store = store is None or close_store  # close_store: the caller hands the store over
        self.store = store or open_store(settings.db_path)
        self.vault = vault or KeyVault()
        self.queue = queue or SubmissionQueue(queue_path(settings))
        self.kinds = list(kinds)
        self.checks = checks  # the store's check and backup (:meth:`check_store`) at start and on its interval
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
            for kind in (*JOB_KINDS, CHECK_JOB) if self.checks else JOB_KINDS:
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

    def status(self) -> ServiceStatus:
        """What ``grebench status`` shows: every job's row with when it is next due (APScheduler's own time while the
        service runs; else from the intervals), and the last board version."""
        due: dict[str, datetime] = {}
        if self.scheduler is not None and self.scheduler.running:
            for job in self.scheduler.get_jobs():
                if job.next_run_time is not None:
                    due[job.id] = job.next_run_time.astimezone(UTC).replace(tzinfo=None)
        else:
            due = self.next_runs()
        jobs: list[JobStatus] = [{**row, "next_due": due.get(row["job_id"])} for row in self.states()
                                 if row["job_id"] in due or row["status"] != "never"]
        try:
            board = _last_version(self.store)
        except Exception:  # a store that cannot be read: no board to age
            board = None
        return {"pid": os.getpid(), "written_at": utcnow(), "jobs": jobs, "board": board}

    def write_status(self) -> None:
        """Write :meth:`status` to ``DATA_DIR/service-status.json`` (by a rename: a reader never sees half of it);
        ``grebench status`` reads it while the service holds the store.  Never raises."""
        path = self.settings.service_status_path
        try:
            text = json.dumps(self.status(), default=_iso, indent=1)
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(path)
        except Exception as exc:  # the jobs go on; the status file is only a window on them
            log.warning("could not write %s: %s", path, exc)

    def interval(self, kind: str) -> timedelta:
        """How often a job runs (from its ``*_interval_min`` setting)."""
        return job_interval(self.settings.service, kind)

    def next_runs(self, now: datetime | None = None) -> dict[str, datetime]:
        """When each job is next due (naive UTC): at once if it never finished or was interrupted."""
        return due_times(self.settings.service, self.states(), self.kinds, now)

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
            began = time.monotonic()
            log.info("job %s started", kind, extra={"job": kind, "event": "job started"})
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
                               progress=PlainProgress(cast(IO[str], LogLines(PROGRESS_LOG))), services=self.services,
                               observer=MarkRunning())
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
            # the operator's one line per job, with its real outcome and duration (APScheduler's own lines are kept
            # out of stderr); JSON logs carry them as fields too
            seconds = time.monotonic() - began
            fields = {"job": kind, "event": "job ended", "outcome": status, "duration_s": round(seconds, 3),
                      "run_id": run_id}
            if status == "ok":
                log.info("job %s finished (ok) in %.1f s", kind, seconds, extra=fields)
            elif status == "failed":
                log.warning("job %s finished (failed: %s) in %.1f s", kind, error, seconds, extra=fields)
            else:
                log.warning("job %s interrupted (%s) in %.1f s", kind, error, seconds, extra=fields)
            metrics.job_finished(kind, status, seconds, time.time())
            self.write_status()
            return {"job": kind, "run_id": run_id, "status": status, "run_status": run_status, "error": error,
                    "summary": summary, "failures": failures}

    def run_all_once(self) -> list[JobOutcome]:
        """Every job once, in order (``grebench serve --once``: a cron-style cycle); after a stop none starts."""
        return [self.run_job(kind) for kind in self.kinds if not stop.stopping()]

    def check_store(self) -> CheckReport:
        """Check the store (:func:`grebench.store.check_connection`: every table read whole, rows against the last
        board version, the snapshots), then, when it passed, keep a backup copy of the file (``backup_keep`` of them
        in ``DATA_DIR/backups``): taken after a checkpoint in the one worker, so no job writes meanwhile, and read
        whole from disk before it counts (so the file on disk is checked too, not only the blocks in memory).
        Recorded as the ``check`` job; never raises (a damaged store is noted beside the file, logged with the
        remedy, and every later command refuses it)."""
        with self._lock:
            began = time.monotonic()
            log.info("job %s started", CHECK_JOB, extra={"job": CHECK_JOB, "event": "job started"})
            self.store.con.execute("UPDATE jobs SET status = 'running', last_started_at = ? WHERE job_id = ?",
                                   [utcnow(), CHECK_JOB])
            path = self.store.path
            backup = None
            try:
                report = check_connection(self.store.con, path or ":memory:")
                if report.ok and path is not None and self.settings.service.backup_keep > 0:
                    try:
                        backup = backup_store(self.store.con, path, self.settings.backups_path,
                                              self.settings.service.backup_keep)
                    except StoreDamaged as exc:  # the file on disk is not what the blocks in memory say
                        report.ok, report.damaged = False, True
                        report.problems.append(f"the file on disk: {exc.reason}")
                    except OSError as exc:  # no room for a backup: said, and the check itself stands
                        report.problems.append(f"backup not written: {exc}")
            except stop.Interrupted as exc:  # a stop: between two tables, or a backup left unmade
                report = CheckReport(str(path), ok=False, problems=[f"interrupted ({exc})"])
            if report.damaged and path is not None:
                note_damage(path, "; ".join(report.problems)[:500])
            status = "interrupted" if stop.stopping() and not report.ok else "ok" if report.ok else "failed"
            error = None if not report.problems else "; ".join(report.problems)[:2000]
            summary = {**report.as_json(), "backup": None if backup is None else str(backup)}
            try:
                self.store.con.execute(
                    "UPDATE jobs SET status = ?, last_finished_at = ?, last_error = ?, runs = runs + 1, "
                    "last_summary_json = ? WHERE job_id = ?",
                    [status, utcnow(), error, json.dumps(summary, default=str)[:100_000], CHECK_JOB])
            except Exception as exc:  # a damaged store may refuse the write: the log line and the note say it
                log.error("the check's outcome could not be recorded in the store: %s", exc)
            seconds = time.monotonic() - began
            fields = {"job": CHECK_JOB, "event": "job ended", "outcome": status, "duration_s": round(seconds, 3)}
            if report.ok:
                log.info("job %s finished (ok%s) in %.1f s", CHECK_JOB, f", backup {backup}" if backup else "",
                         seconds, extra=fields)
            elif status == "interrupted":
                log.warning("job %s interrupted (%s) in %.1f s", CHECK_JOB, stop.reason_text(), seconds, extra=fields)
            else:
                log.error("job %s finished (failed: %s) in %.1f s", CHECK_JOB, error, seconds, extra=fields)
            metrics.job_finished(CHECK_JOB, status, seconds, time.time())
            if status != "interrupted":
                metrics.store_checked(report.ok)
            self.write_status()
            return report

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
        if self.checks:  # the first check ran before the service started (``grebench serve``)
            every = timedelta(minutes=float(self.settings.service.check_interval_min))
            self.scheduler.add_job(self.check_store, "interval", id=CHECK_JOB, name="grebench check",
                                   seconds=every.total_seconds(), replace_existing=True,
                                   next_run_time=datetime.now(UTC) + every)
        self.scheduler.start()
        self.write_status()
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

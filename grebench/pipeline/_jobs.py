"""Jobs as data, and the one function that runs a job: :func:`run_job`.

A job is a name, the stages it runs (names of :data:`grebench.pipeline.STAGES`, in order), the options it fixes
(``generate`` writes sealed reviews only; the scheduler's ``score`` works on the same paper sample as
``grebench run``: the setting ``papers``) and, for the scheduler, the
setting that holds its interval.  ``grebench run`` runs the job ``run``; every single-stage command runs a job made
of its stage (:meth:`Job.of`); the scheduler runs its jobs by name.  :func:`run_job` does for all of them, in one
place: check the setup (before the store is opened: a mistake costs nothing), open the store, start the run, run the
stages through :func:`run_stages`, finish the run with its status.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, suppress
from dataclasses import dataclass, field, replace
from typing import Any

from grebench import stop
from grebench.pipeline._check import check_data_dir, check_local_port, check_setup, check_site_dir
from grebench.pipeline._resolve import ResolvedRun, resolve_setup
from grebench.pipeline._runner import (
    JobObserver,
    PipelineResult,
    RunOptions,
    StageContext,
    check_stages,
    record_failure,
    run_stages,
)
from grebench.progress import NoProgress, Progress
from grebench.settings import Settings
from grebench.store import RunFailure, SimulatedClock, Store, StoreDamaged, WallClock, failure_text, use_clock
from grebench.store import clock as installed_clock

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Job:
    """A named list of stages with the options it fixes.

    ``per_venue``: the stages run once per configured venue (setting ``venues``), with that venue as the source.
    ``interval``: the setting holding the minutes between two scheduled runs (None: not scheduled).
    """

    name: str
    stages: tuple[str, ...]
    description: str = ""
    options: Mapping[str, Any] = field(default_factory=dict)
    per_venue: bool = False
    interval: str | None = None

    @classmethod
    def of(cls, *stages: str) -> Job:
        """A job of the named stages (a single-stage command)."""
        return cls(stages[0] if len(stages) == 1 else "+".join(stages), tuple(stages))

    @property
    def uses_source(self) -> bool:
        """Whether the job reads ``options.source`` (it ingests, and not per configured venue)."""
        return "ingest" in self.stages and not self.per_venue


#: The main job (``grebench run``) and the scheduler's jobs; the scheduler starts due jobs in this order after
#: ``run`` (which it does not schedule: its ``score`` job is the main job without ingest, on the same sample).
JOBS: dict[str, Job] = {j.name: j for j in (
    Job("run", ("ingest", "bench", "score", "boards", "validate", "panel", "site"),
        "the main job: ingest a source, generate, score, boards, validation, judge panel, site"),
    Job("queue", ("submissions",), "accept queued submissions and evaluate them on clean papers",
        interval="queue_interval_min"),
    Job("poll", ("ingest",), "ingest new papers, reviews and review edits of every configured venue",
        per_venue=True, interval="poll_interval_min"),
    Job("generate", ("bench",), "LLM reviews of papers whose reviews are not public yet (sealed)",
        options={"bench_scope": "unreviewed"}, interval="generate_interval_min"),
    Job("score", ("bench", "score", "boards", "validate", "panel"),
        "once reviews appear: bench, scoring, boards, validation and the panel on the main job's paper sample",
        interval="score_interval_min"),
    Job("site", ("site",), "rebuild the static site and the Parquet exports the app reads",
        interval="site_interval_min"),
    Job("snapshot", ("snapshot",), "cut due yearly snapshots and requested ones", interval="snapshot_check_min"),
)}
#: The jobs the scheduler runs, in their start order.
SCHEDULED: tuple[str, ...] = tuple(name for name, job in JOBS.items() if job.interval)


def job(name: str | Job) -> Job:
    """The job of that name (a :class:`Job` comes back as it is)."""
    if isinstance(name, Job):
        return name
    if name not in JOBS:
        raise ValueError(f"unknown job {name!r}: choose from {', '.join(JOBS)}")
    return JOBS[name]


def venue_sources(settings: Settings) -> list[str]:
    """Source specs of ``settings.service.venues`` (a bare venue id is an OpenReview venue; unknown kinds are
    errors)."""
    from grebench.ingest import source_spec

    return [source_spec(item) for item in settings.listed("venues")]


@dataclass
class JobResult:
    """What a job did: its run, the run's status, and the pipeline's result (per venue for a per-venue job)."""

    job: Job
    run_id: str
    status: str
    result: PipelineResult
    venues: dict[str, PipelineResult] = field(default_factory=dict)
    failures: list[RunFailure] = field(default_factory=list)
    refused: BaseException | None = None
    run: ResolvedRun | None = None   # what the job worked with (None: no stage read it)

    def summary(self) -> dict[str, Any]:
        """The job's summary: the stage's own for one stage, per stage for several, per venue for ``poll``."""
        if self.job.per_venue:
            return {"venues": {spec: _stages_summary(self.job, r) for spec, r in self.venues.items()}}
        return _stages_summary(self.job, self.result)


def _stages_summary(job: Job, result: PipelineResult) -> dict[str, Any]:
    if len(job.stages) == 1:
        return result.stages.get(job.stages[0], {})
    return dict(result.stages)


def run_job(settings: Settings, which: str | Job, options: RunOptions | None = None, *,
            open_store: Callable[[], AbstractContextManager[Store]], command: str | None = None,
            args: Mapping[str, Any] | None = None, progress: Progress | None = None,
            services: Mapping[str, Any] | None = None, observer: JobObserver | None = None,
            refusals: Sequence[type[BaseException]] = (),
            clock: WallClock | SimulatedClock | None = None) -> JobResult:
    """Run a job: check and resolve its setup, open the store, start the run, run the stages, finish the run.

    ``open_store`` opens the one writer store (the CLI opens the file with its own messages; the scheduler hands in
    the store it holds).  The setup is resolved here, once (:func:`grebench.pipeline.resolve_setup`), and the run
    once, by the runner, before the first stage that reads it; ``observer`` hears of each step
    (:class:`JobObserver`: the CLI prints its plan lines and stage markers there, the scheduler marks its job
    running).  A stage exception of a ``refusals`` type (bad input found only while a stage works) finishes the
    run with that error and comes back as ``refused``.  :class:`~grebench.pipeline.SetupError` (a bad data
    directory or ``site_dir``, a fixed ``local_server_port`` another program holds, too) is raised before the store
    is opened, or, for what only the store can tell (an unknown ``--candidate`` or ``--judge``, a setup nothing was
    scored with: :meth:`Stage.check`), once it is open but before the run is recorded or anything is written.
    ``clock`` (default: the installed one, the wall clock unless a replay set its own) is the job's "now":
    installed while the job runs and carried by its :class:`StageContext`.
    """
    with use_clock(clock or installed_clock()) as now:
        return _run_job(settings, which, options, open_store=open_store, command=command, args=args,
                        progress=progress, services=services, observer=observer, refusals=refusals, clock=now)


def _run_job(settings: Settings, which: str | Job, options: RunOptions | None, *,
             open_store: Callable[[], AbstractContextManager[Store]], command: str | None,
             args: Mapping[str, Any] | None, progress: Progress | None, services: Mapping[str, Any] | None,
             observer: JobObserver | None, refusals: Sequence[type[BaseException]],
             clock: WallClock | SimulatedClock) -> JobResult:
    spec = job(which)
    observer = observer or JobObserver()
    opts = replace(options or RunOptions(), **spec.options)
    check_setup(settings, opts, source=spec.uses_source)
    check_data_dir(settings)
    check_site_dir(settings, spec.stages)
    check_local_port(settings, spec.stages, opts)
    setup = resolve_setup(settings, opts, progress)
    observer.checked(setup)
    with open_store() as store:
        # every refusal before the run is recorded and before anything is written (a refusal changes nothing)
        early = StageContext(store, settings, "", opts, progress or NoProgress(), dict(services or {}), setup,
                             clock=clock)
        check_stages(early, _stages(spec))
        run_id = store.start_run(command or spec.name, dict(args if args is not None else {"job": spec.name}))
        observer.started(store, run_id)
        if early.run is not None:  # a reading job's run, resolved for its checks: the same one, heard of once
            observer.resolved(early.run)
        try:
            out = _run(StageContext(store, settings, run_id, opts, progress or NoProgress(), dict(services or {}),
                                    setup, run=early.run, clock=clock), spec, observer)
        except (stop.Interrupted, KeyboardInterrupt) as exc:  # a signal: what finished is stored; resumable
            partial = getattr(exc, "pipeline_result", None)
            reason = str(exc) if isinstance(exc, stop.Interrupted) else "stopped by KeyboardInterrupt"
            summary: dict[str, Any] = {"interrupted": reason}
            if partial is not None:
                summary.update(stages=partial.stages, seconds=partial.seconds)
            store.finish_run(run_id, summary, status="interrupted")
            store.checkpoint()
            raise
        except StoreDamaged as exc:  # recorded where the damage allows; the command says the remedy
            with suppress(Exception):
                store.finish_run(run_id, {"error": str(exc)})
            raise
        except Exception as exc:  # outside any stage (e.g. a venue that cannot be read): recorded, then raised
            record_failure(store, run_id, spec.name, None, failure_text(exc), exc)
            store.finish_run(run_id, {"error": failure_text(exc)})
            raise
        refused = next((exc for exc in out.result.errors.values() if isinstance(exc, tuple(refusals))), None)
        if refused is not None:
            out.refused = refused
            out.status = store.finish_run(run_id, {"error": str(refused)})
            return out
        out.failures = store.run_failures(run_id)
        stored = observer.summary(store, out)
        summary = dict(stored if stored is not None else out.summary())
        if out.run is not None:  # what the job worked with, by its stable id (the stages' summaries say the rest)
            summary.setdefault("resolved", out.run.as_json(store))
        out.status = store.finish_run(run_id, summary)
        return out


def _run(ctx: StageContext, spec: Job, observer: JobObserver) -> JobResult:
    if not spec.per_venue:
        result = run_stages(ctx, _stages(spec), observer=observer)
        return JobResult(spec, ctx.run_id, "", result, run=ctx.run)
    venues: dict[str, PipelineResult] = {}
    for source in venue_sources(ctx.settings):  # one failing venue fails only its own ingest
        venue_ctx = replace(ctx, options=replace(ctx.options, source=source))
        venues[source] = run_stages(venue_ctx, _stages(spec), observer=observer)
    result = PipelineResult()
    for r in venues.values():
        result.errors.update(r.errors)
    return JobResult(spec, ctx.run_id, "", result, venues)


def _stages(spec: Job) -> list[Any]:
    from grebench.pipeline import stages

    return stages(*spec.stages)

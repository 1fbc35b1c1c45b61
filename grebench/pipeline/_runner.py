"""The stage protocol and the runner of a list of stages (every job goes through it: :func:`run_job`).

A stage is a name, an optional fingerprint of its inputs, and ``run``.  :func:`run_stages` runs stages in the order
of :data:`grebench.pipeline.STAGES` and does, in one place, what every caller needs: a marker per stage on stderr,
the progress display, skipping a stage whose inputs did not change since its last complete run (its stored summary
comes back with ``unchanged: true``), recording a failure on the run (later stages still run on what is stored),
timings, and a checkpoint after each stage.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from grebench import stop
from grebench.progress import NoProgress, Progress
from grebench.registry import UnknownPart
from grebench.runtime import release_memory
from grebench.settings import Settings, StageInputs
from grebench.store import (
    WALL_CLOCK,
    SimulatedClock,
    Store,
    StoreDamaged,
    WallClock,
    failure_text,
    is_damage,
    note_damage,
)

if TYPE_CHECKING:
    from grebench.pipeline._resolve import ResolvedRun, RunSetup

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunOptions:
    """What the user (or the scheduler) chose for this run; ``None`` means the setting's value."""

    source: str = "bundled"
    limit: int | None = None
    estimator: str | None = None
    preprocessor: str | None = None
    metrics: tuple[str, ...] = ()          # empty: the metrics registered as default
    papers: str | None = None             # "all" | a number | None (the setting ``papers``)
    candidates: tuple[str, ...] = ()      # bench: only these
    bench_scope: str = "eligible"         # eligible: papers with human reviews | unreviewed: sealed generations only
    judges: tuple[str, ...] = ()          # panel: only these
    exam_only: bool = False
    site_dir: str | None = None           # site: build here (default: the setting)
    force: bool = False                   # skip no stage because of an unchanged fingerprint
    calibrate: bool = False               # papers = auto: install the evaluation LM now to measure this machine
    validation: str | None = None         # core | full | auto | None (the setting ``validation``)
    #: score: a sample with nothing to score fails the stage (``grebench run`` and ``score``: a run that scores
    #: nothing is no board); the scheduler's cycles before any review is public have nothing to score, rightly
    require_scores: bool = False


@dataclass
class StageContext:
    """What every stage gets: the one writer store, the settings, the run, the options, the progress display.

    ``services`` holds what only some stages use (the scheduler's submission queue, key vault, resolver).
    ``setup`` is what the options and settings decide (:func:`grebench.pipeline.resolve_setup`, once per job);
    ``run`` what the job works with, resolved once by :func:`run_stages` before the first stage that reads it.
    ``clock`` is where the job's "now" comes from (installed while the job runs: :func:`grebench.store.utcnow`
    reads it): the wall clock, or a replay's simulated clock.
    """

    store: Store
    settings: Settings
    run_id: str
    options: RunOptions = field(default_factory=RunOptions)
    progress: Progress = field(default_factory=NoProgress)
    services: dict[str, Any] = field(default_factory=dict)
    setup: RunSetup | None = None
    run: ResolvedRun | None = None
    clock: WallClock | SimulatedClock = WALL_CLOCK

    @property
    def resolved(self) -> ResolvedRun:
        """The job's resolved run (a stage reads it only when it says so: :meth:`Stage.needs_run`)."""
        if self.run is None:
            raise RuntimeError("the run is not resolved: a stage that reads it must say so (needs_run)")
        return self.run


class JobObserver:
    """What the caller of a job sees of it, in order; every method does nothing here (override what you need).

    ``checked`` once the setup passed, before the store is opened; ``started`` once the run is recorded;
    ``resolved`` once the run is resolved (before the first stage that reads it); ``stage`` before each stage;
    ``summary`` gives what is stored with the finished run (None: :meth:`JobResult.summary`).
    """

    def checked(self, setup: RunSetup) -> None:
        """The setup passed its checks."""

    def started(self, store: Store, run_id: str) -> None:
        """The run is recorded."""

    def resolved(self, run: ResolvedRun) -> None:
        """The job's run is resolved."""

    def stage(self, name: str) -> None:
        """A stage starts."""

    def summary(self, store: Store, result: Any) -> dict[str, Any] | None:
        """The summary stored with the run (``result``: the :class:`grebench.pipeline.JobResult`)."""
        return None


class Stage(Protocol):
    """One step of the pipeline."""

    name: str
    description: str

    @property
    def inputs(self) -> StageInputs | None:
        """The settings the stage's fingerprint is composed from (:class:`grebench.settings.StageInputs`: its
        inputs, and the settings it reads that change no result); None for a stage without a fingerprint."""
        ...

    def fingerprint(self, ctx: StageContext) -> tuple[str, str] | None:
        """(scope, hash of everything the stage reads), or None when the stage always runs (its own caches make
        a rerun cheap).  The runner skips the stage when the stored state for that scope has the same hash.  The
        settings in it are the declared inputs' values (:attr:`inputs`), never a list kept at the call."""
        ...

    def intact(self, ctx: StageContext, summary: dict[str, Any]) -> bool:
        """Whether the results a skipped stage would return are still there (a file may have been deleted)."""
        ...

    def subject(self, ctx: StageContext) -> str | None:
        """What a failure of the whole stage is recorded against (e.g. the source), or None."""
        ...

    def halts_on_failure(self, ctx: StageContext) -> bool:
        """After this stage failed: whether the stages after it have nothing to work on (the job ends)."""
        ...

    def needs_run(self, ctx: StageContext) -> bool:
        """Whether the stage reads the resolved run (``ctx.resolved``): the runner resolves it before."""
        ...

    def draws_sample(self, ctx: StageContext) -> bool:
        """Whether the stage generates for or scores the paper sample: a job with such a stage draws it afresh;
        a job without one reads the sample its stored scores were made on."""
        ...

    def check(self, ctx: StageContext, earlier: Sequence[str]) -> None:
        """Raise :class:`grebench.pipeline.SetupError` when the stage would refuse what the job asks of it (an
        unknown candidate or judge, a setup nothing was scored with, an output folder it cannot write).  Called
        for every stage of a job before the run is recorded and before any stage writes (``ctx.run_id`` is empty;
        ``earlier``: the stages before this one in the job, whose output this one may need), so a refusal changes
        nothing in the store."""
        ...

    def run(self, ctx: StageContext) -> Mapping[str, Any]:
        """Do the work; return the stage's summary (JSON-serialisable: each stage's own record, its TypedDict where
        the layer below types it).  ``complete: false`` keeps the stage from
        being skipped next time (some items failed and must be tried again)."""
        ...


class StageFailure(Exception):
    """A stage that ran but did not do its job (the score stage scored nothing): recorded with its message as it
    is, which says why and what to do."""


class BaseStage:
    """Defaults for :class:`Stage`: no fingerprint (always runs), results always intact."""

    name = ""
    description = ""
    #: Stages whose output of this run this one consumes: when one of them failed, this one is skipped because of
    #: it (its own error would only repeat the first one's).
    requires: tuple[str, ...] = ()

    @property
    def inputs(self) -> StageInputs | None:
        """No fingerprint: nothing declared."""
        return None

    def fingerprint(self, ctx: StageContext) -> tuple[str, str] | None:
        """No fingerprint: the stage always runs."""
        return None

    def intact(self, ctx: StageContext, summary: dict[str, Any]) -> bool:
        """Nothing to check."""
        return True

    def subject(self, ctx: StageContext) -> str | None:
        """No particular subject."""
        return None

    def halts_on_failure(self, ctx: StageContext) -> bool:
        """The stages after a failed one still run, on what is stored."""
        return False

    def needs_run(self, ctx: StageContext) -> bool:
        """The stage does not read the resolved run."""
        return False

    def draws_sample(self, ctx: StageContext) -> bool:
        """The stage works on no sample."""
        return False

    def check(self, ctx: StageContext, earlier: Sequence[str]) -> None:
        """Nothing to refuse beyond the job's setup check."""

    def run(self, ctx: StageContext) -> Mapping[str, Any]:
        """Subclasses do the work."""
        raise NotImplementedError


@dataclass
class PipelineResult:
    """What a run of stages did: each stage's summary (or error), seconds, and the exceptions by stage."""

    stages: dict[str, dict[str, Any]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    errors: dict[str, BaseException] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)  # stage -> the failed stage it needed

    @property
    def ok(self) -> bool:
        """No stage raised."""
        return not self.errors


def run_stages(ctx: StageContext, stages: Sequence[Stage], *, observer: JobObserver | None = None) -> PipelineResult:
    """Run ``stages`` in order on ``ctx``; a failing stage is recorded and the next one runs on what is stored
    (unless the failed stage says nothing after it has input: :meth:`Stage.halts_on_failure`).

    Before the first stage that reads the run, the run is resolved, once (:func:`grebench.pipeline.resolve_run`);
    ``observer`` hears of it and of each stage before it starts (``grebench run`` prints ``[name]`` to stderr).
    """
    result = PipelineResult()
    observer = observer or JobObserver()
    draws = any(stage.draws_sample(ctx) for stage in stages)
    store = ctx.store
    for stage in stages:
        stop.check()  # a stage boundary: after a stop no stage starts
        failed = [dep for dep in getattr(stage, "requires", ()) if dep in result.errors or dep in result.skipped]
        if failed:
            result.skipped[stage.name] = failed[0]
            result.stages[stage.name] = {"skipped": f"because [{failed[0]}] failed"}
            continue
        observer.stage(stage.name)
        started = time.perf_counter()
        try:
            if ctx.run is None and stage.needs_run(ctx):
                _resolve(ctx, draws, observer)
            result.stages[stage.name] = _run_one(ctx, stage)
        except (stop.Interrupted, KeyboardInterrupt) as exc:  # what the stage finished is stored; nothing more runs
            result.stages[stage.name] = {"interrupted": str(exc) or type(exc).__name__}
            exc.pipeline_result = result  # type: ignore[union-attr]  # the partial result, for the run's summary
            raise
        except Exception as exc:  # recorded on the run; later stages run on what is stored
            if is_damage(exc):  # a damaged block: nothing after it can be trusted; the command says the remedy
                reason = str(exc).splitlines()[0][:300]
                if store.path is not None:
                    note_damage(store.path, reason)
                raise StoreDamaged(store.path or Path(":memory:"), reason) from exc
            reason = str(exc) if isinstance(exc, (UnknownPart, StageFailure)) else failure_text(exc)
            log.debug("stage %s failed", stage.name, exc_info=True)
            record_failure(store, ctx.run_id, stage.name, stage.subject(ctx), reason, exc)
            result.stages[stage.name] = {"error": reason}
            result.errors[stage.name] = exc
            if stage.halts_on_failure(ctx):
                break
        finally:
            result.seconds[stage.name] = round(time.perf_counter() - started, 3)
            if ctx.run is not None:  # what the run's estimators built (a model, servers) ends with the stage
                ctx.run.close()
            release_memory(stage.name)  # what the stage loaded (a model, its batches) goes back before the next
        store.checkpoint()  # not in ``finally``: a store a full disk invalidated would hide the stage's own error
    return result


def record_failure(store: Store, run_id: str, stage: str, item: str | None, reason: str,
                   exc: BaseException) -> None:
    """Record ``exc`` as the run's failure; when the store itself cannot be written any more (a full disk
    invalidates the DuckDB connection: its next error only says so), raise ``exc``, which says what and where
    (``no space left on device writing …/grebench.duckdb.wal``): the command ends with it, and the next writer
    marks the run failed from the failure note (:meth:`grebench.store.Store.note_failure`)."""
    try:
        store.record_failure(run_id, stage, item, reason)
    except Exception:
        raise exc from None


def check_stages(ctx: StageContext, stages: Sequence[Stage]) -> None:
    """Every stage's own refusals (:meth:`Stage.check`), before the job records its run or writes anything.

    A job that only reads stored scores (``validate``, ``exam``, ``judge``: no stage draws the sample) resolves its
    run here, once, and keeps it on ``ctx``: resolving it writes nothing, and its checks read it (is anything scored
    with the setup it names?).  A job that draws its sample resolves later, as :func:`run_stages` says: drawing
    records the sample, which a refused job must not do."""
    if ctx.run is None and not any(s.draws_sample(ctx) for s in stages) and any(s.needs_run(ctx) for s in stages):
        _resolve(ctx, False, JobObserver())
    names = [s.name for s in stages]
    for i, stage in enumerate(stages):
        stage.check(ctx, names[:i])


def _resolve(ctx: StageContext, draws: bool, observer: JobObserver) -> None:
    from grebench.pipeline._resolve import resolve_run, resolve_setup

    if ctx.setup is None:  # a caller of run_stages without run_job (tests): the same rule, here
        ctx.setup = resolve_setup(ctx.settings, ctx.options)
    ctx.run = resolve_run(ctx.store, ctx.settings, ctx.setup, draws=draws)
    observer.resolved(ctx.run)


def _run_one(ctx: StageContext, stage: Stage) -> dict[str, Any]:
    print_ = stage.fingerprint(ctx)
    if print_ is not None and not ctx.options.force:
        scope, digest = print_
        state = ctx.store.stage_state(stage.name, scope)
        if state is not None and state[0] == digest and state[1] is not None and stage.intact(ctx, state[1]):
            return {**state[1], "unchanged": True}
    summary = stage.run(ctx)
    if print_ is not None and summary.get("complete", True):
        # the inputs as they were before the run: a stage that changed its own inputs runs once more next time
        ctx.store.set_stage_state(stage.name, print_[0], print_[1], summary)
    return {**summary, "unchanged": False}

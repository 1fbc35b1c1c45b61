"""The plan line said before work starts: ``grebench run``'s, and ``grebench serve``'s (its jobs, their intervals,
the paper sample the ``score`` job works on, and the expected time of a cycle), from one place."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from grebench.pipeline import ResolvedRun, RunSetup
from grebench.settings import Settings

if TYPE_CHECKING:
    from grebench.runtime import Neighbours


def plan_text(settings: Settings, setup: RunSetup, what: str = "main job", papers_known: int | None = None,
              neighbours: Neighbours | None = None) -> str:
    """What a run of the main job (or of serve's ``score`` job) will do, in a few short lines read from the job's
    resolved ``setup``: how many papers, what it checks, the expected minutes with their range and what they were
    measured from, and the models in each role.  ``papers_known``: the eligible papers already stored (gives an
    estimate when every paper is scored); ``neighbours``: what other processes took of the cores since the command
    started (:func:`busy_note`)."""
    from grebench.bench import default_controls
    from grebench.pipeline import (
        dtype_basis,
        expected_minutes,
        reuse_evidence,
        reuse_probe_records,
        scoring_factor,
        throughput_caveat,
    )
    from grebench.scoring.estimators import estimator_info

    spec, size, why = setup.estimator, setup.papers, setup.papers_why
    info = estimator_info(spec)
    all_hint = "`--papers all`" if what == "main job" else "the setting `papers = all`"
    if size is None:
        papers = "every eligible paper" + (f" ({papers_known})" if papers_known else "")
    else:
        papers = f"{size} papers, a seeded sample" + (f" sized for about 15 minutes here ({all_hint}: every paper)"
                                                       if why.startswith("auto") else f" ({why})")
    lines = [f"{what}: {papers}"]
    controls = len(default_controls(llm=bool(settings.bench.control_model)))
    if setup.core:
        lines.append(f"checks: GEM-S with the human baseline, every contestant and the core controls "
                     f"({len(setup.controls)} of {controls}: {', '.join(setup.controls)}); `--validation full` runs "
                     f"all {controls} and GEM too")
    else:
        lines.append(f"checks: {' and '.join(m.upper() for m in setup.metrics)} with all {len(setup.controls)} "
                     "controls (the full validation)")
    counted = size if size is not None else papers_known
    if setup.throughput is not None and counted:
        rate, dtype = setup.throughput
        factor, factor_why = scoring_factor(settings.scoring, spec, dtype, reuse_probe_records(settings, spec))
        low, high = expected_minutes(rate, counted, setup.core, factor)
        basis = "; ".join(b for b in (dtype_basis(settings, spec), reuse_evidence(settings, spec, dtype), factor_why)
                          if b)
        lines.append(f"expected {low:.0f}-{high:.0f} minutes: the evaluation LM reads {rate:.0f} tokens/s here in "
                     f"{dtype}" + (f" ({basis})" if basis else "") + throughput_caveat(settings, spec))
    elif info.local_model:
        lines.append("expected time: not measured on this machine yet (the first run measures it; each stage shows "
                     "its ETA)")
    proxy = " (a fast proxy, not the metric's language model)" if info.proxy else ""
    lines.append(f"models: evaluation LM {spec}{proxy}; local candidates: {', '.join(setup.local_candidates) or 'none'}"
                 f"; local judges: {', '.join(setup.local_judges) or 'none'}")
    busy = busy_note(neighbours)
    if busy and (info.local_model or setup.local_candidates or setup.local_judges):
        lines.append(busy)
    return "\n  ".join(lines)


#: The shortest span over which the plan measures other processes' CPU use (:class:`grebench.runtime.Neighbours`);
#: a plan made sooner (nothing to calibrate) reads the load average instead.
BUSY_WINDOW_S = 5.0


def busy_note(neighbours: Neighbours | None = None) -> str:
    """A warning for the plan when other work keeps the cores busy: the sample and its expected minutes assume idle
    cores and stay as they are (the same machine always draws the same sample), so the plan says the run will take
    longer and why (what two CPU-bound processes beside the default run cost on 2 cores: docs/operations.md).

    ``neighbours``: a meter made when the command started.  Once it has run :data:`BUSY_WINDOW_S` (the plan's
    calibration, a model pull), the other processes' share of the cores over that span decides, at the probes' own
    line (:data:`grebench.runtime.NEIGHBOUR_SHARE`): the 1-minute load average read after the calibration counts
    the calibration itself (a quiet 2-core AVX2 EPYC read 1.7 after its 64 s float32 probe and was told it was
    busy).  Otherwise the load average, at :data:`grebench.runtime.BUSY_SHARE` of the cores."""
    from grebench.runtime import NEIGHBOUR_SHARE, is_busy, load_average, usable_cores

    cores = usable_cores()
    others = neighbours.cores() if neighbours is not None and neighbours.seconds >= BUSY_WINDOW_S else None
    if others is not None:
        if others < NEIGHBOUR_SHARE * cores:
            return ""
        what = f"other processes took {others:.1f} of its {cores} usable cores since this command started"
    else:
        load = load_average()
        if load is None or not is_busy(load, cores=cores):
            return ""
        what = f"1-minute load average {load:.1f} on {cores} usable cores"
    return (f"the machine is busy now ({what}): the times above assume idle cores, so expect it to take longer "
            "(several times with every core taken)")


def serve_plan(settings: Settings, kinds: Sequence[str], intervals: dict[str, float],
               papers_known: int | None) -> list[str]:
    """``grebench serve``'s plan: its jobs and intervals, then the ``score`` job's sample and expected time.

    ``intervals``: minutes per job.  A cycle with nothing new makes no LLM or estimator call; the expected time is
    that of a first cycle over the sample (the main job's measured throughput, the same figures as ``run``)."""
    from grebench.pipeline import JOBS, RunOptions, resolve_setup

    def every(minutes: float) -> str:
        return f"{minutes:g} min" if minutes < 120 else f"{minutes / 60:g} h"

    lines = ["serve plan: jobs " + ", ".join(f"{k} every {every(intervals[k])}" for k in kinds)
             + " (one at a time; SIGTERM or Ctrl-C stops the running job at its next request boundary)"]
    if "score" in kinds:
        from grebench.runtime import Neighbours

        neighbours = Neighbours()  # across the setup's calibration, if it runs one (busy_note)
        setup = resolve_setup(settings, RunOptions(**dict(JOBS["score"].options)))  # the score job's, as it runs
        lines.append(plan_text(settings, setup, "score job (first cycle over the sample; later cycles score only "
                                               "what is new)", papers_known, neighbours))
    return lines


def reader_plan(command: str, run: ResolvedRun) -> str:
    """The plan of a command that works on the stored scores (exam, judge), said once its run is resolved: the gem
    judge's evaluation LM and preprocessor and why (on a store scored with ``--estimator offline`` it is
    ``offline``, never the settings' default LM), the local judges, and what it will load."""
    from grebench.scoring.estimators import estimator_info

    info = estimator_info(run.estimator)
    loads = [f"evaluation LM {run.estimator}"] if info.local_model else []
    loads += [f"local judge {name}" for name in run.setup.local_judges]
    return (f"{command}: the gem judge scores with evaluation LM {run.estimator}"
            f"{' (a fast proxy, not a language model)' if info.proxy else ''}, preprocessor "
            f"{run.preprocessor} ({run.whence}); local judges: {', '.join(run.setup.local_judges) or 'none'}; "
            + (f"loads {', '.join(loads)} on first use" if loads else "loads no model"))

"""The plan line said before work starts: ``grebench run``'s, and ``grebench serve``'s (its jobs, their intervals,
the paper sample the ``score`` job works on, and the expected time of a cycle), from one place."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from grebench.settings import Settings


def plan_text(settings: Settings, opts: Any, what: str = "main job", papers_known: int | None = None) -> str:
    """What a run of the main job (or of serve's ``score`` job) will do: the models in each role, how many papers,
    and the expected time measured on this machine.  ``papers_known``: the eligible papers already stored (gives
    an estimate when every paper is scored)."""
    from grebench.pipeline import AUTO_CPU_PAPERS, expected_minutes, measured_seconds_per_request, papers_size
    from grebench.scoring.estimators import estimator_info

    spec = opts.estimator_spec(settings)
    size, why = papers_size(opts.papers if opts.papers is not None else settings.papers, settings, spec)
    local = ", ".join(settings.listed("local_candidates")) or "none"
    judges = ", ".join(settings.listed("local_judges")) or "none"
    info = estimator_info(spec)
    proxy = " (a fast proxy, not the metric's language model)" if info.proxy else ""
    text = (f"{what}: evaluation LM {spec}{proxy}; local candidates: {local}; local judges: {judges}; "
            f"papers: {'every eligible paper' if size is None else f'a seeded sample of {size}'} ({why})")
    per_request = measured_seconds_per_request(settings, spec)
    counted = size if size is not None else papers_known
    if per_request is not None and counted:
        low, high = expected_minutes(per_request, counted)
        text += (f"; expected {low:.0f}-{high:.0f} minutes here (from {per_request:.2f} s per evaluation-LM "
                 "request measured on this machine; each stage shows its ETA as it goes)")
    elif info.local_model:
        text += ("; the time is measured as the run goes (no throughput measured on this machine yet: the first run "
                 "probes it; each stage shows its ETA)")
    if size == AUTO_CPU_PAPERS and why.startswith("auto"):
        text += "; `--papers all` scores every paper" if what == "main job" else \
            "; the setting `papers = all` scores every paper"
    elif size is None and why.startswith("auto: a GPU"):
        text += "; on a GPU every paper is scored (papers = auto)"
    return text


def serve_plan(settings: Settings, kinds: Sequence[str], intervals: dict[str, float],
               papers_known: int | None) -> list[str]:
    """``grebench serve``'s plan: its jobs and intervals, then the ``score`` job's sample and expected time.

    ``intervals``: minutes per job.  A cycle with nothing new makes no LLM or estimator call; the expected time is
    that of a first cycle over the sample (the main job's measured throughput, the same figures as ``run``)."""
    from grebench.pipeline import JOBS, RunOptions

    def every(minutes: float) -> str:
        return f"{minutes:g} min" if minutes < 120 else f"{minutes / 60:g} h"

    lines = ["serve plan: jobs " + ", ".join(f"{k} every {every(intervals[k])}" for k in kinds)
             + " (one at a time; SIGTERM or Ctrl-C stops the running job at its next request boundary)"]
    if "score" in kinds:
        opts = RunOptions(**dict(JOBS["score"].options))
        lines.append(plan_text(settings, opts, "score job (first cycle over the sample; later cycles score only "
                                               "what is new)", papers_known))
    return lines

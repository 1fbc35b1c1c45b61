"""The scheduler's jobs: each is a list of pipeline stages run through the one runner.

``poll`` ingests every configured venue (one failing venue skips only itself); ``generate`` writes sealed LLM
reviews of papers whose reviews are not public yet; ``score`` runs bench → score → boards → validate → panel (each
stage caches or skips what is unchanged); ``site`` rebuilds the site and the app's exports; ``queue`` evaluates
submissions; ``snapshot`` cuts the yearly snapshots.  A job keeps its progress in the store through its stages, so
a kill in the middle and a rerun repeat no LLM or estimator call.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any, Callable

from grebench.endpoints import KeyVault
from grebench.pipeline import RunOptions, StageContext, run_stages, stages
from grebench.progress import PlainProgress
from grebench.settings import Settings
from grebench.store import Store
from grebench.submissions import SubmissionQueue

log = logging.getLogger(__name__)


@dataclass
class JobContext:
    """What every job gets: the one writer store, the settings, and the submission queue with its key vault."""

    store: Store
    settings: Settings
    vault: KeyVault
    queue: SubmissionQueue
    resolver: Any = None  # name resolution of submitted hosts (None = the system resolver; tests pass a table)

    def stage_context(self, run_id: str, options: RunOptions | None = None) -> StageContext:
        """A pipeline context for this job (plain progress lines in the service's log)."""
        return StageContext(self.store, self.settings, run_id, options or RunOptions(), PlainProgress(),
                            services={"queue": self.queue, "vault": self.vault, "resolver": self.resolver})


def venue_sources(settings: Settings) -> list[str]:
    """Source specs of ``settings.venues`` (a bare venue id is an OpenReview venue; unknown kinds are errors)."""
    from grebench.ingest import source_spec

    return [source_spec(item) for item in str(settings.venues).split(",") if item.strip()]


def _summary(ctx: StageContext, names: tuple[str, ...]) -> dict[str, Any]:
    result = run_stages(ctx, stages(*names), stop_without_papers=False)
    if len(names) == 1:
        return result.stages[names[0]]
    return dict(result.stages)


def poll(ctx: JobContext, run_id: str) -> dict[str, Any]:
    """Ingest new papers, reviews and review edits of every configured venue."""
    out: dict[str, Any] = {}
    for spec in venue_sources(ctx.settings):
        out[spec] = _summary(ctx.stage_context(run_id, RunOptions(source=spec)), ("ingest",))
    return {"venues": out}


def generate(ctx: JobContext, run_id: str) -> dict[str, Any]:
    """LLM reviews of papers whose human reviews are not public yet: sealed, contamination-proof."""
    return _summary(ctx.stage_context(run_id, RunOptions(bench_scope="unreviewed")), ("bench",))


def score(ctx: JobContext, run_id: str) -> dict[str, Any]:
    """Once reviews appear: bench, scoring, boards, validation and the panel (each cached or skipped)."""
    options = replace(RunOptions(), papers="all")  # the service scores every paper; samples are for the main job
    return _summary(ctx.stage_context(run_id, options), ("bench", "score", "boards", "validate", "panel"))


def site(ctx: JobContext, run_id: str) -> dict[str, Any]:
    """Rebuild the static site and the Parquet exports the app reads (never the live file)."""
    return _summary(ctx.stage_context(run_id), ("site",))


def queue(ctx: JobContext, run_id: str) -> dict[str, Any]:
    """Accept queued submissions and evaluate them on clean papers."""
    return _summary(ctx.stage_context(run_id), ("submissions",))


def snapshot(ctx: JobContext, run_id: str) -> dict[str, Any]:
    """Cut due yearly snapshots and requested ones."""
    return _summary(ctx.stage_context(run_id), ("snapshot",))


JOBS: dict[str, Callable[[JobContext, str], dict[str, Any]]] = {
    "queue": queue, "poll": poll, "generate": generate, "score": score, "site": site, "snapshot": snapshot,
}
INTERVAL_SETTINGS = {"queue": "queue_interval_min", "poll": "poll_interval_min",
                     "generate": "generate_interval_min", "score": "score_interval_min",
                     "site": "site_interval_min", "snapshot": "snapshot_check_min"}

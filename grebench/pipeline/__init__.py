"""The pipeline: one stage protocol, one ordered list of stages, one runner.

``grebench run`` runs :data:`MAIN` (ingest → bench → score → boards → validate → panel → site); each single-stage
command runs its stage; each scheduler job is a list of stages (:data:`JOB_STAGES`).  The runner
(:func:`run_stages`) records failures, timings and skips, and owns the progress display.  Stages talk only through
the store.
"""

from grebench.pipeline._check import METRICS, SetupError, check_setup
from grebench.pipeline._runner import BaseStage, PipelineResult, RunOptions, Stage, StageContext, run_stages
from grebench.pipeline._sample import (
    AUTO_CPU_PAPERS,
    Sample,
    expected_minutes,
    measured_seconds_per_request,
    papers_size,
    parse_papers,
    sample_papers,
)
from grebench.pipeline._service import SnapshotStage, SubmissionsStage, requests_path, snapshot_day
from grebench.pipeline._stages import (
    MAIN,
    BenchStage,
    BoardsStage,
    IngestStage,
    PanelStage,
    ScoreStage,
    SiteStage,
    ValidateStage,
)

#: Every stage by name (the main job's, then the service's).
STAGES: dict[str, Stage] = {s.name: s for s in (*MAIN, SubmissionsStage(), SnapshotStage())}


def stages(*names: str) -> list[Stage]:
    """The named stages, in the order given."""
    unknown = [n for n in names if n not in STAGES]
    if unknown:
        raise ValueError(f"unknown stage(s) {unknown}: choose from {', '.join(STAGES)}")
    return [STAGES[n] for n in names]


__all__ = [
    "AUTO_CPU_PAPERS",
    "MAIN",
    "METRICS",
    "STAGES",
    "BaseStage",
    "BenchStage",
    "BoardsStage",
    "IngestStage",
    "PanelStage",
    "PipelineResult",
    "RunOptions",
    "Sample",
    "ScoreStage",
    "SetupError",
    "SiteStage",
    "SnapshotStage",
    "Stage",
    "StageContext",
    "SubmissionsStage",
    "ValidateStage",
    "check_setup",
    "expected_minutes",
    "measured_seconds_per_request",
    "papers_size",
    "parse_papers",
    "requests_path",
    "run_stages",
    "sample_papers",
    "snapshot_day",
    "stages",
]

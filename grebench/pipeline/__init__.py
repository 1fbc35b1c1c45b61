"""The pipeline: one stage protocol, the stages, the jobs as data, and the one function that runs a job.

``grebench run`` runs the job ``run`` (ingest → bench → score → boards → validate → panel → site); each
single-stage command runs a job of its stage; the scheduler runs its jobs by name (:data:`JOBS`).  Every one goes
through :func:`run_job` (check the setup, open the store, start the run, run the stages, finish the run), whose
runner (:func:`run_stages`) records failures, timings and skips.  Stages talk only through the store.
"""

from grebench.pipeline._check import SetupError, check_data_dir, check_setup
from grebench.pipeline._jobs import JOBS, SCHEDULED, Job, JobResult, job, run_job, venue_sources
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
from grebench.pipeline._stages import (
    STAGES,
    BenchStage,
    BoardsStage,
    IngestStage,
    PanelStage,
    ScoreStage,
    SiteStage,
    SnapshotStage,
    SubmissionsStage,
    ValidateStage,
    scored_setup,
    setup_in_force,
    stages,
)

#: The main job's stages, in order (``grebench run``).
MAIN: tuple[Stage, ...] = tuple(stages(*JOBS["run"].stages))


__all__ = [
    "AUTO_CPU_PAPERS",
    "JOBS",
    "MAIN",
    "SCHEDULED",
    "STAGES",
    "BaseStage",
    "BenchStage",
    "BoardsStage",
    "IngestStage",
    "Job",
    "JobResult",
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
    "check_data_dir",
    "check_setup",
    "expected_minutes",
    "job",
    "measured_seconds_per_request",
    "papers_size",
    "parse_papers",
    "run_job",
    "run_stages",
    "sample_papers",
    "scored_setup",
    "setup_in_force",
    "stages",
    "venue_sources",
]

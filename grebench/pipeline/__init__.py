"""The pipeline: one stage protocol, the stages, the jobs as data, and the one function that runs a job.

``grebench run`` runs the job ``run`` (ingest → bench → score → boards → validate → panel → site); each
single-stage command runs a job of its stage; the scheduler runs its jobs by name (:data:`JOBS`).  Every one goes
through :func:`run_job` (check the setup, open the store, start the run, run the stages, finish the run), whose
runner (:func:`run_stages`) records failures, timings and skips.  Stages talk only through the store.
:func:`rebuild_snapshot` makes a snapshot's published numbers again from its records and compares them.
"""

from grebench.pipeline._check import (
    SetupError,
    check_app_port,
    check_data_dir,
    check_executor,
    check_local_port,
    check_setup,
    check_site_dir,
)
from grebench.pipeline._jobs import JOBS, SCHEDULED, Job, JobResult, job, run_job, venue_sources
from grebench.pipeline._rebuild import rebuild_snapshot
from grebench.pipeline._resolve import ResolvedRun, RunSetup, resolve_run, resolve_setup, scored_setups
from grebench.pipeline._runner import (
    BaseStage,
    JobObserver,
    PipelineResult,
    RunOptions,
    Stage,
    StageContext,
    run_stages,
)
from grebench.pipeline._sample import (
    AUTO_CPU_PAPERS,
    Sample,
    cost_model,
    dtype_basis,
    expected_minutes,
    job_minutes,
    measured_throughput,
    outside_sample,
    papers_size,
    parse_papers,
    reuse_evidence,
    reuse_probe_records,
    scoring_factor,
    throughput_caveat,
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
    stages,
)
from grebench.pipeline._summaries import (
    BenchSummary,
    BoardsSummary,
    IngestSummary,
    PanelSummary,
    Published,
    ScoreSummary,
    SiteSummary,
    StageSummary,
    ValidateSummary,
    summary_of,
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
    "BenchSummary",
    "BoardsStage",
    "BoardsSummary",
    "IngestStage",
    "IngestSummary",
    "Job",
    "JobObserver",
    "JobResult",
    "PanelStage",
    "PanelSummary",
    "PipelineResult",
    "Published",
    "ResolvedRun",
    "RunOptions",
    "RunSetup",
    "Sample",
    "ScoreStage",
    "ScoreSummary",
    "SetupError",
    "SiteStage",
    "SiteSummary",
    "SnapshotStage",
    "Stage",
    "StageContext",
    "StageSummary",
    "SubmissionsStage",
    "ValidateStage",
    "ValidateSummary",
    "check_app_port",
    "check_data_dir",
    "check_executor",
    "check_local_port",
    "check_setup",
    "check_site_dir",
    "cost_model",
    "dtype_basis",
    "expected_minutes",
    "job",
    "job_minutes",
    "measured_throughput",
    "outside_sample",
    "papers_size",
    "parse_papers",
    "rebuild_snapshot",
    "resolve_run",
    "resolve_setup",
    "reuse_evidence",
    "reuse_probe_records",
    "run_job",
    "run_stages",
    "scored_setups",
    "scoring_factor",
    "stages",
    "summary_of",
    "throughput_caveat",
    "venue_sources",
]

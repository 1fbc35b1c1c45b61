"""What each stage returns, as typed contracts (issue 32).

A stage's summary is JSON (stored with the run and in ``stage_state``; printed by ``--json``), so it stays a dict at
run time; these ``TypedDict`` s say which keys it has and what they hold, and the commands read them through
:func:`summary_of`, so a key that a stage no longer returns is a type error in the command, not a ``KeyError`` in
front of a user.  ``total=False``: a stage that failed, was skipped or had nothing to do returns only some keys
(``error``, ``skipped``, ``unchanged``, ``nothing_to_score``, ...).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypedDict, cast, overload


class _Common(TypedDict, total=False):
    error: str                      # the stage raised (recorded on the run)
    skipped: Any                    # a skipped stage: "because [x] failed"; score: what a metric could not score
    unchanged: bool                 # its inputs did not change since its last complete run
    interrupted: str
    run_id: str                     # single-stage commands add the run


class IngestSummary(_Common, total=False):
    """``ingest``: what a source added, and the store's totals."""

    source: str
    papers_seen: int
    papers_added: int
    papers_updated: int
    reviews_added: int
    versions_added: int
    pdfs_extracted: int
    links: int
    failures: list[dict[str, Any]]
    papers_total: int
    reviews_total: int
    versions_total: int


class BenchSummary(_Common, total=False):
    """``bench``: the candidates' reviews (``generate``: sealed ones only)."""

    calls_made: int
    cached: int
    failed: int
    gave_up: int
    generations_total: int
    tokens_in: int
    tokens_out: int
    cost_usd: float
    skipped_papers: list[dict[str, Any]]
    skipped_generations: Any
    generations_written: int
    papers_eligible: int
    llm_controls: Any
    candidates: list[dict[str, Any]]
    sample: str | None
    resealed: int
    complete: bool
    validation: str                 # core | full: the control set the run wrote


class ScoreSummary(_Common, total=False):
    """``score``: pairs scored, with which estimator and preprocessor ids."""

    metrics: list[str]
    estimator: str
    preprocessor: str
    pairs_scored: int
    estimator_calls: int
    estimator_batches: int
    cache_hits: int
    attribution: dict[str, Any]  # per-line attribution: pairs, requests, cache_hits, rows (docs/scoring.md)
    nothing_to_score: bool
    sample: str | None
    proxy: dict[str, Any]
    validation: str                 # core | full: the control set and metrics the run scored
    held: list[dict[str, Any]]      # submitted models the information view held after this scoring (issue 48)


class BoardsSummary(_Common, total=False):
    """``boards``: boards and rows stored."""

    boards: int
    rows: int


class ValidateSummary(_Common, total=False):
    """``validate``: the metric's validation for the run's scored setup."""

    estimator: str
    preprocessor: str
    metrics: list[str]
    rows: list[dict[str, Any]]
    agreement: list[dict[str, Any]]
    nothing_to_validate: str
    validation: str                 # core | full | partial: what the report tested
    controls_not_tested: list[str]
    metrics_not_tested: list[str]


class PanelSummary(_Common, total=False):
    """``panel`` (``exam``, ``judge``): the exam, the ranking, the agreement with GEM-S, per venue-year."""

    venues: list[str]
    exam: list[dict[str, Any]]
    rankings: list[dict[str, Any]]
    agreement: list[dict[str, Any]]
    qualified: list[Any]
    unjudged: list[Any]
    votes: int
    votes_total: int
    machine_metrics: int
    gem_metric: str | None
    verdicts: int
    flagged: int
    debated: int
    skipped_venues: list[str]
    calls_made: int
    estimator_calls: int
    cached: int


class SiteSummary(_Common, total=False):
    """``site``: the static site built and the tables exported for the app."""

    out: str
    pages: int
    boards: int
    models: int
    papers: int
    leaderboard_json_sha256: str
    exported_tables: int
    version: str | None  # the board version the site shows (new when the boards changed)
    versions: int


StageName = Literal["ingest", "bench", "score", "boards", "validate", "panel", "site"]


@overload
def summary_of(stages: Mapping[str, Any], name: Literal["ingest"]) -> IngestSummary: ...
@overload
def summary_of(stages: Mapping[str, Any], name: Literal["bench"]) -> BenchSummary: ...
@overload
def summary_of(stages: Mapping[str, Any], name: Literal["score"]) -> ScoreSummary: ...
@overload
def summary_of(stages: Mapping[str, Any], name: Literal["boards"]) -> BoardsSummary: ...
@overload
def summary_of(stages: Mapping[str, Any], name: Literal["validate"]) -> ValidateSummary: ...
@overload
def summary_of(stages: Mapping[str, Any], name: Literal["panel"]) -> PanelSummary: ...
@overload
def summary_of(stages: Mapping[str, Any], name: Literal["site"]) -> SiteSummary: ...


def summary_of(stages: Mapping[str, Any], name: StageName) -> Any:
    """The summary of stage ``name`` in a job's summaries by stage (empty when the stage did not run), typed."""
    return cast(Any, dict(stages.get(name) or {}))

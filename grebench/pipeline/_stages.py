"""Every stage of the pipeline: the main job's, in order, and the service's (submissions, snapshots).

Each stage is a short adapter from :class:`StageContext` to the function of the layer that does the work; the jobs
that run them are data (:data:`grebench.pipeline.JOBS`).  Stages talk only through the store.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from grebench.pipeline._check import SetupError, unusable_dir
from grebench.pipeline._runner import BaseStage, Stage, StageContext, StageFailure
from grebench.registry import Registry

if TYPE_CHECKING:
    from grebench.ingest import IngestJson
    from grebench.panel import PanelRun
    from grebench.scoring import ValidationRow
    from grebench.settings import StageInputs
    from grebench.store import SnapshotsCut
    from grebench.submissions import QueuePass


class IngestStage(BaseStage):
    """Papers and reviews from a source (``options.source``) into the store; idempotent upserts."""

    name = "ingest"
    description = "papers and reviews from the bundled sample, an archive or OpenReview; PDFs to text"

    def subject(self, ctx: StageContext) -> str | None:
        return ctx.options.source

    def halts_on_failure(self, ctx: StageContext) -> bool:
        """A failed ingest that left the store without any paper ends the job: nothing after it has input."""
        return not ctx.store.scalar("SELECT count(*) FROM papers")

    def run(self, ctx: StageContext) -> IngestJson:
        from grebench.ingest import resolve_source, run_ingest
        from grebench.scoring import EstimatorHandle, LMAbstractReader

        source = resolve_source(ctx.options.source, ctx.settings)
        spec = ctx.settings.ingest.link_estimator.strip()  # the LM view of the abstracts that linking reads
        abstracts = LMAbstractReader(ctx.store, EstimatorHandle(spec, ctx.settings), ctx.progress) if spec else None
        with ctx.progress.task(f"ingest {ctx.options.source}", ctx.options.limit, "papers") as task:
            summary = run_ingest(source, ctx.store, ctx.settings, ctx.run_id, limit=ctx.options.limit,
                                 on_item=lambda _paper: task.advance(),
                                 abstracts=abstracts)
        return summary.as_json(ctx.store)


class BenchStage(BaseStage):
    """Candidate reviews: the human baseline, the controls, LLM candidates (cached calls; resumable)."""

    name = "bench"
    description = "candidate reviews: LLMs, the human baseline, controls"

    def needs_run(self, ctx: StageContext) -> bool:
        return self.draws_sample(ctx)

    def draws_sample(self, ctx: StageContext) -> bool:
        return ctx.options.bench_scope != "unreviewed"  # the generate job writes sealed reviews of unreviewed papers

    def check(self, ctx: StageContext, earlier: Sequence[str]) -> None:
        """An unknown ``--candidate``, a ``[[candidates]]`` table that does not parse or a name taken by imported
        reviews is refused before the sample is drawn (drawing records it) or any candidate is written."""
        from grebench.bench import CandidateError, check_candidates

        try:
            check_candidates(ctx.store, ctx.settings, ctx.options.candidates)
        except (CandidateError, ValueError) as exc:
            raise SetupError(f"--candidate: {exc}" if ctx.options.candidates else str(exc)) from None

    def run(self, ctx: StageContext) -> dict[str, Any]:
        from grebench.bench import generate_unreviewed, reseal, run_bench

        resealed = reseal(ctx.store)
        if not self.draws_sample(ctx):
            return {**generate_unreviewed(ctx.store, ctx.settings, ctx.run_id), "resealed": resealed}
        sample = ctx.resolved.sample
        summary = run_bench(ctx.store, ctx.settings, ctx.run_id, list(ctx.options.candidates) or None,
                            progress=ctx.progress, paper_ids=sample.paper_ids, controls=ctx.resolved.setup.controls)
        summary["sample"] = sample.description if sample.sampled else None
        summary["validation"] = ctx.resolved.setup.validation
        return {**summary, "resealed": resealed, "complete": not summary["failed"]}


class ScoreStage(BaseStage):
    """Judgment lines and GEM / GEM-S of every stored generation against its references (cached)."""

    name = "score"
    description = "judgment lines, GEM / GEM-S through an estimator"

    def needs_run(self, ctx: StageContext) -> bool:
        return True

    def draws_sample(self, ctx: StageContext) -> bool:
        return True

    def run(self, ctx: StageContext) -> dict[str, Any]:
        from grebench.pipeline._resolve import record_scored
        from grebench.scoring import ScoredSetup, resolve_preprocessor, run_scoring

        run = ctx.resolved
        papers, metrics = run.paper_ids, list(run.metrics)
        preprocessor = resolve_preprocessor(run.preprocessor, ctx.settings, ctx.store)  # built once, for both
        proxy_summary = None
        if run.setup.proxy and Registry.split(run.setup.proxy)[0] != Registry.split(run.estimator)[0]:
            # the fast proxy first (seconds), on the same pairs: the main estimator's scores are then the latest
            proxy_summary = run_scoring(ctx.store, ctx.settings, ctx.run_id, metrics, handle=run.proxy_handle,
                                        preprocessor=preprocessor, progress=ctx.progress, paper_ids=papers,
                                        controls=run.setup.controls,
                                        label=f"score (fast proxy {Registry.split(run.setup.proxy)[0]})")
        summary = run_scoring(ctx.store, ctx.settings, ctx.run_id, metrics, handle=run.estimator_handle,
                              preprocessor=preprocessor, progress=ctx.progress, paper_ids=papers,
                              controls=run.setup.controls)
        summary["validation"] = run.setup.validation
        summary["sample"] = run.sample.description if run.sample.sampled else None
        self._scored_something(ctx, summary)
        if not summary.get("nothing_to_score"):  # with nothing to score no estimator was made: no id to record
            proxy = None
            if proxy_summary is not None:
                proxy = ScoredSetup(run.setup.proxy, run.preprocessor, proxy_summary["estimator"],
                                    proxy_summary["preprocessor"])
                record_scored(ctx.store, proxy, ctx.run_id, role="proxy")
            scored = ScoredSetup(run.estimator, run.preprocessor, summary["estimator"], summary["preprocessor"])
            record_scored(ctx.store, scored, ctx.run_id)  # validate and the panel read it: run.scored_setup(store)
        if proxy_summary is not None:
            summary["proxy"] = {k: proxy_summary.get(k) for k in ("estimator", "preprocessor", "pairs_scored",
                                                                  "estimator_calls", "cache_hits",
                                                                  "attribution")}
        # scores changed: the information view reads every submitted model's again, and a flag holds it (an approved
        # one loses its vouched cutoff) before the boards are computed (issue 48)
        from grebench.submissions import recheck_held

        held = recheck_held(ctx.store)
        if held:
            summary["held"] = held
        return summary


    def _scored_something(self, ctx: StageContext, summary: Mapping[str, Any]) -> None:
        """Raise :class:`StageFailure` when the sample has no stored score of the run's metrics with this estimator
        (a rerun with nothing new has its earlier scores): a run that scores nothing is no board, and says why.  A
        sample with nothing to score (no paper with enough reviews) fails only where the job asks for scores."""
        from grebench.bench import MIN_REVIEWS
        from grebench.scoring import RAW_PREPROCESSOR

        run = ctx.resolved
        if summary.get("nothing_to_score"):
            if ctx.options.require_scores:
                raise StageFailure("nothing to score: no candidate review of the sample's papers is stored (run "
                                   f"`grebench bench` first; a paper needs {MIN_REVIEWS} official reviews for a human "
                                   "baseline and its references)")
            return
        papers = run.paper_ids
        found = ctx.store.scalar(
            "SELECT count(*) FROM scores WHERE metric IN (SELECT unnest(?::VARCHAR[])) AND estimator = ? "
            "AND preprocessor IN (?, ?)" + (" AND paper_id IN (SELECT unnest(?::VARCHAR[]))" if papers else ""),
            [list(run.metrics), summary["estimator"], summary["preprocessor"], RAW_PREPROCESSOR]
            + ([list(papers)] if papers else []))
        if found:
            return
        why = "; ".join(f"{s['metric']}: {s['count']} {s['what']} skipped ({s['reason']})" for s in summary["skipped"])
        from grebench.scoring import METRICS, metric

        abstractless = any(s["metric"] in METRICS and metric(s["metric"]).needs_abstract for s in summary["skipped"])
        hint = " (papers without abstracts get GEM: run with --metric gem)" if abstractless else ""
        raise StageFailure(f"nothing scored with {', '.join(run.metrics)}: {why or 'no pair to score'}{hint}")


class BoardsStage(BaseStage):
    """Every leaderboard, computed once from the stored scores (bootstrap CIs) and stored for the readers."""

    name = "boards"
    requires = ("score",)
    description = "leaderboards with bootstrap CIs, stored for the site, the app and the CLI"

    @property
    def inputs(self) -> StageInputs:
        from grebench.scoring import BOARDS

        return BOARDS

    def fingerprint(self, ctx: StageContext) -> tuple[str, str] | None:
        from grebench.scoring import boards_fingerprint

        return "*", boards_fingerprint(ctx.store, ctx.settings)

    def intact(self, ctx: StageContext, summary: dict[str, Any]) -> bool:
        return int(ctx.store.scalar("SELECT count(*) FROM boards")) == int(summary.get("boards", -1))

    def run(self, ctx: StageContext) -> dict[str, Any]:
        from grebench.scoring import compute_boards

        return compute_boards(ctx.store, ctx.settings, ctx.progress)


class ValidateStage(BaseStage):
    """Cohen's d of every control against the human review, for the setup the run resolved; stored with the run."""

    name = "validate"
    requires = ("score",)
    description = "the metric's validation: does it penalise degradations and not reward manipulations?"

    @property
    def inputs(self) -> StageInputs:
        from grebench.scoring import VALIDATION_INPUTS

        return VALIDATION_INPUTS

    def needs_run(self, ctx: StageContext) -> bool:
        return True

    def _setup(self, ctx: StageContext) -> tuple[str, str, list[str]]:
        from grebench.scoring import RAW_PREPROCESSOR

        run = ctx.resolved
        scored = run.scored_setup(ctx.store)
        if scored is None:
            raise LookupError(f"no scores with estimator {run.estimator} and preprocessor {run.preprocessor}: "
                              "run `grebench score` first")
        estimator_id, preprocessor_id = scored.estimator_id, scored.preprocessor_id
        metrics = [m for m in run.metrics if ctx.store.scalar(
            "SELECT count(*) FROM scores WHERE metric = ? AND estimator = ? AND preprocessor IN (?, ?)",
            [m, estimator_id, preprocessor_id, RAW_PREPROCESSOR])]
        return estimator_id, preprocessor_id, metrics

    def check(self, ctx: StageContext, earlier: Sequence[str]) -> None:
        """Alone (``grebench validate``), the stage needs stored scores of the setup it resolves to: a store with
        none, or a named setup nothing was scored with, is refused before the run is recorded.  After a score
        stage in the same job the scores are that stage's to make."""
        if "score" in earlier:
            return
        if not ctx.store.scalar("SELECT count(*) FROM scores"):
            raise SetupError("no scores in the store: run `grebench score` first")
        run = ctx.resolved  # a reading job's run is resolved before its checks (check_stages)
        if run.scored_setup(ctx.store) is None:
            scored = ", ".join(f"{r['estimator_id']} ({r['preprocessor_id']})" for r in ctx.store.rows(
                "SELECT DISTINCT estimator_id, preprocessor_id FROM scored_setups ORDER BY ALL"))
            raise SetupError(f"no scores with estimator {run.estimator} and preprocessor {run.preprocessor}; "
                             f"scored setups: {scored or 'none'} (name one with --estimator / --preprocessor, or "
                             "run `grebench score` with this setup first)")

    def fingerprint(self, ctx: StageContext) -> tuple[str, str] | None:
        from grebench.scoring import validation_fingerprint

        try:
            est, prep, metrics = self._setup(ctx)
        except LookupError:
            return None
        proxy = self._proxy(ctx)
        return f"{est}|{prep}|{','.join(metrics)}", validation_fingerprint(ctx.store, ctx.settings, est, prep, metrics,
                                                                           proxy, self._abstracts(ctx))

    @staticmethod
    def _abstracts(ctx: StageContext) -> bool:
        """Whether any paper of the job's sample has an abstract (the report leaves out what needs one if none)."""
        from grebench.pipeline._resolve import abstract_counts

        return abstract_counts(ctx.store, ctx.resolved.sample)[1] > 0

    def _proxy(self, ctx: StageContext) -> str | None:
        """The estimator id of the fast proxy the report compares with (the job's: ``proxy_estimator`` resolved)."""
        proxy_setup = ctx.resolved.proxy_setup(ctx.store)
        return proxy_setup.estimator_id if proxy_setup else None

    def run(self, ctx: StageContext) -> dict[str, Any]:
        from grebench.scoring import estimator_agreement, store_report, validation_rows

        if not ctx.store.scalar("SELECT count(*) FROM scores"):  # an empty store (a first serve): nothing to check
            return {"rows": [], "agreement": [], "nothing_to_validate": "no scores in the store yet"}
        est, prep, metrics = self._setup(ctx)
        rows = validation_rows(ctx.store, est, prep, metrics, ctx.settings.scoring.bootstrap_samples, ctx.settings.seed)
        store_report(ctx.store, ctx.run_id, est, prep, rows)
        proxy = self._proxy(ctx)
        agreement = [a for m in metrics if (a := estimator_agreement(ctx.store, m, est, prep, proxy)) is not None]
        abstracts = self._abstracts(ctx)
        return {"estimator": est, "preprocessor": prep, "metrics": metrics, "rows": rows, "agreement": agreement,
                **untested(rows, llm_controls=bool(ctx.settings.bench.control_model), abstracts=abstracts)}


class Untested(TypedDict):
    """What a validation report did not test (:func:`untested`), and so which validation it is."""

    validation: str                 # core | full | partial
    controls_not_tested: list[str]
    metrics_not_tested: list[str]


def untested(rows: list[ValidationRow], llm_controls: bool = False, abstracts: bool = True) -> Untested:
    """What a validation report did not test: the default controls (those written by ``control_model`` only with
    ``llm_controls``) and metrics without a row (a core run scores the core controls with GEM-S only), and whether
    that makes it the core set or the full validation.  ``abstracts`` False (no paper of the sample has one): the
    controls and metrics that need an abstract could not be tested and are not counted as left out."""
    from grebench.bench import core_controls, default_controls
    from grebench.scoring import default_metrics, metric

    tested = {str(r["transformation"]).split(" (", 1)[0] for r in rows}
    metrics = {r["metric"] for r in rows}
    missing = [c for c in default_controls(llm=llm_controls, abstracts=abstracts) if c not in tested]
    core = bool(rows) and tested <= set(core_controls()) | set(core_controls(abstracts=False)) and bool(missing)
    return {"validation": "core" if core else "full" if not missing else "partial",
            "controls_not_tested": missing,
            "metrics_not_tested": [m for m in default_metrics() if m not in metrics
                                   and (abstracts or not metric(m).needs_abstract)]}


class PanelStage(BaseStage):
    """The Auto-PRE judge panel: exam, weighted pairwise votes, Bradley–Terry, agreement with GEM-S.

    It skips unchanged venue-years itself (per venue, with the same fingerprint helper as the runner).
    """

    name = "panel"
    description = "judge exam, pairwise votes of qualified judges, Bradley–Terry ranking, agreement with GEM-S"

    @property
    def inputs(self) -> StageInputs:
        from grebench.panel import PANEL_INPUTS

        return PANEL_INPUTS

    def needs_run(self, ctx: StageContext) -> bool:
        return True

    def check(self, ctx: StageContext, earlier: Sequence[str]) -> None:
        """An unknown ``--judge`` (or a ``[[judges]]`` table that does not parse) is refused before any judge is
        recorded or any stored exam is set aside; the judges are the job's, with its local judges (the setup
        ``run_job`` resolved before the checks; a reading job's run holds the same one)."""
        from grebench.panel import check_judges

        setup = ctx.setup if ctx.setup is not None else ctx.resolved.setup
        try:
            check_judges(ctx.settings, ctx.options.judges, local_judges=setup.local_judges)
        except ValueError as exc:
            raise SetupError(f"--judge: {exc}" if ctx.options.judges else str(exc)) from None

    def run(self, ctx: StageContext) -> PanelRun:
        from grebench.panel import is_unreachable, run_panel
        from grebench.scoring import gem_judge_metric, resolve_preprocessor

        run = ctx.resolved
        # the gem judge reads (and scores its exam texts with) the setup the stored scores were made with, on the
        # job's sample: both resolved once for the job; its parts are the job's (the estimator handle) or built here
        scored = run.scored_setup(ctx.store)
        metric = gem_judge_metric(ctx.store, scored)
        preprocessor = (resolve_preprocessor(scored.preprocessor_spec, ctx.settings, ctx.store)
                        if scored is not None and metric is not None else None)
        summary = run_panel(ctx.store, ctx.settings, ctx.run_id, setup=scored,
                            metric=metric, paper_ids=run.paper_ids,
                            judge_names=list(run.setup.judges) or None, progress=ctx.progress,
                            exam_only=run.setup.exam_only, bounded_exam=run.setup.core,
                            estimator=run.estimator_handle, preprocessor=preprocessor,
                            local_judges=run.setup.local_judges)
        # a judge that could not be examined (unreachable, or texts that could not be scored) is the job's failure:
        # the run's status says what the command's exit status says.  Not when it is another failure's consequence
        # (a score stage that failed leaves the gem judge nothing to read: said once), nor when nothing is scored
        # yet (a first serve cycle before any review is public: the gem judge has nothing to be examined on)
        said = bool(ctx.store.run_failures(ctx.run_id))
        nothing_scored = not ctx.store.scalar("SELECT count(*) FROM scores")
        for row in summary.get("exam", []):
            why = row.get("not_examined")
            if why and not said and (is_unreachable(why) or not nothing_scored):
                ctx.store.record_failure(ctx.run_id, self.name, f"{row['venue_id']}: judge {row['judge']}",
                                         f"not examined: {row['not_examined']}")
        return summary


class SiteStage(BaseStage):
    """The static site and the Parquet exports the app reads (both only read what earlier stages stored)."""

    name = "site"
    description = "static leaderboard site and the app's Parquet exports"

    @property
    def inputs(self) -> StageInputs:
        from grebench.site import SITE_INPUTS

        return SITE_INPUTS

    def _out(self, ctx: StageContext) -> Path:
        return Path(ctx.options.site_dir) if ctx.options.site_dir else ctx.settings.site_path

    def check(self, ctx: StageContext, earlier: Sequence[str]) -> None:
        """A folder the site cannot be built in (``--out`` or ``site_dir``) is refused before any stage runs."""
        why = unusable_dir(self._out(ctx))
        if why is not None:
            shown = "--out" if ctx.options.site_dir else "site_dir"
            raise SetupError(f"{shown} = {str(self._out(ctx))!r}: {why} (the site is built there)")

    def fingerprint(self, ctx: StageContext) -> tuple[str, str] | None:
        from grebench.site import site_fingerprint

        return str(self._out(ctx).resolve()), site_fingerprint(ctx.store, ctx.settings)

    def intact(self, ctx: StageContext, summary: dict[str, Any]) -> bool:
        from grebench.site import site_intact

        return site_intact(self._out(ctx), summary) and (ctx.settings.export_path / "papers.parquet").is_file()

    def run(self, ctx: StageContext) -> Mapping[str, Any]:
        """Build the site and the export; publish the boards as a version unless an earlier stage of this run
        failed (a failed run publishes no version: its boards may be stale or half made).  The export is written
        before the version is committed and put in place with the site, so a failure at any point (a full disk)
        leaves the previous site, export and versions as they were."""
        from grebench.site import build_site

        failed = sorted({f["stage"] for f in ctx.store.run_failures(ctx.run_id)})
        staged: list[Callable[[], dict[str, Path]]] = []
        summary = build_site(ctx.store, ctx.settings, self._out(ctx), publish=not failed,
                             before_swap=lambda: staged.append(ctx.store.stage_parquet(ctx.settings.export_path)))
        summary["out"] = str(self._out(ctx).resolve())
        summary["exported_tables"] = len(staged[0]())
        if failed:
            summary["not_published"] = f"no new board version: this run failed at [{'], ['.join(failed)}]"
            summary["complete"] = False  # the next run builds and publishes again, even with nothing changed
        return summary


class SubmissionsStage(BaseStage):
    """Accept queued submissions, generate their reviews on clean papers, close them; queued imports.

    What only the service has comes from ``ctx.services``: the submission ``queue``, the key ``vault`` and a
    ``resolver`` (tests pass a table so that no DNS query leaves the machine).
    """

    name = "submissions"
    description = "evaluate submitted model endpoints (pinned, key in memory only, deleted after); queued imports"

    def run(self, ctx: StageContext) -> QueuePass:
        from grebench.submissions import evaluate_queued

        return evaluate_queued(ctx.store, ctx.settings, ctx.run_id, ctx.services["queue"], ctx.services["vault"],
                               ctx.services.get("resolver"), ctx.progress)


class SnapshotStage(BaseStage):
    """Cut the yearly snapshot of each venue-year once its day has come (year after the venue), and requested ones."""

    name = "snapshot"
    description = "frozen per-venue-year snapshots (Parquet + manifest with SHA-256)"

    def __init__(self, today: date | None = None) -> None:
        self.today = today

    def run(self, ctx: StageContext) -> SnapshotsCut:
        from grebench.scoring import provenance
        from grebench.store import cut_due_snapshots
        from grebench.submissions import sync_log

        s = ctx.settings
        sync_log(ctx.store, ctx.services.get("queue"))  # the log a snapshot carries says each entry's status now
        return cut_due_snapshots(ctx.store, ctx.run_id, s.snapshots_path, s.snapshot_requests_path,
                                 s.service.snapshot_date, self.today, describe=provenance)


#: Every stage by name, in the order of the main job, then the service's.
STAGES: dict[str, Stage] = {s.name: s for s in (
    IngestStage(), BenchStage(), ScoreStage(), BoardsStage(), ValidateStage(), PanelStage(), SiteStage(),
    SubmissionsStage(), SnapshotStage())}


def stages(*names: str) -> list[Stage]:
    """The named stages, in the order given."""
    unknown = [n for n in names if n not in STAGES]
    if unknown:
        raise ValueError(f"unknown stage(s) {unknown}: choose from {', '.join(STAGES)}")
    return [STAGES[n] for n in names]

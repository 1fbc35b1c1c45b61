"""The stages of the main job, in order, and the service stages the scheduler runs besides them.

``grebench run`` runs :data:`MAIN` in order; each single-stage command (``grebench ingest``, ``bench``, ``score``,
``validate``, ``exam``/``judge``, ``site build``) runs its stage through the same runner; every scheduler job is a
list of stage names (``poll`` = ingest per venue, ``generate`` = bench on unreviewed papers, ``score`` = bench →
score → boards → validate → panel, ``site``, ``queue``, ``snapshot``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from grebench.pipeline._runner import BaseStage, Stage, StageContext


class IngestStage(BaseStage):
    """Papers and reviews from a source (``options.source``) into the store; idempotent upserts."""

    name = "ingest"
    description = "papers and reviews from the bundled sample, an archive or OpenReview; PDFs to text"

    def subject(self, ctx: StageContext) -> str | None:
        return ctx.options.source

    def run(self, ctx: StageContext) -> dict[str, Any]:
        from grebench.ingest import resolve_source, run_ingest

        source = resolve_source(ctx.options.source, ctx.settings)
        with ctx.progress.task(f"ingest {ctx.options.source}", ctx.options.limit, "papers") as task:
            summary = run_ingest(source, ctx.store, ctx.settings, ctx.run_id, limit=ctx.options.limit,
                                 on_item=lambda _paper: task.advance())
        return summary.as_json(ctx.store)


class BenchStage(BaseStage):
    """Candidate reviews: the human baseline, the controls, LLM candidates (cached calls; resumable)."""

    name = "bench"
    description = "candidate reviews: LLMs, the human baseline, controls"

    def run(self, ctx: StageContext) -> dict[str, Any]:
        from grebench.bench import generate_unreviewed, reseal, run_bench

        resealed = reseal(ctx.store)
        if ctx.options.bench_scope == "unreviewed":  # the scheduler's generate job: sealed generations only
            return {**generate_unreviewed(ctx.store, ctx.settings, ctx.run_id), "resealed": resealed}
        from grebench.bench import make_splits
        from grebench.pipeline._sample import sample_papers

        make_splits(ctx.store, int(ctx.settings.seed))  # the sample is drawn from papers with a human baseline
        sample = sample_papers(ctx.store, ctx.settings, ctx.options)
        summary = run_bench(ctx.store, ctx.settings, ctx.run_id, list(ctx.options.candidates) or None,
                            progress=ctx.progress, paper_ids=None if sample is None else sample.paper_ids)
        summary["sample"] = None if sample is None else sample.description
        return {**summary, "resealed": resealed, "complete": not summary["failed"]}


class ScoreStage(BaseStage):
    """Judgment lines and GEM / GEM-S of every stored generation against its references (cached)."""

    name = "score"
    description = "judgment lines, GEM / GEM-S through an estimator"

    def run(self, ctx: StageContext) -> dict[str, Any]:
        from grebench.pipeline._sample import sample_papers
        from grebench.scoring import run_scoring

        o = ctx.options
        sample = sample_papers(ctx.store, ctx.settings, o)
        papers = None if sample is None else sample.paper_ids
        main, proxy = o.estimator_spec(ctx.settings), str(ctx.settings.proxy_estimator or "").strip()
        proxy_summary = None
        if proxy and proxy.split(":", 1)[0] != main.split(":", 1)[0]:
            # the fast proxy first (seconds), on the same pairs: the main estimator's scores are then the latest
            proxy_summary = run_scoring(ctx.store, ctx.settings, ctx.run_id, list(o.metrics), proxy,
                                        o.preprocessor_spec(ctx.settings), progress=ctx.progress, paper_ids=papers)
        summary = run_scoring(ctx.store, ctx.settings, ctx.run_id, list(o.metrics), main,
                              o.preprocessor_spec(ctx.settings), progress=ctx.progress, paper_ids=papers)
        summary["sample"] = None if sample is None else sample.description
        if proxy_summary is not None:
            summary["proxy"] = {k: proxy_summary.get(k) for k in ("estimator", "preprocessor", "pairs_scored",
                                                                  "estimator_calls", "cache_hits")}
        return summary


class BoardsStage(BaseStage):
    """Every leaderboard, computed once from the stored scores (bootstrap CIs) and stored for the readers."""

    name = "boards"
    requires = ("score",)
    description = "leaderboards with bootstrap CIs, stored for the site, the app and the CLI"

    def fingerprint(self, ctx: StageContext) -> tuple[str, str] | None:
        from grebench.scoring import boards_fingerprint

        return "*", boards_fingerprint(ctx.store, ctx.settings)

    def intact(self, ctx: StageContext, summary: dict[str, Any]) -> bool:
        return int(ctx.store.scalar("SELECT count(*) FROM boards")) == int(summary.get("boards", -1))

    def run(self, ctx: StageContext) -> dict[str, Any]:
        from grebench.scoring import compute_boards

        return compute_boards(ctx.store, ctx.settings, ctx.progress)


class ValidateStage(BaseStage):
    """Cohen's d of every control against the human review, for the setup just scored; stored with the run."""

    name = "validate"
    requires = ("score",)
    description = "the metric's validation: does it penalise degradations and not reward manipulations?"

    def _setup(self, ctx: StageContext) -> tuple[str, str, list[str]]:
        from grebench.scoring import latest_setup

        o = ctx.options
        scored = ctx.results.get("score", {})
        if scored.get("estimator") and scored.get("preprocessor") and "error" not in scored:
            estimator_id, preprocessor_id = scored["estimator"], scored["preprocessor"]  # what this run scored with
        else:
            estimator_id, preprocessor_id = latest_setup(ctx.store, o.estimator_spec(ctx.settings),
                                                         o.preprocessor_spec(ctx.settings))
        metrics = [m for m in o.metrics if ctx.store.scalar(
            "SELECT count(*) FROM scores WHERE metric = ? AND estimator = ? AND preprocessor IN (?, 'none')",
            [m, estimator_id, preprocessor_id])]
        return estimator_id, preprocessor_id, metrics

    def fingerprint(self, ctx: StageContext) -> tuple[str, str] | None:
        from grebench.scoring import validation_fingerprint

        try:
            est, prep, metrics = self._setup(ctx)
        except LookupError:
            return None
        return f"{est}|{prep}|{','.join(metrics)}", validation_fingerprint(ctx.store, ctx.settings, est, prep, metrics)

    def run(self, ctx: StageContext) -> dict[str, Any]:
        from grebench.scoring import estimator_agreement, store_report, validation_rows

        est, prep, metrics = self._setup(ctx)
        rows = validation_rows(ctx.store, est, prep, metrics, int(ctx.settings.bootstrap_samples),
                               int(ctx.settings.seed))
        store_report(ctx.store, ctx.run_id, est, prep, rows)
        proxy = str(ctx.settings.proxy_estimator or "").strip()
        agreement = [a for m in metrics if (a := estimator_agreement(ctx.store, m, est, prep, proxy)) is not None]
        return {"estimator": est, "preprocessor": prep, "metrics": metrics, "rows": rows, "agreement": agreement}


class PanelStage(BaseStage):
    """The Auto-PRE judge panel: exam, weighted pairwise votes, Bradley–Terry, agreement with GEM-S.

    It skips unchanged venue-years itself (per venue, with the same fingerprint helper as the runner).
    """

    name = "panel"
    description = "judge exam, pairwise votes of qualified judges, Bradley–Terry ranking, agreement with GEM-S"

    def run(self, ctx: StageContext) -> dict[str, Any]:
        from grebench.scoring.panel import run_panel

        o = ctx.options
        return run_panel(ctx.store, ctx.settings, ctx.run_id, judge_names=list(o.judges) or None,
                         progress=ctx.progress, exam_only=o.exam_only, estimator_spec=o.estimator_spec(ctx.settings),
                         preprocessor_spec=o.preprocessor_spec(ctx.settings))


class SiteStage(BaseStage):
    """The static site and the Parquet exports the app reads (both only read what earlier stages stored)."""

    name = "site"
    description = "static leaderboard site and the app's Parquet exports"

    def _out(self, ctx: StageContext) -> Path:
        return Path(ctx.options.site_dir) if ctx.options.site_dir else ctx.settings.site_path

    def fingerprint(self, ctx: StageContext) -> tuple[str, str] | None:
        from grebench.site import site_fingerprint

        return str(self._out(ctx).resolve()), site_fingerprint(ctx.store, ctx.settings)

    def intact(self, ctx: StageContext, summary: dict[str, Any]) -> bool:
        from grebench.site import site_intact

        return site_intact(self._out(ctx), summary) and (ctx.settings.data_path / "export" / "papers.parquet").is_file()

    def run(self, ctx: StageContext) -> dict[str, Any]:
        from grebench.site import build_site

        summary = build_site(ctx.store, ctx.settings, self._out(ctx))
        summary["out"] = str(self._out(ctx).resolve())
        summary["exported_tables"] = len(ctx.store.export_parquet(ctx.settings.data_path / "export"))
        return summary


#: The main job, in order (``grebench run``).
MAIN: tuple[Stage, ...] = (IngestStage(), BenchStage(), ScoreStage(), BoardsStage(), ValidateStage(), PanelStage(),
                           SiteStage())

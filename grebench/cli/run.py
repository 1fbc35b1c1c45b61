"""`grebench run`: the main job (:data:`grebench.pipeline.JOBS` ``run``) through :func:`grebench.pipeline.run_job`.

Every stage is idempotent and keeps its progress in the store, so a rerun (or a run after a crash) repeats no
LLM or estimator call. A stage that fails is recorded on the run and the later stages still run on what is stored.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from grebench.cli._common import (
    default_metrics,
    emit_json,
    metric_choice,
    progress_display,
    source_help,
    stoppable,
    writer_store,
)
from grebench.cli._options import setting_option, settings_options
from grebench.cli._plan import plan_text
from grebench.pipeline import PanelSummary, ResolvedRun
from grebench.settings import Settings
from grebench.site import board_text
from grebench.store import Store


def _leaderboards(store: Store, run: ResolvedRun | None) -> list[dict[str, Any]]:
    """The stored boards of the setup this run scored (the resolved run's, as its score stage recorded it), one per
    metric in force and venue-year."""
    from grebench.scoring import metric_preprocessor, stored_boards
    from grebench.site import Labels

    scored = None if run is None else run.scored_setup(store)
    if run is None or scored is None:
        return []
    estimator, preprocessor = scored.estimator_id, scored.preprocessor_id
    out = []
    labels = Labels.load(store)
    for metric in run.metrics:
        for board in stored_boards(store, metric=metric, estimator=estimator,
                                   preprocessor=metric_preprocessor(metric, preprocessor)):
            board.pop("sample_json", None)
            out.append(labels.annotate(board))
    return out


def _print(summary: dict[str, Any]) -> None:
    from grebench.cli.validate import print_agreement, print_report, print_untested
    from grebench.pipeline import summary_of

    stages = summary["stages"]
    ingest = summary_of(stages, "ingest")
    if ingest.ran:  # a summary with its totals: not an error, a skip or a stop
        click.echo(f"papers: {ingest.papers_total} ({ingest.papers_added} new), reviews: "
                   f"{ingest.reviews_total} ({ingest.reviews_added} new)")
    bench = summary_of(stages, "bench")
    if bench.ran:
        click.echo(f"candidates: {len(bench.candidates)}; generations: {bench.generations_total}; LLM calls "
                   f"made {bench.calls_made}, cached {bench.cached}, failed {bench.failed}")
    score = summary_of(stages, "score")
    if score.ran:
        click.echo(f"pairs scored: {score.pairs_scored}; estimator calls {score.estimator_calls}, "
                   f"cache hits {score.cache_hits} ({score.estimator}, {score.preprocessor})")
    for board in summary["leaderboards"]:
        click.echo("\n" + board_text(board))
    validation = summary_of(stages, "validate")
    if validation.rows:
        click.echo("")
        print_report(validation.rows, validation.estimator, validation.preprocessor)
        print_untested(validation)
        print_agreement(validation.agreement)
    _print_panel(summary_of(stages, "panel"))
    site = summary_of(stages, "site")
    if site.out:
        click.echo(f"\nsite: {site.out}/index.html ({site.pages} pages"
                   f"{', unchanged' if site.unchanged else ''}"
                   f"{', board version ' + str(site.version) if site.version else ''})")
        if site.not_published:
            click.echo(f"site: {site.not_published}", err=True)
    click.echo("\nseconds per stage: " + ", ".join(f"{k} {v:.1f}" for k, v in summary["seconds"].items()))
    for failure in summary["failures"][:10]:
        item = f"{failure['item']}: " if failure["item"] else ""
        click.echo(f"failed: [{failure['stage']}] {item}{failure['reason']}", err=True)
    for name, needed in summary.get("skipped", {}).items():  # not a failure of its own: said once, above
        click.echo(f"skipped: [{name}] because [{needed}] failed", err=True)


def _print_panel(panel: PanelSummary) -> None:
    """The judge exam, the panel's Bradley–Terry ranking over qualified judges and its agreement with GEM-S."""
    if not panel.exam:
        return
    from grebench.cli.exam import exam_tables, print_exam
    from grebench.cli.judge import print_panel

    click.echo("")
    print_exam(exam_tables(panel.exam))
    print_panel(panel)


@click.command("run")
@click.option("--source", default="bundled", show_default=True, help="Paper source: " + source_help() + ".")
@setting_option("estimator")
@setting_option("preprocessor")
@click.option("--metric", "metrics", multiple=True, type=metric_choice(),
              help="Metrics to score (repeatable; default: GEM-S with the core validation, every registered metric "
                   f"({', '.join(default_metrics())}) with the full one).")
@setting_option("papers")
@setting_option("validation")
@setting_option("executor", into_settings=True)
@click.option("--json", "as_json", is_flag=True, help="Print the final summary as JSON.")
@settings_options
@click.pass_obj
def command(settings: Settings, source: str, estimator: str | None, preprocessor: str | None,
            metrics: tuple[str, ...], papers: str | None, validation: str | None, as_json: bool) -> None:
    """Run the main job on a source (default: the bundled ICLR 2026 sample) and print the leaderboard."""
    from grebench.pipeline import JobObserver, JobResult, RunOptions, RunSetup, SetupError, run_job
    from grebench.runtime import Neighbours

    neighbours = Neighbours()  # other processes' share of the cores from here to the plan (its busy note)
    opts = RunOptions(source=source, estimator=estimator, preprocessor=preprocessor, metrics=tuple(metrics),
                      papers=papers, calibrate=True, validation=validation, require_scores=True)
    summary: dict[str, Any] = {"source": source, "metrics": list(metrics)}

    class Observer(JobObserver):
        """The plan line before work, a marker per stage, and the summary stored with the run."""

        def checked(self, setup: RunSetup) -> None:
            if not as_json:
                click.echo(plan_text(settings, setup, neighbours=neighbours), err=True)

        def resolved(self, run: ResolvedRun) -> None:
            if run.setup.abstracts and not as_json:  # the plan, as the papers turned out (known after ingest)
                click.echo(f"plan: {run.setup.abstracts}", err=True)

        def stage(self, name: str) -> None:
            if not as_json:
                click.echo(f"[{name}]", err=True)

        def summary(self, store: Store, result: Any) -> dict[str, Any] | None:
            done: JobResult = result
            summary.update(stages=done.result.stages, seconds=done.result.seconds, skipped=done.result.skipped)
            if done.run is not None:  # the metrics the run resolved (GEM-S alone with the core validation)
                summary["resolved"] = done.run.as_json(store)
                summary["metrics"] = list(done.run.metrics)
            summary["leaderboards"] = _leaderboards(store, done.run)
            summary["failures"] = done.failures
            summary["run_id"] = done.run_id
            return {k: v for k, v in summary.items() if k != "leaderboards"}

    run_args = {"source": source, "estimator": estimator, "preprocessor": preprocessor, "metrics": list(metrics),
                "papers": papers, "validation": validation}
    try:
        with stoppable(settings.service):
            done = run_job(settings, "run", opts, open_store=lambda: writer_store(settings), args=run_args,
                           progress=progress_display(as_json), observer=Observer())
    except SetupError as exc:  # before the plan and the store: a mistake costs nothing and is said once
        raise click.UsageError(str(exc)) from None
    status = done.status
    if as_json:
        emit_json(summary)
    else:
        _print(summary)
    if status != "ok":
        sys.exit(1)

"""`grebench score`: GEM / GEM-S scores of every stored generation against its references."""

from __future__ import annotations

import click

from grebench.cli._common import default_metrics, emit_json, exit_if_failed, metric_choice, run_stage
from grebench.cli._options import setting_option, settings_options
from grebench.pipeline import RunOptions, summary_of
from grebench.settings import Settings


@click.command("score")
@click.option("--metric", "metrics", multiple=True, type=metric_choice(),
              help=f"Metric to compute (repeatable; default GEM-S with the core validation, "
                   f"{' and '.join(default_metrics())} with the full one).")
@setting_option("estimator")
@setting_option("preprocessor")
@setting_option("papers")
@setting_option("validation")
@setting_option("executor", into_settings=True)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
@settings_options
@click.pass_obj
def command(settings: Settings, metrics: tuple[str, ...], estimator: str | None, preprocessor: str | None,
            papers: str | None, validation: str | None, as_json: bool) -> None:
    """Score candidates' reviews with GEM / GEM-S; cached, so a rerun with nothing new makes no estimator call.

    A ranking uses one preprocessor for candidates and references alike: `imported` refuses to run when a
    reference has no imported judgment lines, and scores only the candidates whose text came with them.
    """
    options = RunOptions(estimator=estimator, preprocessor=preprocessor, metrics=tuple(metrics), papers=papers,
                         validation=validation, require_scores=True)
    stages, _run_id, status = run_stage(
        settings, "score", ["score", "boards"], options, as_json,
        {"metrics": list(metrics), "estimator": estimator, "preprocessor": preprocessor, "papers": papers,
         "validation": validation})
    score = summary_of(stages, "score")
    if score.error is not None:
        raise click.ClickException(score.error)
    if as_json:
        emit_json({**score.as_json(), "boards": summary_of(stages, "boards").boards, "status": status})
        exit_if_failed(stages, status)
        return
    click.echo(f"scored {score.pairs_scored} pairs ({', '.join(score.metrics)}) with {score.estimator} "
               f"on {score.preprocessor} lines: {score.estimator_calls} estimator calls, "
               f"{score.cache_hits} cache hits")
    attribution = score.attribution
    if attribution is not None and attribution.get("pairs"):
        click.echo(f"attributed {attribution['pairs']} pairs line by line: {attribution['requests']} of the "
                   "estimator calls (leave-one-out; the attribution setting)")
    for item in score.skips:
        click.echo(f"skipped {item['count']} {item['what']} for {item['metric']}: {item['reason']}", err=True)
    exit_if_failed(stages, status)

"""`grebench validate`: Cohen's d of every transformation against the human candidate, per metric."""

from __future__ import annotations

import click

from grebench.cli._common import emit_json, writer_store
from grebench.cli._options import settings_options
from grebench.settings import Settings

METRICS = ("gem", "gem-s", "gem-s-assw", "gem-raw")


def print_report(rows: list[dict], estimator: str, preprocessor: str) -> None:
    """The validation table as text."""
    click.echo(f"validation (estimator {estimator}, preprocessor {preprocessor})")
    click.echo(f"{'metric':<11}{'transformation':<22}{'kind':<13}{'d':>8}  {'95% CI':<18}{'p':>9}{'papers':>7}  verdict"
               "  (paper's d)")
    for r in rows:
        ci = f"[{r['ci_low']:+.3f}, {r['ci_high']:+.3f}]"
        paper = f"  ({r['paper_d']:+.3f})" if r.get("paper_d") is not None else ""
        click.echo(f"{r['metric']:<11}{r['transformation']:<22}{r['kind']:<13}{r['d']:>+8.3f}  {ci:<18}"
                   f"{r['p']:>9.2g}{r['n_papers']:>7}  {r['verdict']}{paper}")


@click.command("validate")
@click.option("--metric", "metrics", multiple=True, type=click.Choice(METRICS), help="Metrics (default: all scored).")
@click.option("--estimator", default=None, help="Estimator spec or id (default: the latest scored).")
@click.option("--preprocessor", default=None, help="Preprocessor (default: the latest scored).")
@click.option("--json", "as_json", is_flag=True, help="Print {estimator, preprocessor, rows: [...]} as JSON.")
@settings_options
@click.pass_obj
def command(settings: Settings, metrics: tuple[str, ...], estimator: str | None, preprocessor: str | None,
            as_json: bool) -> None:
    """Check that the metric penalises degradations and does not reward manipulations; store the report."""
    from grebench.scoring._validate import latest_setup, store_report, validation_rows

    with writer_store(settings) as store:
        try:
            estimator_id, preprocessor_id = latest_setup(store, estimator, preprocessor)
        except LookupError as exc:
            raise click.ClickException(str(exc)) from None
        chosen = list(metrics) or [m for m in METRICS if store.scalar(
            "SELECT count(*) FROM scores WHERE metric = ? AND estimator = ? AND preprocessor = ?",
            [m, estimator_id, preprocessor_id])]
        rows = validation_rows(store, estimator_id, preprocessor_id, chosen, settings.bootstrap_samples, settings.seed)
        run_id = store.start_run("validate", {"estimator": estimator_id, "preprocessor": preprocessor_id})
        store_report(store, run_id, estimator_id, preprocessor_id, rows)
        store.finish_run(run_id, {"rows": len(rows)})
    if as_json:
        emit_json({"estimator": estimator_id, "preprocessor": preprocessor_id, "run_id": run_id, "rows": rows})
    else:
        print_report(rows, estimator_id, preprocessor_id)

"""`grebench validate`: Cohen's d of every transformation against the human candidate, per metric."""

from __future__ import annotations

import click

from grebench.cli._common import emit_json, metric_choice, run_stage
from grebench.cli._options import setting_option, settings_options
from grebench.pipeline import RunOptions, ValidateSummary, summary_of
from grebench.scoring import EstimatorAgreement, ValidationRow, format_p, papers_to_decide
from grebench.settings import Settings


def print_report(rows: list[ValidationRow], estimator: str, preprocessor: str) -> None:
    """The validation table as text: every control's d, its 95% CI, the verdict and the expected direction."""
    click.echo(f"validation (estimator {estimator}, preprocessor {preprocessor}); Cohen's d vs the human review")
    width = max([24, *(len(str(r["transformation"])) + 2 for r in rows)])
    click.echo(f"{'metric':<11}{'control':<{width}}{'kind':<13}{'d':>8}  {'95% CI':<18}{'p':>9}{'papers':>7}  "
               f"{'verdict':<27}{'expected':<22}(paper's d)")
    fooled, untold = [], []
    for r in rows:
        ci = "[—]" if r["ci_low"] is None else f"[{r['ci_low']:+.3f}, {r['ci_high']:+.3f}]"
        paper = f"{r['paper_d']:+.3f}" if r.get("paper_d") is not None else ""
        expected = r.get("expected") or ""
        ok = r.get("as_expected", True)
        needed = r.get("papers_needed")
        mark = ("  <- NOT AS EXPECTED" if ok is False else
                f"  (too few papers to tell: about {needed} needed)" if ok is None and needed else
                "  (too few papers to tell)" if ok is None else "")
        p = format_p(r["p"], r["n_papers"]).removeprefix("p = ").removeprefix("p ")
        click.echo(f"{r['metric']:<11}{r['transformation']:<{width}}{r['kind']:<13}{r['d']:>+8.3f}  {ci:<18}"
                   f"{p:>9}{r['n_papers']:>7}  {r['verdict']:<27}{expected:<22}{paper}{mark}")
        if ok is False:
            fooled.append(f"{r['metric']} {r['transformation']}")
        elif ok is None:
            untold.append(r)
    if fooled:
        click.echo(f"the metric is not as expected on: {', '.join(fooled)} (published on the methodology page)")
    if untold:
        most = max((r.get("papers_needed") or 0 for r in untold), default=0)
        floor = papers_to_decide()
        click.echo(f"too few papers to tell on {len(untold)} row(s): the paired test needs at least {floor} papers "
                   "to reach p < 0.05 at all" + (f", and the weakest degradation seen about {most}" if most > floor
                                                  else "") + " (`grebench run --papers N`)")
    summary = [r for r in rows if r.get("as_expected") is not None]
    click.echo(f"{sum(1 for r in summary if r['as_expected'])} of {len(rows)} rows as expected, "
               f"{len(fooled)} not, {len(untold)} too few papers to tell")


def print_untested(validation: ValidateSummary) -> None:
    """What the report did not test (a core run: the other controls and plain GEM), and how to test it."""
    controls, metrics = validation.controls_not_tested or [], validation.metrics_not_tested or []
    if not controls and not metrics:
        return
    what = "the core set" if validation.validation == "core" else "part of the validation"
    parts = ([f"{len(controls)} control(s) ({', '.join(controls)})"] if controls else []) + \
        ([f"metric(s) {', '.join(metrics)}"] if metrics else [])
    click.echo(f"this store was scored with {what}: not tested here: {'; '.join(parts)}; "
               "`grebench run --validation full` scores them (slow on a CPU: every control and both metrics)")


def print_agreement(agreement: list[EstimatorAgreement]) -> None:
    """How well the fast proxy ranks like the evaluation LM, on the same pairs."""
    for a in agreement:
        paper = "n/a" if a["rho_per_paper_mean"] is None else f"{a['rho_per_paper_mean']:+.2f}"
        click.echo(f"proxy agreement ({a['metric']}): {a['proxy'].split(':', 1)[0]} vs {a['estimator'][:40]}: "
                   f"Spearman rho over {a['candidates']} candidates {a['rho_candidates']:+.2f}; "
                   f"mean per-paper rho {paper} ({a['papers']} papers)")


@click.command("validate")
@click.option("--metric", "metrics", multiple=True, type=metric_choice(), help="Metrics (default: all scored).")
@setting_option("estimator", default="the latest scored", extra_help="A stored estimator id works too.")
@setting_option("preprocessor", default="the latest scored")
@click.option("--json", "as_json", is_flag=True, help="Print {estimator, preprocessor, rows: [...]} as JSON.")
@settings_options
@click.pass_obj
def command(settings: Settings, metrics: tuple[str, ...], estimator: str | None, preprocessor: str | None,
            as_json: bool) -> None:
    """Check that the metric penalises degradations and does not reward manipulations; store the report."""
    from grebench.scoring import METRICS

    # the setup as named (a spec or a stored id), else the one the store was scored with: the run resolves it;
    # every registered metric with scores in that setup unless chosen
    options = RunOptions(estimator=estimator, preprocessor=preprocessor, metrics=tuple(metrics or METRICS.names()))
    stages, run_id, _status = run_stage(settings, "validate", ["validate"], options, as_json,
                                        {"estimator": estimator, "preprocessor": preprocessor},
                                        refusals=(LookupError, ValueError))
    validation = summary_of(stages, "validate")
    if validation.nothing_to_validate is not None:
        raise click.ClickException("no scores in the store: run `grebench score` first")
    if validation.error is not None:  # (a summary without its fields: this was a KeyError on ``estimator``)
        raise click.ClickException(validation.error)
    estimator_id, preprocessor_id, rows = validation.estimator, validation.preprocessor, validation.rows
    if as_json:
        emit_json({"estimator": estimator_id, "preprocessor": preprocessor_id, "run_id": run_id, "rows": rows,
                   "agreement": validation.agreement, "validation": validation.validation,
                   "controls_not_tested": validation.controls_not_tested,
                   "metrics_not_tested": validation.metrics_not_tested})
    else:
        print_report(rows, estimator_id, preprocessor_id)
        print_untested(validation)
        print_agreement(validation.agreement)

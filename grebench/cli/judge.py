"""`grebench judge`: the Auto-PRE judge panel — exam, pairwise votes, Bradley–Terry ranking, agreement with GEM-S."""

from __future__ import annotations

import sys

import click

from grebench.cli._common import emit_json, run_stage
from grebench.cli._options import setting_option, settings_options
from grebench.cli._plan import reader_plan
from grebench.cli.exam import exam_tables, print_exam
from grebench.pipeline import PanelSummary, RunOptions, summary_of
from grebench.settings import Settings


def print_panel(summary: PanelSummary) -> None:
    """Per venue-year: how many judges qualified, then the ranking of the contestants (LLMs, imported, human) by
    the qualified judges' weighted votes, controls below as reference rows, and the agreement with GEM-S."""
    for venue in summary.venues:
        q = next((q for q in summary.qualified if q["venue_id"] == venue), None)
        if q is not None and not q["qualified"]:
            click.echo(f"\npanel, {venue}: no judge qualified ({q['examined']} examined): the panel does not rank")
            continue
        who = "" if q is None else f"{len(q['qualified'])} of {q['examined']} judges qualified: " \
                                   f"{', '.join(q['qualified'])}; "
        # the metric the gem judge read, by its short name (GEM where the papers have no abstracts); no column
        # at all when nothing is scored: an empty one beside the ranking reads as if it were compared
        column = summary.gem_metric.upper() if summary.gem_metric else ""
        beside = f" beside {summary.gem_metric}" if summary.gem_metric else " (no metric scored to set beside it)"
        click.echo(f"\npanel ranking, {venue} ({who}Bradley–Terry log-strength, 95% CI over papers){beside}")
        click.echo(f"{'rank':>4}  {'candidate':<24}{'strength':>9}  {'95% CI':<17}{'ranks':>7}"
                   + (f"{column:>9}" if column else ""))
        for r in (r for r in summary.rankings if r["venue_id"] == venue):
            ci = "-" if r["ci95_low"] is None else f"[{r['ci95_low']:+.2f}, {r['ci95_high']:+.2f}]"
            ranks = "-" if r["rank_low"] is None else f"{r['rank_low']}-{r['rank_high']}"
            gem = "" if not column else f"{'-':>9}" if r["gem_score"] is None else f"{r['gem_score']:9.2f}"
            rank = "ref" if r["rank"] is None else str(r["rank"])
            click.echo(f"{rank:>4}  {r['candidate']:<24}{r['strength']:>+9.3f}  {ci:<17}{ranks:>7}{gem}")
        for u in (u for u in summary.unjudged if u["venue_id"] == venue):
            click.echo(f"{'-':>4}  {u['candidate']:<24}not judged: {u['reason']}")
        if any(r["rank"] is None for r in summary.rankings if r["venue_id"] == venue):
            click.echo("ref: a control (a manipulated or built review) judged only against contestants as a yardstick: "
                       "shown beside the ranking, never ranked among them; a control stronger than the human "
                       "baseline means the judges preferred that manipulation.")
        for a in (a for a in summary.agreement if a["venue_id"] == venue):
            tau = "-" if a["kendall_tau"] is None else f"{a['kendall_tau']:+.3f}"
            share = "-" if a["pair_agreement"] is None else f"{a['pair_agreement']:.1%}"
            click.echo(f"agreement with {a['gem_metric']}: Kendall tau {tau}, same sign on {share} of "
                       f"{a['n_pairs']} paper-pairs")


@click.command("judge")
@click.option("--judge", "judges", multiple=True, help="Use only these judges (repeatable; default: all).")
@click.option("--json", "as_json", is_flag=True,
              help="Print {exam, rankings, agreement, votes, calls_made, cached, ...} as JSON.")
@setting_option("estimator", default="the one the store was scored with", extra_help="The gem judge's evaluation LM.")
@setting_option("preprocessor", default="the one the store was scored with")
@settings_options
@click.pass_obj
def command(settings: Settings, judges: tuple[str, ...], estimator: str | None, preprocessor: str | None,
            as_json: bool) -> None:
    """Rank the candidates by the judge panel's pairwise votes, beside GEM-S.

    Only judges that pass the qualification exam vote, weighted by their exam score; every pair is asked in both
    orders; LLM judges that disagree debate (debate_rounds); pairs still split are flagged for a human.  Reference
    judges (position, length, overlap, gem) need no LLM; LLM judges come from [[judges]] in the settings file.
    """
    options = RunOptions(judges=judges, estimator=estimator, preprocessor=preprocessor)
    stages, run_id, status = run_stage(settings, "judge", ["panel"], options, as_json,
                                       {"judges": list(judges), "estimator": estimator, "preprocessor": preprocessor},
                                       plan=lambda run: reader_plan("judge", run))
    summary = summary_of(stages, "panel")
    if summary.error is not None:
        raise click.ClickException(summary.error)
    if as_json:
        emit_json({**summary.as_json(), "run_id": run_id})
    elif not summary.venues:
        click.echo("no candidate reviews yet: run `grebench run` (or bench and score) first", err=True)
    else:
        print_exam(exam_tables(summary.exam))
        print_panel(summary)
        click.echo(f"\nvotes: {summary.votes} new ({summary.votes_total} stored), LLM calls: "
                   f"{summary.calls_made} made, {summary.cached} cached; debated {summary.debated}, "
                   f"flagged for a human {summary.flagged}")
    if status != "ok":
        sys.exit(1)

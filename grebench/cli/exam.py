"""`grebench exam`: the judges' qualification exam per venue-year (consistency, pertinence, self-confidence)."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

import click

from grebench.cli._common import emit_json, run_stage
from grebench.cli._options import setting_option, settings_options
from grebench.cli._plan import reader_plan
from grebench.pipeline import RunOptions, summary_of
from grebench.settings import Settings

if TYPE_CHECKING:
    from grebench.panel import ExamRow, SelfPreference


class ExamLine(TypedDict):
    """One judge's line of an exam table (``--json``: ``rows``); a key an older stored row lacks is None."""

    judge: str | None
    kind: str | None
    p_c: float | None
    p_p: float | None
    p_s: float | None
    passed: bool | None
    weight: float | None
    failed: list[str] | None
    self_preference: SelfPreference | None
    not_examined: str | None
    stopped: str | None


class ExamTable(TypedDict):
    """The exam of one venue-year (``--json``: its fields, the latest's, and every one under ``venues``)."""

    venue_id: str | None            # None: the empty table printed when no venue-year has reviews
    eta_c: float | None
    eta_p: float | None
    rows: list[ExamLine]


def _pct(value: float | None) -> str:
    return "   -  " if value is None else f"{value:6.3f}"


def exam_tables(rows: list[ExamRow]) -> list[ExamTable]:
    """Exam rows grouped per venue-year: {venue_id, eta_c, eta_p, rows}."""
    out: dict[str, ExamTable] = {}
    for r in rows:
        table = out.setdefault(r["venue_id"], {"venue_id": r["venue_id"], "eta_c": r["eta_c"], "eta_p": r["eta_p"],
                                               "rows": []})
        table["rows"].append({"judge": r.get("judge"), "kind": r.get("kind"), "p_c": r.get("p_c"),
                              "p_p": r.get("p_p"), "p_s": r.get("p_s"), "passed": r.get("passed"),
                              "weight": r.get("weight"), "failed": r.get("failed"),
                              "self_preference": r.get("self_preference"), "not_examined": r.get("not_examined"),
                              "stopped": r.get("stopped")})
    return list(out.values())


def print_exam(tables: list[ExamTable]) -> None:
    """The exam table as text (reference judges are labelled as such)."""
    for t in tables:
        click.echo(f"qualification exam, {t['venue_id']}  (eta_c {_pct(t['eta_c']).strip()}, "
                   f"eta_p {_pct(t['eta_p']).strip()})")
        click.echo(f"{'judge':<22}{'kind':<11}{'P_c':>7}{'P_p':>7}{'P_s':>7}  {'passed':<7}{'weight':>7}  failed")
        for r in t["rows"]:
            click.echo(f"{r['judge']:<22}{r['kind']:<11}{_pct(r['p_c']):>7}{_pct(r['p_p']):>7}{_pct(r['p_s']):>7}  "
                       f"{'yes' if r['passed'] else 'no':<7}{r['weight']:>7.3f}  {', '.join(r['failed'] or ()) or '-'}")


@click.command("exam")
@click.option("--judge", "judges", multiple=True, help="Examine only these judges (repeatable; default: all).")
@click.option("--json", "as_json", is_flag=True,
              help="Print {venue_id, eta_c, eta_p, rows: [{judge, p_c, p_p, p_s, passed, weight, failed, stopped}], "
                   "venues}.")
@setting_option("estimator", default="the one the store was scored with", extra_help="The gem judge's evaluation LM.")
@setting_option("preprocessor", default="the one the store was scored with")
@settings_options
@click.pass_obj
def command(settings: Settings, judges: tuple[str, ...], estimator: str | None, preprocessor: str | None,
            as_json: bool) -> None:
    """Run the judges' qualification exam (no human labels) and show who may vote.

    Consistency: the preference must survive swapping the two reviews.  Pertinence: a review of this paper must beat
    a strong review of the most similar other paper.  Self-confidence: a judge must be surer on easy pairs than on
    hard ones.  A judge passes with consistency and pertinence at or above the mean over all judges.  A judge that
    could not be examined (the gem judge when its evaluation LM could not score the exam's texts) does not pass, and
    the command then exits with status 1 saying why.
    """
    options = RunOptions(judges=judges, exam_only=True, estimator=estimator, preprocessor=preprocessor)
    stages, _run_id, status = run_stage(settings, "exam", ["panel"], options, as_json,
                                         {"judges": list(judges), "estimator": estimator,
                                          "preprocessor": preprocessor}, plan=lambda run: reader_plan("exam", run))
    summary = summary_of(stages, "panel")
    if summary.error is not None:
        raise click.ClickException(summary.error)
    tables = exam_tables(summary.exam)
    if as_json:
        latest = tables[-1] if tables else {"venue_id": None, "eta_c": None, "eta_p": None, "rows": []}
        emit_json({**latest, "venues": tables, "calls_made": summary.calls_made, "cached": summary.cached})
    elif not tables:
        click.echo("no candidate reviews yet: run `grebench run` (or bench and score) first", err=True)
    else:
        print_exam(tables)
    unexamined = {(r["judge"], r["not_examined"]) for t in tables for r in t["rows"] if r.get("not_examined")}
    said = "; ".join(f"judge {judge} not examined: {why}" for judge, why in sorted(unexamined))
    if unexamined and status != "ok":  # the exit status is the recorded run's
        raise click.ClickException(said)
    if unexamined:  # nothing is scored yet: nothing to examine the gem judge on, not a failure
        click.echo(f"note: {said}", err=True)

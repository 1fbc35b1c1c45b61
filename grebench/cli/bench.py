"""`grebench bench`: candidates write their reviews (LLMs, human baseline, controls); `bench import` adds reviews
written elsewhere as a candidate of kind `imported`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from grebench.cli._common import emit_json, run_stage, writer_store
from grebench.cli._dates import Day
from grebench.cli._options import setting_option, settings_options
from grebench.pipeline import RunOptions, summary_of
from grebench.settings import Settings

if TYPE_CHECKING:
    from grebench.bench import ImportRefusal, ImportSummary


@click.group("bench", invoke_without_command=True)
@click.option("--candidate", "candidates", multiple=True, metavar="NAME",
              help="Only this candidate (repeatable). Default: all configured, human and controls.")
@setting_option("papers")
@setting_option("validation")
@setting_option("executor", into_settings=True)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary instead of text.")
@settings_options
@click.pass_context
def command(ctx: click.Context, candidates: tuple[str, ...], papers: str | None, validation: str | None,
            as_json: bool) -> None:
    """Generate every missing review; resumable, and a rerun makes no calls for what exists.

    Candidates are the bundled human baseline and controls plus the [[candidates]]
    tables of the config file (docs/candidates.md). Exits non-zero if any generation failed.
    `grebench bench import` adds reviews written elsewhere (kind imported).
    """
    if ctx.invoked_subcommand is not None:
        return
    settings: Settings = ctx.obj
    # an unknown --candidate is refused (exit 2) before the run is recorded or the sample drawn: Stage.check
    stages, _run_id, status = run_stage(settings, "bench", ["bench"],
                                        RunOptions(candidates=candidates, papers=papers, validation=validation),
                                        as_json, {"candidates": list(candidates)})
    summary = summary_of(stages, "bench")
    if summary.error is not None:
        raise click.ClickException(summary.error)
    if as_json:
        emit_json(summary.as_json())
    else:
        click.echo(f"bench: {summary.calls_made} calls made, {summary.cached} cached, "
                   f"{summary.failed} failed; {summary.generations_total} generations in the store; "
                   f"tokens {summary.tokens_in} in / {summary.tokens_out} out; cost ${summary.cost_usd:.4f}.")
        for c in summary.candidates:
            on_sample = ("" if c.get("sample_papers") is None else
                         f" ({c['sample_papers']} of {summary.papers_eligible} sample papers)")
            click.echo(f"  {c['name']:<24} {c['kind']:<8} {c['generations']} generations{on_sample}")
        if summary.skipped_papers:
            click.echo(f"  {len(summary.skipped_papers)} papers skipped (fewer than 3 official reviews)", err=True)
        if summary.gave_up:
            click.echo(f"  {summary.gave_up} generations failed too often and were not tried again", err=True)
    if status != "ok":
        sys.exit(1)


@command.command("import", short_help="Import reviews written elsewhere as a candidate of kind imported.")
@click.option("--candidate", "name", required=True, metavar="NAME",
              help="The candidate the reviews become (kind imported); importing again replaces its reviews.")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--cutoff", type=Day(), help="The model's training-data cutoff, YYYY-MM-DD (overrides the file's "
              "_meta line). Informational unless --trust-cutoff: a declared date is no evidence.")
@click.option("--trust-cutoff", is_flag=True, help="The operator vouches for the file's cutoff and generated_at "
              "dates: they decide which reviews count. Without it the reviews count only for papers whose reviews "
              "were not yet public when this import ran (the server's clock).")
@click.option("--released", type=Day(), help="Release date of the model, YYYY-MM-DD.")
@click.option("--model", help="What wrote the reviews (model or system name).")
@click.option("--family", help="Model family (the judges' self-preference guard).")
@click.option("--description", help="One line about the candidate.")
@click.option("--url", help="Where the system is described (http(s) URL).")
@click.option("--submitter", help="Who supplied the reviews.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary (or the refusal) instead of text.")
@settings_options
@click.pass_obj
def import_command(settings: Settings, name: str, file: str, as_json: bool, trust_cutoff: bool,
                   **meta: str | None) -> None:
    """Import reviews written elsewhere from FILE (JSON Lines: paper_id, review, optional generated_at).

    Every line is checked first: one bad line refuses the whole file and nothing is written (the error names
    each bad line). The same file again changes nothing; a changed file replaces the candidate's reviews in one
    transaction. `grebench score` (or `grebench run`) then scores it like any candidate. Format, limits and the
    contamination rule: docs/candidates.md.
    """
    from grebench.bench import MAX_FILE_BYTES, BadLine, CandidateError, ImportRefused, import_reviews
    from grebench.submissions import check_copies, near_copies_of_import

    path = Path(file)
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ImportRefused([BadLine(0, f"the file is {size:,} bytes (limit {MAX_FILE_BYTES:,})")],
                                source=path.name)
        with path.open("rb") as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
        with writer_store(settings) as store:
            summary = import_reviews(store, settings, name, data, meta, source=path.name,
                                     trust_declared=trust_cutoff)
            # a review carrying a nearby paper's public reviews does not count as sealed (issue 62)
            summary = near_copies_of_import(store, summary, settings.submissions.near_copy_estimator,
                                            lambda: check_copies(store, name, settings, near_only=True))
            summary["outside_sample"], summary["sample_size"] = _outside_sample(store, summary["candidate"])
    except ImportRefused as exc:
        _refuse(exc.as_json(), as_json)
    except CandidateError as exc:
        _refuse({"status": "refused", "error": str(exc), "bad_lines_total": 0, "bad_lines": []}, as_json)
    except OSError as exc:
        _refuse({"status": "refused", "error": f"cannot read {path}: {exc.strerror}", "bad_lines_total": 0,
                 "bad_lines": []}, as_json)
    if as_json:
        emit_json(summary)
        return
    state = "written" if summary["changed"] else "nothing changed"
    click.echo(f"imported {summary['candidate']} (kind imported) from {summary['source']}: {summary['reviews']} "
               f"reviews; {summary['added']} added, {summary['replaced']} replaced, {summary['removed']} removed "
               f"({state}).")
    click.echo(f"  clean {summary['clean']} (sealed {summary['sealed']}), contaminated {summary['contaminated']}; "
               f"{_cutoff_words(summary)}; {summary['papers_with_split']} papers with a human-baseline "
               "split. `grebench score` (or `grebench run`) scores them.")
    for warning in summary["warnings"]:
        click.echo(f"  warning: {warning}", err=True)
    outside = summary["outside_sample"]
    if outside:
        shown = ", ".join(outside[:10]) + (f" and {len(outside) - 10} more" if len(outside) > 10 else "")
        click.echo(f"  warning: {len(outside)} of the imported papers are outside the board's sample (the "
                   f"{summary['sample_size']} papers of the last scoring job): the human baseline is generated only "
                   f"on the sample, so they are not compared or ranked there; `grebench run --papers all` (or a "
                   f"sample that includes them) brings them in: {shown}", err=True)


def _outside_sample(store: Any, candidate: str) -> tuple[list[str], int | None]:
    """The papers ``candidate`` has an imported review of that the recorded sample (the papers the boards compare
    candidates on) leaves out, and the sample's size; none when every paper is in it."""
    from grebench.pipeline import outside_sample

    return outside_sample(store, [r["paper_id"] for r in store.rows(
        "SELECT DISTINCT paper_id FROM generations WHERE candidate = ? AND status = 'ok'", [candidate])])


def _cutoff_words(summary: ImportSummary) -> str:
    """What decides cleanliness, truthfully: a trusted cutoff, or (untrusted) only when each review was received."""
    declared = (summary.get("declared") or {}).get("cutoff")
    if summary.get("cutoff"):
        return f"cutoff {summary['cutoff']} (trusted)"
    if declared:
        return (f"declared cutoff {declared} not trusted (information only): a review is clean only if it was "
                "received before the paper's human reviews were public")
    return "no cutoff: a review is clean only if it was received before the paper's human reviews were public"


def _refuse(report: ImportRefusal, as_json: bool) -> NoReturn:
    """End the command: the refusal as JSON on stdout (exit 1), or as the error message."""
    if as_json:
        emit_json(report)
        sys.exit(1)
    raise click.ClickException(report["error"])

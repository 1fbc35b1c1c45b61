"""`grebench bench`: candidates write their reviews (LLMs, human baseline, controls)."""

from __future__ import annotations

import sys

import click

from grebench.cli._common import emit_json, run_stage
from grebench.cli._options import settings_options
from grebench.pipeline import RunOptions
from grebench.settings import Settings


@click.command("bench")
@click.option("--candidate", "candidates", multiple=True, metavar="NAME",
              help="Only this candidate (repeatable). Default: all configured, human and controls.")
@click.option("--papers", default=None, help="all, or N for the main job's seeded sample (default: setting `papers`).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary instead of text.")
@settings_options
@click.pass_obj
def command(settings: Settings, candidates: tuple[str, ...], papers: str | None, as_json: bool) -> None:
    """Generate every missing review; resumable, and a rerun makes no calls for what exists.

    Candidates are the bundled human baseline and controls plus the [[candidates]]
    tables of the config file (docs/candidates.md). Exits non-zero if any generation failed.
    """
    try:
        stages, _run_id, status = run_stage(settings, "bench", ["bench"],
                                            RunOptions(candidates=candidates, papers=papers), as_json,
                                            {"candidates": list(candidates)})
    except click.ClickException as exc:
        raise click.UsageError(exc.message) from None
    summary = stages["bench"]
    if "error" in summary:
        raise click.ClickException(summary["error"])
    if as_json:
        emit_json(summary)
    else:
        click.echo(f"bench: {summary['calls_made']} calls made, {summary['cached']} cached, "
                   f"{summary['failed']} failed; {summary['generations_total']} generations in the store; "
                   f"tokens {summary['tokens_in']} in / {summary['tokens_out']} out; cost ${summary['cost_usd']:.4f}.")
        for c in summary["candidates"]:
            click.echo(f"  {c['name']:<24} {c['kind']:<8} {c['generations']} generations")
        if summary["skipped_papers"]:
            click.echo(f"  {len(summary['skipped_papers'])} papers skipped (fewer than 3 official reviews)", err=True)
        if summary["gave_up"]:
            click.echo(f"  {summary['gave_up']} generations failed too often and were not tried again", err=True)
    if status != "ok":
        sys.exit(1)

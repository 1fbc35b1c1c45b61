"""`grebench bench`: candidates write their reviews (LLMs, human baseline, controls)."""

from __future__ import annotations

import sys

import click

from grebench.cli._common import Progress, emit_json, show_progress, writer_store
from grebench.cli._options import settings_options
from grebench.settings import Settings


@click.command("bench")
@click.option("--candidate", "candidates", multiple=True, metavar="NAME",
              help="Only this candidate (repeatable). Default: all configured, human and controls.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary instead of text.")
@settings_options
@click.pass_obj
def command(settings: Settings, candidates: tuple[str, ...], as_json: bool) -> None:
    """Generate every missing review; resumable, and a rerun makes no calls for what exists.

    Candidates are the bundled human baseline and controls plus the [[candidates]]
    tables of the config file (docs/candidates.md). Exits non-zero if any generation failed.
    """
    from grebench.bench import CandidateError, run_bench

    with writer_store(settings) as store:
        run_id = store.start_run("bench", {"candidates": list(candidates)})
        try:
            with Progress("bench", None, show_progress(as_json)) as progress:
                summary = run_bench(store, settings, run_id, list(candidates) or None, progress=progress.advance)
        except (CandidateError, ValueError) as exc:
            store.record_failure(run_id, "bench", None, str(exc))
            store.finish_run(run_id, {"error": str(exc)})
            raise click.UsageError(str(exc)) from None
        summary["run_id"] = run_id
        status = store.finish_run(run_id, summary)
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

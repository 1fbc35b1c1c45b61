"""`grebench ingest`: pull papers and reviews from a source into the store."""

from __future__ import annotations

import sys

import click

from grebench.cli._common import emit_json, run_stage, source_help
from grebench.cli._options import setting_option, settings_options
from grebench.pipeline import RunOptions, summary_of
from grebench.settings import Settings


@click.command("ingest")
@click.option("--source", default="bundled", show_default=True,
              help=source_help() + " (e.g. openreview:ICLR.cc/2024/Conference).")
@click.option("--limit", type=click.IntRange(min=1), default=None, metavar="N",
              help="Stop after N papers (N ≥ 1).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary instead of text.")
@setting_option("executor", into_settings=True)
@settings_options
@click.pass_obj
def command(settings: Settings, source: str, limit: int | None, as_json: bool) -> None:
    """Ingest papers with their reviews (every edit kept as a new version); idempotent and resumable."""
    from grebench.ingest import SourceError

    try:
        stages, run_id, status = run_stage(settings, "ingest", ["ingest"], RunOptions(source=source, limit=limit),
                                           as_json, {"source": source, "limit": limit}, refusals=(SourceError,))
    except click.ClickException as exc:
        if as_json:
            emit_json({"source": source, "error": exc.message, "failures": [{"item": source, "reason": exc.message}]})
            sys.exit(1)
        raise
    result = summary_of(stages, "ingest")
    if result.error is not None:
        raise click.ClickException(result.error)
    if as_json:
        emit_json(result.as_json())
    else:
        click.echo(
            f"{source}: {result.papers_seen} papers read, {result.papers_added} added, "
            f"{result.papers_updated} updated; {result.reviews_added} reviews and "
            f"{result.versions_added} review versions added; {result.pdfs_extracted} PDFs extracted; "
            f"{len(result.failures)} failures."
        )
        click.echo(f"store: {result.papers_total} papers, {result.reviews_total} reviews, "
                   f"{result.versions_total} review versions.")
        for failure in result.failures[:20]:
            click.echo(f"  failed: {failure['item']}: {failure['reason']}", err=True)
        if len(result.failures) > 20:
            click.echo(f"  ... and {len(result.failures) - 20} more (see run {run_id})", err=True)
    if status != "ok":
        sys.exit(1)

"""`grebench ingest`: pull papers and reviews from a source into the store."""

from __future__ import annotations

import sys

import click

from grebench.cli._common import Progress, emit_json, show_progress, writer_store
from grebench.cli._options import settings_options
from grebench.settings import Settings


@click.command("ingest")
@click.option("--source", default="bundled", show_default=True,
              help="bundled | archive:PATH | openreview:VENUE_ID (e.g. openreview:ICLR.cc/2024/Conference).")
@click.option("--limit", type=int, default=None, help="Stop after N papers.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary instead of text.")
@settings_options
@click.pass_obj
def command(settings: Settings, source: str, limit: int | None, as_json: bool) -> None:
    """Ingest papers with their reviews (every edit kept as a new version); idempotent and resumable."""
    from grebench.ingest import SourceError, resolve_source, run_ingest

    with writer_store(settings) as store:
        run_id = store.start_run("ingest", {"source": source, "limit": limit})
        try:
            paper_source = resolve_source(source, settings)
            with Progress(f"ingest {source}", limit, show_progress(as_json)) as progress:
                summary = run_ingest(paper_source, store, settings, run_id, limit=limit, on_item=progress.advance)
        except SourceError as exc:
            store.record_failure(run_id, "ingest", source, str(exc))
            store.finish_run(run_id, {"error": str(exc)})
            if as_json:
                emit_json({"source": source, "error": str(exc), "failures": [{"item": source, "reason": str(exc)}]})
                sys.exit(1)
            raise click.ClickException(str(exc)) from None
        result = summary.as_json(store)
        result["run_id"] = run_id
        status = store.finish_run(run_id, result)
    if as_json:
        emit_json(result)
    else:
        click.echo(
            f"{source}: {result['papers_seen']} papers read, {result['papers_added']} added, "
            f"{result['papers_updated']} updated; {result['reviews_added']} reviews and "
            f"{result['versions_added']} review versions added; {result['pdfs_extracted']} PDFs extracted; "
            f"{len(result['failures'])} failures."
        )
        click.echo(f"store: {result['papers_total']} papers, {result['reviews_total']} reviews, "
                   f"{result['versions_total']} review versions.")
        for failure in result["failures"][:20]:
            click.echo(f"  failed: {failure['item']}: {failure['reason']}", err=True)
        if len(result["failures"]) > 20:
            click.echo(f"  ... and {len(result['failures']) - 20} more (see run {run_id})", err=True)
    if status != "ok":
        sys.exit(1)

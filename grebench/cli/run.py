"""`grebench run`: the main job, every stage in order, each idempotent and resumable."""

from __future__ import annotations

import sys
import time
from typing import Any, Callable

import click

from grebench.cli._common import Progress, emit_json, show_progress, writer_store
from grebench.settings import Settings
from grebench.store import Store

Stage = Callable[[Store, Settings, str, bool], dict[str, Any]]


def _ingest(source: str) -> Stage:
    def stage(store: Store, settings: Settings, run_id: str, progress: bool) -> dict[str, Any]:
        from grebench.ingest import resolve_source, run_ingest

        with Progress(f"ingest {source}", None, progress) as bar:
            summary = run_ingest(resolve_source(source, settings), store, settings, run_id, on_item=bar.advance)
        return summary.as_json(store)

    return stage


@click.command("run")
@click.option("--source", default="bundled", show_default=True, help="bundled | archive:PATH | openreview:VENUE_ID")
@click.option("--json", "as_json", is_flag=True, help="Print the final summary as JSON.")
@click.pass_obj
def command(settings: Settings, source: str, as_json: bool) -> None:
    """Run the main job: ingest, then the later stages, and print a summary."""
    from grebench.ingest import SourceError

    stages: list[tuple[str, Stage]] = [("ingest", _ingest(source))]
    summary: dict[str, Any] = {"source": source, "stages": {}, "seconds": {}}
    with writer_store(settings) as store:
        run_id = store.start_run("run", {"source": source})
        for name, stage in stages:
            if not as_json:
                click.echo(f"[{name}] ...", err=True)
            started = time.perf_counter()
            try:
                summary["stages"][name] = stage(store, settings, run_id, show_progress(as_json))
            except SourceError as exc:
                store.record_failure(run_id, name, source, str(exc))
                summary["stages"][name] = {"error": str(exc)}
                break
            finally:
                summary["seconds"][name] = round(time.perf_counter() - started, 3)
        summary["failures"] = store.run_failures(run_id)
        summary["tables"] = store.counts()
        summary["run_id"] = run_id
        status = store.finish_run(run_id, summary)
    if as_json:
        emit_json(summary)
    else:
        ingest = summary["stages"].get("ingest", {})
        if "error" in ingest:
            click.echo(f"ingest failed: {ingest['error']}", err=True)
        else:
            click.echo(f"papers: {ingest['papers_total']} ({ingest['papers_added']} new), "
                       f"reviews: {ingest['reviews_total']} ({ingest['reviews_added']} new), "
                       f"review versions: {ingest['versions_total']}")
        for name, seconds in summary["seconds"].items():
            click.echo(f"  {name:<10} {seconds:8.2f} s")
        if summary["failures"]:
            click.echo(f"{len(summary['failures'])} failures (see `grebench stats`, run {run_id})", err=True)
    if status != "ok":
        sys.exit(1)

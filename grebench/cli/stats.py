"""`grebench stats`: what the store holds."""

from __future__ import annotations

from typing import Any

import click

from grebench.cli._common import emit_json, reader_store
from grebench.cli._dates import shown
from grebench.cli._options import settings_options
from grebench.settings import Settings


@click.command("stats")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@settings_options
@click.pass_obj
def command(settings: Settings, as_json: bool) -> None:
    """Row counts per table, papers per venue, and the last runs.

    While another process (`grebench run`, `serve`) writes the store, the last published state is shown (the
    export the site stage writes with every publish), and the output says which board version that is.  A damaged
    store is said so, with the remedy, and the published state shown instead (exit status 1)."""
    reader = reader_store(settings, tables=("papers", "paper_texts", "runs"))
    store = reader.store
    try:
        result: dict[str, Any] = {
            "db_path": str(settings.db_path),
            "tables": store.counts() if reader.counts is None else reader.counts,
            "venues": store.rows(
                """SELECT venue_id, count(*) AS papers, count(abstract) AS with_abstract,
                   (SELECT count(*) FROM paper_texts t JOIN papers q USING (paper_id)
                    WHERE q.venue_id = p.venue_id AND t.status = 'ok') AS with_text
                   FROM papers p GROUP BY venue_id ORDER BY venue_id"""),
            "runs": store.rows(
                "SELECT run_id, command, status, started_at, finished_at FROM runs ORDER BY started_at DESC LIMIT 5"),
        }
    finally:
        reader.close()
    if reader.published is not None:
        result["published"] = reader.published  # the writer's runs are as they were when it published
    else:
        for run in result["runs"]:
            if run["status"] == "running":
                # the store opened read-only, so no writer holds it: the process of a `running` run is gone (the
                # next writer records it `interrupted`); say so rather than pretend it still runs
                run["status"] = "interrupted"
                run["note"] = "its process ended without recording how (killed); the next writer records it"
    if reader.damaged is not None:
        result["damaged"] = reader.damaged
    if as_json:
        emit_json(result)
        reader.exit_if_damaged()
        return
    click.echo(f"store: {result['db_path']}")
    if reader.published is not None:
        why = "the store is damaged" if reader.damaged is not None else \
            f"{reader.published['writer']} is writing the store"
        click.echo(f"showing the last published state: board version {reader.published['version']} published "
                   f"{shown(reader.published['published_at'])} ({why})")
    for table, count in result["tables"].items():
        click.echo(f"  {table:<20} {count:>8}")
    for venue in result["venues"]:
        click.echo(f"venue {venue['venue_id']}: {venue['papers']} papers, {venue['with_abstract']} with abstract, "
                   f"{venue['with_text']} with PDF text")
    for run in result["runs"]:
        note = f" — {run['note']}" if run.get("note") else ""
        click.echo(f"run {run['run_id']} {run['command']}: {run['status']} ({shown(run['started_at'])}){note}")
    reader.exit_if_damaged()

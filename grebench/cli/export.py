"""`grebench export`: Parquet files of every table, for readers (the app, researchers)."""

from __future__ import annotations

from pathlib import Path

import click

from grebench.cli._common import emit_json, writer_store
from grebench.cli._options import settings_options
from grebench.settings import Settings


@click.command("export")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Output directory (default DATA_DIR/export).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@settings_options
@click.pass_obj
def command(settings: Settings, out: Path | None, as_json: bool) -> None:
    """Write each table as Parquet; readers use these, never the writer's live DuckDB file."""
    target = out or settings.export_path
    with writer_store(settings) as store:
        written = store.export_parquet(target)
        counts = store.counts()
    result = {"out": str(target), "tables": {t: {"rows": counts[t], "path": str(p)} for t, p in written.items()}}
    if as_json:
        emit_json(result)
    else:
        click.echo(f"exported {len(written)} tables to {target}")

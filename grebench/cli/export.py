"""`grebench export`: Parquet files of every table, for readers (the app, researchers)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import NotRequired, TypedDict

import click

from grebench.cli._common import damaged_message, emit_json, holder_name, writer_store
from grebench.cli._dates import shown
from grebench.cli._options import settings_options
from grebench.pipeline import Published
from grebench.settings import Settings
from grebench.store import StoreDamaged, StoreLocked, removed_on_failure


class TableFile(TypedDict):
    """One exported table: its rows and its Parquet file."""

    rows: int
    path: str


class Exported(TypedDict):
    """What ``grebench export --json`` prints: where, each table, and the published state copied (if it was)."""

    out: str
    tables: dict[str, TableFile]
    published: NotRequired[Published]


@click.command("export")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Output directory (default DATA_DIR/export).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@settings_options
@click.pass_obj
def command(settings: Settings, out: Path | None, as_json: bool) -> None:
    """Write each table as Parquet; readers use these, never the writer's live DuckDB file.

    While another process (`grebench run`, `serve`) writes the store, the last published export (the one the site
    stage writes with every publish, DATA_DIR/export) is what you get: copied to --out, and named by its board
    version.  A damaged store is said so, with the remedy, and the published export is what you get (exit
    status 1)."""
    from grebench.store import ensure_whole

    target = out or settings.export_path
    damaged = None
    result: Exported
    try:
        with writer_store(settings, locked_ok=True) as store:
            ensure_whole(store.con, settings.db_path)  # a damaged store must not overwrite the published export
            written = store.export_parquet(target)
            counts = store.counts()
    except StoreLocked as exc:
        result = _published(settings.export_path, target, holder_name(exc.pid))
    except StoreDamaged as exc:
        damaged = exc.reason
        click.echo(f"Error: {damaged_message(settings, damaged)}", err=True)
        result = _published(settings.export_path, target, "nobody (the store is damaged)", damaged=True)
    else:
        result = {"out": str(target), "tables": {t: {"rows": counts[t], "path": str(p)} for t, p in written.items()}}
    if as_json:
        emit_json(result)
    elif "published" in result:
        published = result["published"]
        why = "the store is damaged" if damaged else f"{published['writer']} is writing the store"
        click.echo(f"{why}: {len(result['tables'])} tables of the "
                   f"last published state (board version {published['version']}, published "
                   f"{shown(published['published_at'])}) are in {target}")
    else:
        click.echo(f"exported {len(result['tables'])} tables to {target}")
    if damaged:
        sys.exit(1)


def _published(export: Path, target: Path, holder: str, damaged: bool = False) -> Exported:
    """The last published export, copied to ``target`` (each file by a rename, as the writer does)."""
    from grebench.site import published_state

    state = published_state(export, tables=())
    if state is None:
        if damaged:
            raise click.ClickException("nothing was published yet to export instead of the damaged store")
        raise click.ClickException(f"the store is busy ({holder} is writing) and nothing was published yet; "
                                   "run `grebench export` again when it finishes")
    state.store.con.close()
    target.mkdir(parents=True, exist_ok=True)
    tables: dict[str, TableFile] = {}
    for table, rows in state.counts.items():
        src, dst = export / f"{table}.parquet", target / f"{table}.parquet"
        if src.resolve() != dst.resolve():
            with removed_on_failure(dst.with_suffix(".parquet.tmp")) as tmp:
                shutil.copyfile(src, tmp)
            tmp.replace(dst)
        tables[table] = {"rows": rows, "path": str(dst)}
    return {"out": str(target), "tables": tables,
            "published": {"version": state.version_id, "published_at": state.published_at,
                          "source": str(state.source), "writer": holder}}

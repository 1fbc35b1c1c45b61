"""`grebench check`: is the store whole? (checksums of every block, rows against the last board version, the
snapshots' hashes)."""

from __future__ import annotations

import sys

import click
import duckdb

from grebench.cli._common import damaged_message, emit_json, holder_name
from grebench.cli._options import settings_options
from grebench.settings import Settings


@click.command("check")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@settings_options
@click.pass_obj
def command(settings: Settings, as_json: bool) -> None:
    """Verify the store: every table is read whole, so DuckDB checks every block's checksum (counting rows reads
    none); the papers and reviews the last board version stands on are all there; every recorded snapshot matches
    its manifest and the manifest its recorded SHA-256.

    Exit status 0 when all holds; 1 naming what is wrong and what to do (restore a backup that `grebench serve`
    keeps in DATA_DIR/backups, or rebuild from the snapshots).  `grebench serve` runs this check at start and every
    check_interval_min, and takes a backup after each check that passed.
    """
    from grebench.store import StoreLocked, check_file

    db = settings.db_path
    if not db.is_file():
        raise click.ClickException(f"no store at {db}: nothing to check")
    try:
        report = check_file(db)
    except duckdb.IOException as exc:
        if "lock" not in str(exc).lower():
            raise click.ClickException(f"cannot read {db}: {str(exc).splitlines()[0][:300]}") from None
        holder = holder_name(StoreLocked(db, str(exc)).pid)
        raise click.ClickException(f"the store is in use ({holder} holds it): `grebench serve` checks it itself "
                                   "at start and every check_interval_min (`grebench status` shows the last "
                                   "check); stop the writer to check it now") from None
    if as_json:
        emit_json(report.as_json())
    else:
        rows = sum(report.tables.values())
        click.echo(f"{db}: {'ok' if report.ok else 'DAMAGED' if report.damaged else 'PROBLEMS'} "
                   f"({len(report.tables)} tables read whole, {rows} rows; {report.snapshots} snapshot(s) verified)")
    if report.ok:
        return
    for problem in report.problems:
        click.echo(f"  {problem}", err=True)
    if report.damaged:
        click.echo(f"Error: {damaged_message(settings, report.problems[0])}", err=True)
    else:
        click.echo("Error: the store's file is whole, but it does not hold what was published or cut: restore a "
                   f"backup from {settings.backups_path} or the snapshots named above, then `grebench check` again",
                   err=True)
    sys.exit(1)

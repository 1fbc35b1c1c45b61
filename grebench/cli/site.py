"""`grebench site build`: render the static leaderboard site from the store."""

from __future__ import annotations

from pathlib import Path

import click

from grebench.cli._common import emit_json, writer_store
from grebench.cli._options import settings_options
from grebench.settings import Settings


@click.group("site")
@settings_options
def command() -> None:
    """The static leaderboard site (works from file:// and any static host)."""


@command.command("build")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Output directory (default: the site_dir setting, else DATA_DIR/site).")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@settings_options
@click.pass_obj
def build(settings: Settings, out: Path | None, as_json: bool) -> None:
    """Render every page, plot and leaderboard.json from the store (the old site is replaced whole)."""
    from grebench.site import build_site

    with writer_store(settings) as store:
        summary = build_site(store, settings, out)
    if as_json:
        emit_json(summary)
    else:
        click.echo(f"built {summary['pages']} pages ({summary['boards']} boards) in {summary['out']}")

"""`grebench site build`: render the static leaderboard site from the store."""

from __future__ import annotations

from pathlib import Path

import click

from grebench.cli._common import emit_json, run_stage
from grebench.cli._options import setting_option, settings_options
from grebench.pipeline import RunOptions, summary_of
from grebench.settings import Settings


@click.group("site")
@settings_options
def command() -> None:
    """The static leaderboard site (works from file:// and any static host)."""


@command.command("build")
@setting_option("site_dir", "--out", type=click.Path(file_okay=False, path_type=Path))
@click.option("--force", is_flag=True, help="Build even when nothing the site shows has changed.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@settings_options
@click.pass_obj
def build(settings: Settings, out: Path | None, force: bool, as_json: bool) -> None:
    """Render every page, plot and leaderboard.json from the store (the old site is replaced whole)."""
    stages, _run_id, _status = run_stage(settings, "site", ["site"],
                                         RunOptions(site_dir=None if out is None else str(out), force=force), as_json)
    summary = summary_of(stages, "site")
    if "error" in summary:
        raise click.ClickException(summary["error"])
    if as_json:
        emit_json(summary)
    else:
        what = "unchanged" if summary.get("unchanged") else "built"
        click.echo(f"{what}: {summary['pages']} pages ({summary['boards']} boards) in {summary['out']}")

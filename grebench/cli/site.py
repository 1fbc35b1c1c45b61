"""`grebench site build`: render the static leaderboard site from the store."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from grebench.cli._common import damaged_message, emit_json, holder_name, run_stage
from grebench.cli._options import setting_option, settings_options
from grebench.pipeline import Published, RunOptions, SiteSummary, summary_of
from grebench.settings import Settings
from grebench.store import StoreDamaged, StoreLocked


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
    """Render every page, plot and leaderboard.json from the store (the old site is replaced whole).

    While another process (`grebench run`, `serve`) writes the store, the site is built from the last published
    state (the export of its last publish) into --out; without --out the writer's own site is already that state.
    So too when the store is damaged (said with the remedy; exit status 1)."""
    damaged = None
    try:
        stages, _run_id, _status = run_stage(settings, "site", ["site"],
                                             RunOptions(site_dir=None if out is None else str(out), force=force),
                                             as_json, locked_ok=True)
    except StoreLocked as exc:
        summary = _from_published(settings, out, holder_name(exc.pid))
    except StoreDamaged as exc:  # the remedy said; the site of the last publish built into --out; exit status 1
        damaged = exc.reason
        click.echo(f"Error: {damaged_message(settings, damaged)}", err=True)
        summary = _from_published(settings, out, "nobody (the store is damaged)")
    else:
        summary = summary_of(stages, "site")
    if summary.error is not None:
        raise click.ClickException(summary.error)
    published = summary.published
    if as_json:
        emit_json(summary.as_json())
    elif published is not None and not summary.pages:
        who = "the store is damaged" if damaged else f"{published['writer']} is writing the store"
        click.echo(f"{who}; the site in {summary.out} is its last publish (board version {published['version']}); "
                   "pass --out DIR to build a copy of it elsewhere")
    else:
        what = "unchanged" if summary.unchanged else "built"
        origin = (f" from the last published state (board version {published['version']})"
                  if published is not None else "")
        click.echo(f"{what}{origin}: {summary.pages} pages ({summary.boards} boards) in {summary.out}")
    if damaged:
        sys.exit(1)


def _from_published(settings: Settings, out: Path | None, holder: str) -> SiteSummary:
    """The site of the last published state (read-only: no version is recorded), built into ``out``; SIGTERM /
    SIGINT stop it between pages (nothing is recorded: exit 0 after SIGTERM, 130 after SIGINT, --out as it was)."""
    from grebench import stop
    from grebench.site import build_site, published_state

    state = published_state(settings.export_path)
    if state is None:
        if holder.startswith("nobody"):
            raise click.ClickException("nothing was published yet to build the site from instead of the damaged store")
        raise click.ClickException(f"the store is busy ({holder} is writing) and nothing was published yet; "
                                   "try again when it finishes")
    published: Published = {"version": state.version_id, "published_at": state.published_at,
                            "source": str(state.source), "writer": holder}
    try:
        if out is None or out.resolve() == settings.site_path.resolve():  # the writer swaps that folder itself
            return SiteSummary.from_json({"out": str(settings.site_path), "pages": 0, "published": published})
        with stop.handling_signals(settings.service.stop_grace_s):
            try:
                built = build_site(state.store, settings, out, publish=False)
            except stop.Interrupted as exc:
                click.echo(f"{exc}: the site build stopped; {out} is left as it was", err=True)
                sys.exit(stop.exit_status(130))
        return SiteSummary.from_json({**built, "published": published})
    finally:
        state.store.con.close()

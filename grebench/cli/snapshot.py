"""`grebench snapshot export|verify|rebuild|import`: frozen per-venue-year snapshots (Parquet, manifest, hashes)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click

from grebench.cli._common import emit_json, holder_name, writer_store
from grebench.cli._options import settings_options
from grebench.settings import Settings
from grebench.store import Store, removed_on_failure


@click.group("snapshot")
@settings_options
def command() -> None:
    """Frozen per-venue-year snapshots: what researchers download and re-score with their own evaluation-LM."""


@command.command("export")
@click.option("--venue-year", "venues", multiple=True,
              help="Venue id, name or slug (e.g. ICLR-2020); repeatable. Default: every venue-year in the store.")
@click.option("--out", "out", type=click.Path(file_okay=False),
              help="Directory to write into (default DATA_DIR/snapshots/<venue-year>); one sub-directory per "
              "venue-year when several are exported.")
@click.option("--replace", is_flag=True, help="Cut again over an existing snapshot directory.")
@click.option("--json", "as_json", is_flag=True, help="Print the manifests as JSON.")
@settings_options
@click.pass_obj
def export(settings: Settings, venues: tuple[str, ...], out: str | None, replace: bool, as_json: bool) -> None:
    """Write snapshots; while `grebench serve` holds the store, queue the request for its snapshot job.

    Every venue-year named is checked before anything is written: an unknown one is refused (exit 2) naming the
    known ones, and a queued request is checked against the last published state of the store."""
    from grebench.scoring import provenance
    from grebench.store import SnapshotError, StoreLocked, export_snapshot, record_snapshot

    try:
        with writer_store(settings, locked_ok=True) as store:
            try:
                targets = _targets(store, venues, out, settings)
            except SnapshotError as exc:
                raise click.UsageError(str(exc)) from None
            manifests = []
            if targets:  # the submissions log a snapshot carries says each entry's status now
                from grebench.submissions import SubmissionQueue, queue_path, sync_log

                queue_file = queue_path(settings)
                sync_log(store, SubmissionQueue(queue_file) if queue_file.exists() else None)
            for venue, target in targets:
                try:
                    manifest = export_snapshot(store, venue, target, replace=replace, describe=provenance)
                except SnapshotError as exc:
                    raise click.ClickException(str(exc)) from None
                record_snapshot(store, manifest, "on-demand")
                manifests.append(manifest)
                if not as_json:
                    rows = sum(f["rows"] for f in manifest["files"].values())
                    click.echo(f"{manifest['venue']}: {len(manifest['files'])} files, {rows} rows -> {target} "
                               f"(manifest sha256 {manifest['manifest_sha256']})")
    except StoreLocked as exc:
        _queue(settings, venues, holder_name(exc.pid))
        return
    if as_json:
        emit_json(manifests)


def _targets(store: Store, venues: tuple[str, ...], out: str | None, settings: Settings) -> list[tuple[str, Path]]:
    """(venue id, folder) of each venue-year to cut, every name checked first (:class:`SnapshotError` for an
    unknown one, before anything is written)."""
    from grebench.store import find_venue, venue_years

    chosen = [find_venue(store, v) for v in venues] if venues else venue_years(store)
    root = Path(out) if out else settings.snapshots_path
    return [(v["venue_id"], root if out and len(chosen) == 1 else root / v["slug"]) for v in chosen]


def _queue(settings: Settings, venues: tuple[str, ...], holder: str) -> None:
    """Leave the request for the running service's snapshot job (the store is held by ``holder``), each venue-year
    checked now against the last published state: a typo is refused here, not reported hours later."""
    from grebench.site import published_state
    from grebench.store import SnapshotError, find_venue

    if not venues:
        raise click.ClickException(f"the store is in use ({holder} holds it): name --venue-year to queue a "
                                   "snapshot request for the running service")
    state = published_state(settings.export_path, ("papers",))
    checked = "checked against the last published state"
    if state is None:
        checked = "not checked: nothing is published yet; the snapshot job records an unknown one as a failure"
    else:
        try:
            for venue in venues:
                find_venue(state.store, venue)
        except SnapshotError as exc:
            raise click.UsageError(str(exc)) from None
        finally:
            state.store.con.close()
    path = settings.snapshot_requests_path
    try:
        queued = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else []
    except (OSError, ValueError):
        queued = []  # an unreadable file is the service's to report (it records it as a failure)
    queued = [str(q) for q in queued] if isinstance(queued, list) else []
    with removed_on_failure(path.with_name(f".{path.name}.{os.getpid()}.tmp")) as tmp:
        tmp.write_text(json.dumps(sorted(set(queued) | set(venues))), encoding="utf-8")
    os.replace(tmp, path)  # whole or not at all: the service never reads a half-written request
    click.echo(f"the store is in use ({holder} holds it): requested {', '.join(venues)} from the running service "
               f"({checked}; its snapshot job cuts it within snapshot_check_min)", err=True)


#: The snapshot a command reads: its folder, or its archive as the Downloads page offers it.
SNAPSHOT = click.argument("directory", metavar="SNAPSHOT", type=click.Path(exists=True, dir_okay=True))


@command.command("verify")
@SNAPSHOT
@click.option("--manifest-sha256", help="The published SHA-256 of manifest.json (Downloads page) to check too.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@settings_options
@click.pass_obj
def verify(settings: Settings, directory: str, manifest_sha256: str | None, as_json: bool) -> None:
    """Check every file of a snapshot against its manifest (exit 1 on any missing, changed or extra file).

    SNAPSHOT is the snapshot's folder or its archive (FOLDER.tar.gz from the Downloads page), which is read safely
    into a temporary folder (regular files under one folder only, within snapshot_import_max_*) and removed after."""
    from grebench.store import verify_snapshot

    report = verify_snapshot(Path(directory), manifest_sha256,
                             max_expansion=settings.limits.snapshot_import_max_expansion,
                             max_decoded_bytes=settings.limits.snapshot_import_max_mb * 1024 ** 2)
    if as_json:
        emit_json(report)
    else:
        click.echo(f"{directory}: {'ok' if report['ok'] else 'FAILED'} ({report['files']} files)")
        for problem in report["problems"]:
            click.echo(f"  {problem}", err=True)
    if not report["ok"]:
        raise SystemExit(1)


@command.command("rebuild")
@SNAPSHOT
@click.option("--manifest-sha256", help="The published SHA-256 of manifest.json (Downloads page) to check too.")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
@settings_options
@click.pass_obj
def rebuild(settings: Settings, directory: str, manifest_sha256: str | None, as_json: bool) -> None:
    """Make a snapshot's numbers again and compare them with the published ones (exit 1 unless all match).

    Imports the snapshot into an empty temporary store (this data dir is not touched), scores it again with the
    setup it records (estimator and preprocessor specs, metrics, paper sample), recomputes its boards with the
    recorded bootstrap settings, and prints PASS or FAIL per score group and per board with the largest
    difference and the tolerance the estimator promises.  The estimator must build the same id here (the same
    weights and dtype: `hf:...` pulls its model first).
    """
    from grebench.pipeline import rebuild_snapshot
    from grebench.store import SnapshotError

    def say(line: str) -> None:
        if not as_json:
            click.echo(line, err=True)

    try:
        report = rebuild_snapshot(Path(directory), settings, manifest_sha256, log=say)
    except SnapshotError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        emit_json(report)
    else:
        for g in report["scores"]:
            click.echo(f"{'PASS' if g['ok'] else 'FAIL'}  scores {g['metric']} {g['estimator']} {g['preprocessor']}: "
                       f"{g['n']} scores, max |diff| {g['max_diff']:.3g} (tolerance {g['tolerance']:.0e})"
                       + ("" if g["ok"] or not g["worst"] else f"; {g['worst']}"))
        for b in report["boards"]:
            click.echo(f"{'PASS' if b['ok'] else 'FAIL'}  board {b['board_id']}: {b['rows']} rows, max |diff| "
                       f"{b['max_diff']:.3g} (tolerance {b['tolerance']:.0e})")
            for problem in b["problems"][:5]:
                click.echo(f"      {problem}")
        for problem in report["problems"]:
            click.echo(f"FAIL  {problem}")
        click.echo(f"{directory}: {'the published numbers rebuilt' if report['ok'] else 'NOT reproduced'}")
    if not report["ok"]:
        raise SystemExit(1)


@command.command("import")
@SNAPSHOT
@click.option("--manifest-sha256", help="The SHA-256 of manifest.json as published on the site's Downloads page: the "
              "import is refused unless the manifest is that one (without it, authenticity is not checked).")
@click.option("--json", "as_json", is_flag=True, help="Print the rows added per table as JSON.")
@settings_options
@click.pass_obj
def import_(settings: Settings, directory: str, manifest_sha256: str | None, as_json: bool) -> None:
    """Load a verified snapshot into this data dir (rows already present are kept: importing twice adds nothing).

    SNAPSHOT is the snapshot's folder or its archive (FOLDER.tar.gz from the Downloads page): the archive is read
    safely (regular files under one folder only, no link, within snapshot_import_max_*) into a temporary folder in
    the data dir, removed after.  Then `grebench score --estimator ...` re-scores it with another evaluation-LM.
    """
    from grebench.store import SnapshotError, import_snapshot

    with writer_store(settings) as store:
        try:
            report = import_snapshot(store, Path(directory), manifest_sha256,
                                     max_expansion=settings.limits.snapshot_import_max_expansion,
                                     max_decoded_bytes=settings.limits.snapshot_import_max_mb * 1024 ** 2)
        except SnapshotError as exc:
            raise click.ClickException(str(exc)) from None
        if report["rows_added"].get("papers"):
            from grebench.ingest import link_papers
            from grebench.scoring import EstimatorHandle, LMAbstractReader

            # imported papers are linked to their versions like ingested ones (the contamination date, copies)
            spec = settings.ingest.link_estimator.strip()
            report["links"] = link_papers(store, {r["paper_id"] for r in store.rows(
                "SELECT paper_id FROM papers WHERE venue_id = ?", [report["venue_id"]])},
                abstracts=LMAbstractReader(store, EstimatorHandle(spec, settings)) if spec else None)
        if any(report["rows_added"].values()):
            from grebench.scoring import store_labels

            # the boards' words (the human baseline's and the controls' tags, the estimator's name) are not in a
            # snapshot: they come from this install's registries, as the boards stage writes them
            with store.transaction():
                store_labels(store)
    if not report["authenticated"]:
        report["warning"] = ("authenticity NOT checked: the files match their manifest, but nothing says the "
                             "manifest is the published one; pass --manifest-sha256 with the SHA-256 of this "
                             "snapshot's manifest.json from the site's Downloads page")
        click.echo(f"warning: {report['warning']}", err=True)
    if as_json:
        emit_json(report)
    else:
        added = ", ".join(f"{t} {n}" for t, n in report["rows_added"].items() if n)
        click.echo(f"imported {report['venue_id']}: {added or 'nothing new'}"
                   f"{' (manifest authenticated)' if report['authenticated'] else ''}")

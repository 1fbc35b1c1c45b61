"""`grebench extract`: the model-facing text of one PDF, hidden text removed and reported."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from grebench.cli._common import emit_json
from grebench.cli._options import settings_options
from grebench.settings import Settings


@click.command("extract")
@click.argument("pdf", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print {text, hidden, flags, pages, error} as JSON.")
@settings_options
@click.pass_obj
def command(settings: Settings, pdf: Path, as_json: bool) -> None:
    """Extract PDF text with PyMuPDF in a time- and memory-limited subprocess."""
    from grebench.ingest import extract_pdf

    limits = settings.limits
    result = extract_pdf(pdf.read_bytes(), timeout_s=limits.pdf_timeout_s, memory_mb=limits.pdf_memory_mb,
                         max_bytes=limits.pdf_max_bytes)
    if as_json:
        emit_json(result)
    elif result.get("error") is None:
        click.echo(result["text"])
        for hidden in result["hidden"]:
            click.echo(f"hidden text removed (page {hidden['page']}, {hidden['reason']}): {hidden['text'][:120]!r}",
                       err=True)
        for flag in result["flags"]:
            click.echo(f"flag: phrase aimed at an LLM reviewer on page {flag['page']}: {flag['phrase']!r}", err=True)
    if result.get("error") is not None:
        click.echo(f"Error: {pdf}: {result['error']}", err=True)  # every command's refusal style
        sys.exit(1)

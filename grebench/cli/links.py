"""`grebench links`: versions of the same work across venues and years (recompute and list)."""

from __future__ import annotations

import click

from grebench.cli._common import emit_json, writer_store
from grebench.cli._options import settings_options
from grebench.settings import Settings


@click.command("links")
@click.option("--paper", "papers", multiple=True, help="Recompute only this paper's links (repeatable); default all.")
@click.option("--list", "show", is_flag=True, help="List every link after recomputing.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary instead of text.")
@settings_options
@click.pass_obj
def command(settings: Settings, papers: tuple[str, ...], show: bool, as_json: bool) -> None:
    """Recompute the links between versions of the same work (title and abstract similarity; explicit links from
    the source are kept) and unseal generations that an earlier version's public reviews show were not sealed.

    Ingest links new papers by itself; run this after changing the rule or to check the store.
    """
    from grebench.ingest import link_papers

    with writer_store(settings) as store:
        known = {r["paper_id"] for r in store.rows("SELECT paper_id FROM papers")}
        unknown = sorted(set(papers) - known)
        if unknown:
            raise click.UsageError(f"unknown paper id(s): {', '.join(unknown[:10])}")
        result = link_papers(store, set(papers) if papers else None)
        listed = None
        if show or as_json:
            listed = store.rows(
                """SELECT l.paper_id, a.venue AS paper_venue, a.title AS paper_title, l.linked_id,
                          b.venue AS linked_venue, b.title AS linked_title, l.method, l.title_similarity,
                          l.abstract_similarity FROM paper_links l LEFT JOIN papers a ON a.paper_id = l.paper_id
                          LEFT JOIN papers b ON b.paper_id = l.linked_id ORDER BY l.paper_id, l.linked_id""")
    if as_json:
        emit_json({**result, "list": listed})
        return
    click.echo(f"{result['papers']} papers linked against the store: {result['links']} new links "
               f"({', '.join(f'{k}: {v}' for k, v in result['by_method'].items()) or 'none found'}); "
               f"{result['links_total']} links in all.")
    for row in listed or []:
        click.echo(f"  {row['paper_id']} ({row['paper_venue']}) = {row['linked_id']} ({row['linked_venue']}) "
                   f"[{row['method']}]: {row['paper_title']} | {row['linked_title']}")

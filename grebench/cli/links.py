"""`grebench links`: versions of the same work across venues and years (recompute, list, decide)."""

from __future__ import annotations

import click

from grebench.cli._common import emit_json, writer_store
from grebench.cli._options import settings_options
from grebench.settings import Settings


@click.command("links")
@click.option("--paper", "papers", multiple=True, help="Recompute only this paper's links (repeatable); default all.")
@click.option("--list", "show", is_flag=True, help="List every link and every possible link after recomputing.")
@click.option("--flags", "show_flags", is_flag=True,
              help="List the possible links (flagged pairs) with their reasons and decisions; recompute nothing.")
@click.option("--decide", nargs=3, metavar="PAPER OTHER same|distinct", default=None,
              help="Decide a flagged (or any) pair: same work (linked for good) or distinct works (never linked "
                   "by similarity); recompute nothing.")
@click.option("--note", default=None, help="With --decide: a note stored with the decision.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary instead of text.")
@settings_options
@click.pass_obj
def command(settings: Settings, papers: tuple[str, ...], show: bool, show_flags: bool,
            decide: tuple[str, str, str] | None, note: str | None, as_json: bool) -> None:
    """Recompute the links between versions of the same work and unseal generations that an earlier version's
    public reviews show were not sealed.

    Links come from the title and abstract, the extracted text (MinHash fingerprints of the body, captions and
    references), authors and keywords; explicit links from the source are kept.  A pair whose evidence is above the
    "possible" bar but below the link bar is flagged: until decided (--decide) it counts as linked, so the paper's
    generations are not sealed and the copy check reads the other paper's reviews.  --flags lists the flags with
    their reasons.  The evaluation LM named by the link_estimator setting (default: offline) reads the abstracts
    of the candidate pairs nothing else decides, and flags those it reads as one work beyond what distinct papers of
    their venue reach.  Ingest links new papers by itself; run this after changing the rule or to check the store.
    """
    from grebench.ingest import link_papers
    from grebench.store import decide_link, link_flags

    with writer_store(settings) as store:
        known = {r["paper_id"] for r in store.rows("SELECT paper_id FROM papers")}
        named = set(papers) | set(decide[:2] if decide else ())
        unknown = sorted(named - known)
        if unknown:
            raise click.UsageError(f"unknown paper id(s): {', '.join(unknown[:10])}")
        if decide is not None:
            a, b, decision = decide
            if decision not in ("same", "distinct"):
                raise click.UsageError(f"--decide: the decision must be 'same' or 'distinct', got {decision!r}")
            from grebench.bench import reseal

            with store.transaction():
                changed = decide_link(store, a, b, decision, note)
                resealed = reseal(store) if decision == "distinct" else 0
            if as_json:
                emit_json({"decided": [a, b, decision], "changed": changed, "resealed": resealed})
            else:
                click.echo(f"{a} and {b}: {decision}" + ("" if changed else " (already so)") +
                           (f"; {resealed} generations sealed again" if resealed else ""))
            return
        if show_flags:
            flags = link_flags(store, set(papers) if papers else None)
            if as_json:
                emit_json({"flags": flags})
                return
            click.echo(f"{sum(f['decision'] is None for f in flags)} undecided possible links, {len(flags)} in all.")
            for f in flags:
                state = f"decided {f['decision']}" if f["decision"] else "UNDECIDED: not sealed"
                click.echo(f"  {f['paper_id']} ({f['paper_venue']}) ~ {f['linked_id']} ({f['linked_venue']}) "
                           f"[{state}]: {f['paper_title']} | {f['linked_title']}\n    {f['reason']}")
            return
        from grebench.scoring import EstimatorHandle, LMAbstractReader

        spec = settings.ingest.link_estimator.strip()
        result = link_papers(store, set(papers) if papers else None,
                             abstracts=LMAbstractReader(store, EstimatorHandle(spec, settings)) if spec else None)
        listed = flags_listed = None
        if show or as_json:
            listed = store.rows(
                """SELECT l.paper_id, a.venue AS paper_venue, a.title AS paper_title, l.linked_id,
                          b.venue AS linked_venue, b.title AS linked_title, l.method, l.title_similarity,
                          l.abstract_similarity FROM paper_links l LEFT JOIN papers a ON a.paper_id = l.paper_id
                          LEFT JOIN papers b ON b.paper_id = l.linked_id ORDER BY l.paper_id, l.linked_id""")
            flags_listed = link_flags(store)
    if as_json:
        emit_json({**result, "list": listed, "flags": flags_listed})
        return
    click.echo(f"{result['papers']} papers linked against the store: {result['links']} new links "
               f"({', '.join(f'{k}: {v}' for k, v in result['by_method'].items()) or 'none found'}); "
               f"{result['links_total']} links in all; {result.get('flagged', 0)} new possible links, "
               f"{result.get('flagged_undecided', 0)} undecided (not sealed until decided: grebench links --flags).")
    for row in listed or []:
        click.echo(f"  {row['paper_id']} ({row['paper_venue']}) = {row['linked_id']} ({row['linked_venue']}) "
                   f"[{row['method']}]: {row['paper_title']} | {row['linked_title']}")
    for f in flags_listed or []:
        click.echo(f"  {f['paper_id']} ({f['paper_venue']}) ~ {f['linked_id']} ({f['linked_venue']}) "
                   f"[possible, {f['decision'] or 'undecided'}]: {f['reason']}")

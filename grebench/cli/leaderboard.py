"""`grebench leaderboard`: the ranked table of one metric, estimator and preprocessor."""

from __future__ import annotations

import click

from grebench.cli._common import emit_json
from grebench.cli._options import settings_options
from grebench.settings import Settings
from grebench.store import open_store


def _pick(tables: list[dict], key: str, wanted: str | None, what: str) -> str:
    """The stored id matching an option (exact, or the only id starting with it), or the only one there is."""
    ids = sorted({t[key] for t in tables})
    if wanted:
        if wanted in ids:
            return wanted
        matches = [i for i in ids if i.startswith(wanted) or i.split("@")[0] == wanted
                   or i.split("-v")[0] == wanted]
        if len(matches) == 1:
            return matches[0]
        raise click.ClickException(f"no single {what} matches {wanted!r}; scored with: {', '.join(ids) or 'none'}")
    if len(ids) == 1:
        return ids[0]
    raise click.ClickException(f"scores exist for several {what}s ({', '.join(ids)}): choose one with --{what}")


@click.command("leaderboard")
@click.option("--metric", default="gem-s", show_default=True,
              type=click.Choice(("gem", "gem-s", "gem-s-assw", "gem-raw")), help="Metric to rank by.")
@click.option("--estimator", help="Estimator id or spec prefix (default: the only one scored).")
@click.option("--preprocessor", help="Preprocessor id or spec (default: the only one scored).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON ({'rows': [...]}).")
@settings_options
@click.pass_obj
def command(settings: Settings, metric: str, estimator: str | None, preprocessor: str | None, as_json: bool) -> None:
    """Rank candidates by mean score over papers, with 90%/95% bootstrap CIs over papers and rank intervals.

    The human baseline and the controls are marked; LLM candidates count only on papers whose reviews were not
    public before their training cutoff (or whose generation was sealed before the reviews appeared).
    """
    from grebench.scoring import available_tables, leaderboard

    if not settings.db_path.exists():
        raise click.ClickException(f"no store at {settings.db_path}: run `grebench ingest` first")
    store = open_store(settings.db_path, read_only=True)
    try:
        tables = [t for t in available_tables(store) if t["metric"] == metric]
        if not tables:
            raise click.ClickException(f"no {metric} scores in the store: run `grebench score --metric {metric}`")
        est = _pick(tables, "estimator", estimator, "estimator")
        tables = [t for t in tables if t["estimator"] == est]
        prep = _pick(tables, "preprocessor", None if metric == "gem-raw" else preprocessor, "preprocessor")
        rows = leaderboard(store, metric, est, prep, samples=settings.bootstrap_samples, seed=settings.seed)
    finally:
        store.con.close()
    if as_json:
        emit_json({"metric": metric, "estimator": est, "preprocessor": prep, "rows": rows})
        return
    click.echo(f"{metric} — estimator {est} — preprocessor {prep} (90% CI by bootstrap over papers)")
    click.echo(f"{'rank':>9}  {'candidate':<24} {'score':>8}  {'90% CI':>19}  {'papers':>6}  vs human")
    for r in rows:
        mark = {"human": " [human baseline]", "control": " [control]"}.get(r["kind"], "")
        vs = "" if r["diff_vs_human"] is None else f"{r['diff_vs_human']:+.2f} (p={r['p_vs_human']:.3f})"
        rank = f"{r['rank']} [{r['rank_low']:.0f}-{r['rank_high']:.0f}]"
        click.echo(f"{rank:>9}  {r['candidate'] + mark:<24} {r['score']:>8.2f}  "
                   f"[{r['ci90_low']:>7.2f}, {r['ci90_high']:>7.2f}]  {r['papers']:>6}  {vs}")

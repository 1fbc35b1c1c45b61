"""`grebench leaderboard`: the stored ranked tables of one metric (computed by the scoring stage)."""

from __future__ import annotations

from typing import Any

import click

from grebench.cli._common import emit_json, headline_metric, metric_choice, reader_store
from grebench.cli._options import setting_option, settings_options
from grebench.settings import Settings


def _pick(boards: list[dict[str, Any]], key: str, wanted: str | None, what: str) -> str:
    """The stored id matching an option (exact, or the only id starting with it), else the headline board's
    (``boards`` come in headline order: :func:`grebench.scoring.headline_first`)."""
    ids = sorted({b[key] for b in boards})
    if wanted:
        if wanted in ids:
            return wanted
        matches = [i for i in ids if i.startswith(wanted) or i.split("@")[0] == wanted
                   or i.split("-v")[0] == wanted]
        if len(matches) == 1:
            return matches[0]
        raise click.ClickException(f"no single {what} matches {wanted!r}; scored with: {', '.join(ids) or 'none'}")
    if not boards:
        raise click.ClickException(f"no board was scored with any {what}")
    return str(boards[0][key])


@click.command("leaderboard")
@click.option("--metric", default=headline_metric(), show_default=True, type=metric_choice(),
              help="Metric to rank by.")
@setting_option("estimator", default="the headline board's: a language model before a fast proxy",
                extra_help="A stored estimator id or a prefix of the spec works too.")
@setting_option("preprocessor", default="the headline board's", extra_help="A stored preprocessor id works too.")
@click.option("--venue", help="Venue id (default: every venue-year with scores).")
@click.option("--sealed", is_flag=True, help="LLM candidates only on reviews written before the human reviews "
              "were public.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON ({'boards': [...], 'rows': [...]}).")
@settings_options
@click.pass_obj
def command(settings: Settings, metric: str, estimator: str | None, preprocessor: str | None, venue: str | None,
            sealed: bool, as_json: bool) -> None:
    """Print the stored leaderboards: mean score over papers, 95% bootstrap CI over papers, rank intervals.

    The human baseline and the controls are marked; LLM candidates count only on papers whose reviews were not
    public before their training cutoff (or whose generation was sealed before the reviews appeared).  The boards
    are computed once by the scoring stage (`grebench score` or `grebench run`); this command only reads them.
    """
    from grebench.scoring import RAW_PREPROCESSOR, headline_first, metric_preprocessor, sample_facts, stored_boards
    from grebench.site import Labels, board_text

    store = reader_store(settings, "run `grebench run` first")
    try:
        boards = stored_boards(store, metric=metric, venue_id=venue, scope="sealed" if sealed else "all")
        labels = Labels.load(store)
        boards = headline_first([labels.annotate(b) for b in boards], labels.is_proxy)
    finally:
        store.con.close()
    if not boards:
        raise click.ClickException(f"no {metric} board in the store: run `grebench score --metric {metric}` "
                                   "(or `grebench run`)")
    others = sorted({(b["estimator"], labels.estimator(b["estimator"])) for b in boards})
    est = _pick(boards, "estimator", estimator, "estimator")
    others = [o for o in others if o[0] != est]
    boards = [b for b in boards if b["estimator"] == est]
    prep = _pick(boards, "preprocessor", None if metric_preprocessor(metric, "") == RAW_PREPROCESSOR else preprocessor,
                 "preprocessor")
    boards = [b for b in boards if b["preprocessor"] == prep]
    for b in boards:
        b.pop("sample_json", None)
        b["sample_text"] = sample_facts(b)["text"]
    if as_json:
        emit_json({"metric": metric, "estimator": est, "preprocessor": prep, "boards": boards,
                   "rows": [r for b in boards for r in b["rows"]],
                   "other_estimators": [o[0] for o in others]})
        return
    click.echo("\n\n".join(board_text(b, title=_title(b)) for b in boards))
    for other, label in others:
        click.echo(f"\nalso scored by {label}: `grebench leaderboard --estimator {other.split('@')[0]}`")


def _title(board: dict[str, Any]) -> str:
    """``ICLR 2026 — GEM-S (abstract) · scored by SmolLM2-135M-Instruct (hf, bfloat16) · rules preprocessor``."""
    return f"{board.get('venue') or board['venue_id']} — {board.get('title') or board['metric']}"

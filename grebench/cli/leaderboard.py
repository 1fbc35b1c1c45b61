"""`grebench leaderboard`: the stored ranked tables of one metric (computed by the scoring stage)."""

from __future__ import annotations

from datetime import UTC, date, datetime, time
from typing import Any

import click

from grebench.cli._common import emit_json, headline_metric, metric_choice, reader_store
from grebench.cli._options import setting_option, settings_options
from grebench.settings import Settings
from grebench.store import Store


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


#: The exported tables a board needs when the leaderboard is read from the last published state.
BOARD_TABLES = ("boards", "board_rows", "papers", "labels")


class AsOf(click.ParamType):
    """A date (``2026-11-20``: the end of that day) or an ISO date-time (``2026-11-20T12:00``, UTC unless it says
    otherwise), as a naive UTC datetime."""

    name = "DATE"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> datetime:
        if isinstance(value, datetime):
            return value
        text = str(value).strip()
        try:
            if len(text) == 10:
                return datetime.combine(date.fromisoformat(text), time.max)
            when = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            self.fail(f"{value!r} is not a date (YYYY-MM-DD) or an ISO date-time (YYYY-MM-DDTHH:MM[:SS][Z])",
                      param, ctx)
        return when.astimezone(UTC).replace(tzinfo=None) if when.tzinfo else when


@click.command("leaderboard")
@click.option("--metric", default=headline_metric(), show_default=True, type=metric_choice(),
              help="Metric to rank by.")
@setting_option("estimator", default="the headline board's: a language model before a fast proxy",
                extra_help="A stored estimator id or a prefix of the spec works too.")
@setting_option("preprocessor", default="the headline board's", extra_help="A stored preprocessor id works too.")
@click.option("--venue", help="Venue id (default: every venue-year with scores).")
@click.option("--sealed", is_flag=True, help="LLM candidates only on reviews written before the human reviews "
              "were public.")
@click.option("--as-of", "as_of", type=AsOf(), help="The boards as published at DATE (YYYY-MM-DD: the end of that "
              "day; or an ISO date-time, UTC): the last board version published at or before it.")
@click.option("--changes", is_flag=True, help="Print what changed in the latest board version (or --as-of's) since "
              "the version before it, and why: papers entered, new or edited reference reviews, new candidates, "
              "a changed setup, rows that moved.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON ({'boards': [...], 'rows': [...]}).")
@settings_options
@click.pass_obj
def command(settings: Settings, metric: str, estimator: str | None, preprocessor: str | None, venue: str | None,
            sealed: bool, as_of: datetime | None, changes: bool, as_json: bool) -> None:
    """Print the stored leaderboards: mean score over papers, 95% bootstrap CI over papers, rank intervals.

    The human baseline and the controls are marked; LLM candidates count only on papers whose reviews were not
    public before their training cutoff (or whose generation was sealed before the reviews appeared).  The boards
    are computed once by the scoring stage (`grebench score` or `grebench run`); this command only reads them.
    Every publish of the site keeps a board version: `--as-of DATE` prints the one published then, `--changes`
    what changed in it.  While another process writes the store, the last published boards are shown.
    """
    from grebench.scoring import RAW_PREPROCESSOR, headline_first, metric_preprocessor, sample_facts, stored_boards
    from grebench.site import Labels, board_text, version_boards

    if sealed and as_of is not None:
        raise click.UsageError("--sealed boards are not kept in board versions (a version holds the published "
                               "boards); drop --sealed or --as-of")
    reader = reader_store(settings, "run `grebench run` first", tables=BOARD_TABLES)
    store = reader.store
    try:
        labels = Labels.load(store)
        ver = None
        if as_of is not None or changes:
            ver = _version_or_fail(store, as_of)
            if changes:
                _print_changes(ver, as_json)
                return
            boards = [b for b in version_boards(ver) if b["metric"] == metric and venue in (None, b["venue_id"])]
        else:
            boards = stored_boards(store, metric=metric, venue_id=venue, scope="sealed" if sealed else "all")
        boards = headline_first([labels.annotate(b) for b in boards], labels.is_proxy)
    finally:
        reader.close()
    if not boards:
        where = f" in board version {ver['version_id']}" if ver is not None else " in the store"
        raise click.ClickException(f"no {metric} board{where}: run `grebench score --metric {metric}` "
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
    shown = None if ver is None else {"version": ver["version_id"], "published_at": ver["published_at"]}
    if as_json:
        emit_json({"metric": metric, "estimator": est, "preprocessor": prep, "boards": boards,
                   "rows": [r for b in boards for r in b["rows"]],
                   "other_estimators": [o[0] for o in others],
                   **({"board_version": shown} if shown else {}),
                   **({"published": reader.published} if reader.published else {})})
        return
    if shown is not None:
        click.echo(f"board version {shown['version']}, published {shown['published_at']} UTC\n")
    click.echo("\n\n".join(board_text(b, title=_title(b)) for b in boards))
    for other, label in others:
        click.echo(f"\nalso scored by {label}: `grebench leaderboard --estimator {other.split('@')[0]}`")


def _version_or_fail(store: Store, as_of: datetime | None) -> dict[str, Any]:
    """The version published at ``as_of`` (the latest without it), or one clear error."""
    from grebench.site import version

    found = version(store, as_of=as_of)
    if found is not None:
        return dict(found)
    first = version(store, as_of=None)
    if first is None:
        raise click.ClickException("no board version was published yet: the site stage publishes one "
                                   "(`grebench run`, `grebench site build`, or `serve`'s site job)")
    earliest = store.rows("SELECT version_id, published_at FROM board_versions ORDER BY published_at LIMIT 1")[0]
    raise click.ClickException(f"no board version was published at or before {as_of} UTC; the first is "
                               f"{earliest['version_id']}, published {earliest['published_at']} UTC")


def _print_changes(ver: dict[str, Any], as_json: bool) -> None:
    from grebench.site import changes_text

    if as_json:
        emit_json({"version": ver["version_id"], "published_at": ver["published_at"],
                   "previous": ver["previous_id"], "changes": ver["changes"]})
    else:
        click.echo(f"board version {ver['version_id']}, published {ver['published_at']} UTC")
        click.echo(changes_text(ver["changes"]))


def _title(board: dict[str, Any]) -> str:
    """``ICLR 2026 — GEM-S (abstract) · scored by SmolLM2-135M-Instruct (hf, bfloat16) · rules preprocessor``."""
    return f"{board.get('venue') or board['venue_id']} — {board.get('title') or board['metric']}"

"""`grebench leaderboard`: the stored ranked tables of one metric (computed by the scoring stage)."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, NoReturn, TypedDict, cast

import click

from grebench.cli._common import Reader, emit_json, headline_metric, metric_choice, reader_store
from grebench.cli._dates import When
from grebench.cli._dates import shown as when
from grebench.cli._options import setting_option, settings_options
from grebench.registry import PartId
from grebench.settings import Settings
from grebench.store import Store

if TYPE_CHECKING:
    from grebench.site import BoardVersion, VersionChanges


def _pick(boards: list[dict[str, Any]], key: str, wanted: str | None, what: str) -> str:
    """The stored id matching an option (exact, or the only id starting with it), else the headline board's
    (``boards`` come in headline order: :func:`grebench.scoring.headline_first`)."""
    ids = sorted({b[key] for b in boards})
    if wanted:
        if wanted in ids:
            return wanted
        matches = [i for i in ids if i.startswith(wanted) or PartId.parse(i).spec == wanted
                   or i.split("-v")[0] == wanted]
        if len(matches) == 1:
            return matches[0]
        raise click.ClickException(f"no single {what} matches {wanted!r}; scored with: {', '.join(ids) or 'none'}")
    if not boards:
        raise click.ClickException(f"no board was scored with any {what}")
    return str(boards[0][key])


#: The exported tables a board needs when the leaderboard is read from the last published state (the history follows
#: a board across refits through ``scored_setups``).
BOARD_TABLES = ("boards", "board_rows", "papers", "labels", "scored_setups", "candidates")


@click.command("leaderboard")
@click.option("--metric", type=metric_choice(),
              help=f"Metric to rank by [default: {headline_metric()}, else the metric the stored boards rank by: "
                   "gem where the papers have no abstracts].")
@setting_option("estimator", default="the headline board's: a language model before a fast proxy",
                extra_help="A stored estimator id or a prefix of the spec works too.")
@setting_option("preprocessor", default="the headline board's", extra_help="A stored preprocessor id works too.")
@click.option("--venue", help="Venue id (default: every venue-year with scores).")
@click.option("--sealed", is_flag=True, help="LLM candidates only on reviews written before the human reviews "
              "were public.")
@click.option("--as-of", "as_of", type=When(day_end=True), help="The boards as published at DATE (YYYY-MM-DD: the "
              "end of that day; or an ISO date-time, to the end of the minute or second written; UTC unless it "
              "says Z or an offset like +02:00): the last board version published at or before it.")
@click.option("--history", "show_history", is_flag=True, help="Print the board's history over the published board "
              "versions (from serve, run, site build or a replay): each version's rank with its 95% rank interval "
              "and score with its 95% CI, per candidate.")
@click.option("--changes", is_flag=True, help="Print what changed in the latest board version (or --as-of's) since "
              "the version before it, and why: papers entered, new or edited reference reviews, new candidates, "
              "a changed setup, rows that moved.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON ({'boards': [...], 'rows': [...]}).")
@settings_options
@click.pass_obj
def command(settings: Settings, metric: str | None, estimator: str | None, preprocessor: str | None, venue: str | None,
            sealed: bool, as_of: datetime | None, show_history: bool, changes: bool, as_json: bool) -> None:
    """Print the stored leaderboards: mean score over papers, 95% bootstrap CI over papers, rank intervals.

    The human baseline and the controls are marked; LLM candidates count only on papers whose reviews were not
    public before their training cutoff (or whose generation was sealed before the reviews appeared).  The boards
    are computed once by the scoring stage (`grebench score` or `grebench run`); this command only reads them.
    Every publish of the site keeps a board version: `--as-of DATE` prints the one published then, `--changes`
    what changed in it.  While another process writes the store, the last published boards are shown; when the
    store is damaged too, with the remedy on stderr and exit status 1.
    """
    if sealed and (as_of is not None or show_history):
        raise click.UsageError("--sealed boards are not kept in board versions (a version holds the published "
                               f"boards); drop --sealed or {'--history' if show_history else '--as-of'}")
    if show_history and (as_of is not None or changes):
        raise click.UsageError("--history shows every version: drop --as-of and --changes")
    named, metric = metric is not None, metric or headline_metric()
    reader = reader_store(settings, "run `grebench run` first", tables=BOARD_TABLES)
    damaged = _show(reader, metric, named, estimator, preprocessor, venue, sealed, as_of, show_history, changes,
                    as_json)
    if damaged:
        sys.exit(1)


def _show(reader: Reader, metric: str, named: bool, estimator: str | None, preprocessor: str | None,
          venue: str | None, sealed: bool, as_of: datetime | None, show_history: bool, changes: bool,
          as_json: bool) -> bool:
    """The command's work on the reader's store (``named``: the metric was named, not the headline's default);
    whether the store was damaged (what was shown is the published export)."""
    from grebench.scoring import (
        RAW_PREPROCESSOR,
        headline_first,
        metric_preprocessor,
        provenance,
        sample_facts,
        stored_boards,
    )
    from grebench.site import Labels, board_text, version_boards
    from grebench.submissions import variants_scored

    damaged = reader.damaged is not None
    store = reader.store
    try:
        labels = Labels.load(store)
        if show_history:
            _print_history(store, labels, metric, venue, as_json)
            return damaged
        ver = None
        if as_of is not None or changes:
            ver = _version_or_fail(store, as_of)
            if changes:
                _print_changes(ver, as_json)
                return damaged
            published = version_boards(ver)
        else:
            published = stored_boards(store, scope="sealed" if sealed else "all")
        boards = [b for b in published if b["metric"] == metric and venue in (None, b["venue_id"])]
        if not boards and not named:  # no headline board (papers without abstracts are scored with GEM): the other
            metric = _ranked_metric(published, venue) or metric
            boards = [b for b in published if b["metric"] == metric and venue in (None, b["venue_id"])]
            if boards and not as_json:
                click.echo(f"no {headline_metric()} board (its papers have no abstracts?): showing the {metric} "
                           "boards", err=True)
        boards = headline_first([labels.annotate(b) for b in boards], labels.is_proxy)
        # a submitted model's submitter's scored variants ("best of N"; a published version's rows keep theirs)
        variants = variants_scored(store) if ver is None else {}
        for b in boards:
            for r in b["rows"]:
                r.setdefault("variants_scored", variants.get(r["candidate"]))
        # what produced the numbers, the code commit among them, as the site's leaderboard.json says it: a version
        # keeps the provenance it was published with
        prov = (json.loads(ver["leaderboard_json"]).get("provenance") if ver is not None
                else provenance(store) if as_json else None)
    finally:
        reader.close()
    if not boards:
        _refuse_no_board(metric, venue, ver, published)
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
    shown: _Shown | None = None if ver is None else {"version": ver["version_id"], "published_at": ver["published_at"]}
    if as_json:
        emit_json({"metric": metric, "estimator": est, "preprocessor": prep, "boards": boards,
                   "rows": [r for b in boards for r in b["rows"]],
                   "other_estimators": [o[0] for o in others],
                   **({"board_version": shown} if shown else {}),
                   **({"published": reader.published} if reader.published else {}),
                   "provenance": prov})
        return damaged
    if shown is not None:
        click.echo(f"board version {shown['version']}, published {when(shown['published_at'])}\n")
    click.echo("\n\n".join(board_text(b, title=_title(b)) for b in boards))
    for other, label in others:
        click.echo(f"\nalso scored by {label}: `grebench leaderboard --estimator {PartId.parse(other).spec}`")
    return damaged


def _ranked_metric(boards: Sequence[Mapping[str, Any]], venue: str | None) -> str | None:
    """The metric the stored boards rank by when the headline has none: the first default metric with a board."""
    from grebench.scoring import default_metrics

    have = {b["metric"] for b in boards if venue in (None, b["venue_id"])}
    return next((m for m in default_metrics() if m in have), next(iter(sorted(have)), None))


class _Shown(TypedDict):
    """The board version a ``--as-of`` board is read from, as the output names it."""

    version: str
    published_at: datetime


def _refuse_no_board(metric: str, venue: str | None, ver: BoardVersion | None,
                     published: list[dict[str, Any]]) -> NoReturn:
    """End the command saying why no board is shown and naming what exists: an unknown ``--venue`` is a usage
    error listing the venues with boards (exit 2); otherwise the metrics there, or that nothing was scored yet."""
    where = f"in board version {ver['version_id']} (published {when(ver['published_at'])})" if ver is not None \
        else "in the store"
    venues = sorted({(b["venue_id"], b.get("venue") or b["venue_id"]) for b in published})
    if venue is not None and venues and venue not in {v for v, _ in venues}:
        known = ", ".join(f"{v} ({name})" for v, name in venues)
        raise click.UsageError(f"--venue {venue}: no such venue {where}; venues with boards: {known}")
    metrics = sorted({b["metric"] for b in published if venue in (None, b["venue_id"])})
    if metrics:
        raise click.ClickException(f"no {metric} board {where}{'' if venue is None else ' for ' + venue}; boards "
                                   f"there rank by: {', '.join(metrics)} (--metric), or run "
                                   f"`grebench score --metric {metric}`")
    raise click.ClickException(f"no board {where}: run `grebench score --metric {metric}` (or `grebench run`)")


def _version_or_fail(store: Store, as_of: datetime | None) -> BoardVersion:
    """The version published at ``as_of`` (the latest without it), or one clear error naming what exists."""
    from grebench.site import version, versions

    found = version(store, as_of=as_of)
    if found is not None:
        return {**found}  # a copy
    listed = versions(store)
    if not listed:
        raise click.ClickException("no board version was published yet: the site stage publishes one once boards "
                                   "exist (`grebench run`, `grebench site build`, or `serve`'s site job)")
    first, last = listed[-1], listed[0]
    assert as_of is not None
    raise click.ClickException(f"no board version was published at or before {when(as_of)}; {len(listed)} "
                               f"version(s) exist, the first {first['version_id']} published "
                               f"{when(first['published_at'])}, the latest {last['version_id']} published "
                               f"{when(last['published_at'])} (`grebench leaderboard --history` lists them)")


def _print_history(store: Store, labels: Any, metric: str, venue: str | None, as_json: bool) -> None:
    """Every board of ``metric`` (and ``venue``) followed across the published board versions."""
    from grebench.scoring import rank_range
    from grebench.site import version_history

    lines = version_history(store, venue_id=venue, metric=metric)
    if as_json:
        emit_json({"metric": metric, "venue": venue, "boards": lines})
        return
    if not lines:
        everything = version_history(store)
        if not everything:
            raise click.ClickException("no board version was published yet: the site stage publishes one once "
                                       "boards exist (`grebench run`, `grebench site build`, or `serve`'s site job)")
        _refuse_no_board(metric, venue, None, [{"venue_id": s["venue_id"], "venue": s["venue"],
                                                "metric": s["metric"]} for s in everything])
    for i, line in enumerate(lines):
        title = (f"{line['venue'] or line['venue_id']} — {labels.metric(line['metric'])} · "
                 f"{labels.estimator(line['estimator'])} · {line['preprocessor']} [{line['scope']} boards]")
        click.echo(("\n" if i else "") + f"{title}: {len(line['points'])} version(s)")
        for point in line["points"]:
            origin = "" if point["origin"] == "site" else f", from a {point['origin']}"
            click.echo(f"  {when(point['published_at'])} (version {point['version_id']}{origin})")
            for r in point["rows"]:
                span = rank_range(r)
                rank = ("ref" if r.get("status") == "reference" else "-") if r["rank"] is None else \
                    f"#{r['rank']}" + (f" ({span})" if span else "")
                ci = "" if r.get("ci95_low") is None else f" [{r['ci95_low']:.3f}, {r['ci95_high']:.3f}]"
                score = "-" if r.get("score") is None else f"{r['score']:.3f}"
                click.echo(f"    {rank:<12} {r['candidate']:<28} {score}{ci} on {r.get('papers')}")


def _print_changes(ver: BoardVersion, as_json: bool) -> None:
    from grebench.site import changes_text

    if as_json:
        emit_json({"version": ver["version_id"], "published_at": ver["published_at"],
                   "previous": ver["previous_id"], "changes": ver["changes"]})
    else:
        click.echo(f"board version {ver['version_id']}, published {when(ver['published_at'])}")
        # every version published since versions were (the site stage) stores its changes
        click.echo(changes_text(cast("VersionChanges", ver["changes"])))


def _title(board: dict[str, Any]) -> str:
    """``ICLR 2026 — GEM-S (abstract) · scored by SmolLM2-135M-Instruct (hf, bfloat16) · rules preprocessor``."""
    return f"{board.get('venue') or board['venue_id']} — {board.get('title') or board['metric']}"

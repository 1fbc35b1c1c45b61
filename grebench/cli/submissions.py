"""`grebench submissions`: the operator's view of submitted models, and vouching for a declared cutoff.

A submitted model's declared training cutoff is information only: until the operator vouches for it
(``grebench submissions approve ID``), the model counts only on papers whose reviews were still hidden when it
wrote its review (sealed).  Every approval is recorded in the store (``board_changes``).  Approval runs the copy
check again on the stored reviews; a flag refuses it with the evidence and holds the submission (``list`` shows
why).  A submission that failed or was stopped is never ranked, approved or not (it did not review the sample).
"""

from __future__ import annotations

import click

from grebench.cli._common import emit_json, writer_store
from grebench.cli._options import settings_options
from grebench.settings import Settings


@click.group("submissions")
@settings_options
def command() -> None:
    """Submitted models: list them, vouch for a declared cutoff, withdraw one, the public log of every try."""


@command.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON.")
@settings_options
@click.pass_obj
def list_command(settings: Settings, as_json: bool) -> None:
    """Accepted submissions: id, model, status, declared cutoff, whether it is vouched for, and why one failed or
    is held (an approval the copy check refused, with its evidence); the papers whose reviews do not count as
    sealed until a possible link to an earlier version is decided (`grebench links --flags`), with the reason."""
    from grebench.store import held_reasons
    from grebench.submissions import held_submissions

    with writer_store(settings) as store:
        rows = store.rows("SELECT s.id, s.model_name, s.status, s.cutoff AS declared_cutoff, c.cutoff AS "
                          "vouched_cutoff, s.reason FROM submissions s LEFT JOIN candidates c ON c.name = "
                          "s.model_name ORDER BY s.created_at")
        held = held_submissions(store)
        papers: dict[str, set[str]] = {}
        for g in store.rows("SELECT DISTINCT candidate, paper_id FROM generations WHERE status = 'ok'"):
            papers.setdefault(g["candidate"], set()).add(g["paper_id"])
        possible = {name: held_reasons(store, ids) for name, ids in papers.items()}
    for r in rows:
        r["held"] = held.get(r["model_name"])
        r["possible_links"] = possible.get(r["model_name"]) or None
    if as_json:
        emit_json([{k: (None if v is None else v if k == "possible_links" else str(v)) for k, v in r.items()}
                   for r in rows])
        return
    for r in rows:
        vouched = f"vouched (cutoff {r['vouched_cutoff']})" if r["vouched_cutoff"] else "not vouched: sealed only"
        click.echo(f"{r['id']}  {r['model_name']}  {r['status']}  declared cutoff {r['declared_cutoff']}  {vouched}")
        if r["held"]:
            click.echo(f"    HELD: {r['held']}")
        elif r["status"] == "failed" and r["reason"]:
            click.echo(f"    failed (never ranked): {r['reason']}")
        for paper, reasons in sorted((r["possible_links"] or {}).items()):
            click.echo(f"    not sealed on {paper} until decided: {'; '.join(reasons)}")


@command.command("approve")
@click.argument("submission_id")
@click.option("--note", default="", help="Why the operator vouches (kept in the store's board changes).")
@click.option("--override", default=None, metavar="REASON",
              help="Approve over a hold (copy check, information view, shift or sealed-gap test) or before the "
                   "sealed-gap test can run; REASON is kept in the public audit with the evidence overridden, and the "
                   "same evidence does not hold the model again (new evidence does).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@settings_options
@click.pass_obj
def approve_command(settings: Settings, submission_id: str, note: str, override: str | None,
                    as_json: bool) -> None:
    """Vouch for the declared cutoff of submission SUBMISSION_ID (its model then counts on papers after it).

    Refused while a check holds the model, and (``approval_needs_sealed``, the default) until its sealed-gap test
    can run: its information on papers whose reviews were public when it wrote, against its own on sealed papers."""
    from grebench.submissions import SubmissionError, approve_submission

    if override is not None and not override.strip():
        raise click.UsageError("--override needs a reason (kept in the public audit)")
    with writer_store(settings) as store:
        try:
            result = approve_submission(store, submission_id, note, settings, override or "")
        except SubmissionError as exc:
            raise click.ClickException(str(exc)) from None
    if as_json:
        emit_json(result)
    else:
        click.echo(f"{result['detail']}; recompute the boards (`grebench score`) to count it on those papers")


@command.command("log")
@click.option("--json", "as_json", is_flag=True, help="Print every entry as JSON (docs/submissions.md).")
@settings_options
@click.pass_obj
def log_command(settings: Settings, as_json: bool) -> None:
    """The public submissions log: every submission ever made (accepted, refused with its reason class, withdrawn,
    held, scored), newest first, grouped by submitter: date, public handle, model, endpoint fingerprint, scores.
    Never a key, an endpoint URL or an e-mail address; what the site's submissions.html and the app show."""
    from grebench.cli._common import reader_store
    from grebench.submissions import SubmissionQueue, grouped, queue_path, submission_log

    queue = SubmissionQueue(queue_path(settings)) if queue_path(settings).exists() else None
    if not settings.db_path.exists():
        from grebench.store import open_store

        store = open_store(None)  # nothing accepted yet: the queue's own entries
        try:
            entries = submission_log(store, queue)
        finally:
            store.con.close()
    else:
        reader = reader_store(settings, "run `grebench serve` or `grebench submit` first")
        try:  # the queue adds what the scheduler has not copied yet (not to a published export: its salt differs)
            entries = submission_log(reader.store, queue if reader.published is None else None)
        finally:
            reader.close()
    if as_json:
        emit_json(entries)
        return
    if not entries:
        click.echo("no submissions yet")
        return
    for group in grouped(entries):
        click.echo(f"{group['submitter']}: {group['variants']} submission(s), {group['variants_scored']} scored")
        for e in group["entries"]:
            why = f" ({e['reason_class']})" if e["reason_class"] else ""
            best = "; ".join(f"{s['board_id']} {s['score']:.3f}" for s in e["scores"] if s["score"] is not None)
            upload = " (reviews uploaded)" if e["kind"] == "upload" else ""
            click.echo(f"    {e['submitted_at']}  {e['id']}  {e['model_name'] or '(invalid name)'}{upload}  "
                       f"endpoint {e['endpoint_fingerprint'] or '-'}  {e['status']}{why}"
                       + (f"  scores: {best}" if best else ""))


@command.command("withdraw")
@click.argument("submission_id")
@click.option("--note", default="", help="Why (kept in the store's board changes).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@settings_options
@click.pass_obj
def withdraw_command(settings: Settings, submission_id: str, note: str, as_json: bool) -> None:
    """Withdraw submission SUBMISSION_ID at its submitter's request: never evaluated further, its key deleted; it
    stays in the public log, shown as withdrawn (nothing is deleted)."""
    from grebench.endpoints import KeyVault
    from grebench.submissions import SubmissionError, SubmissionQueue, queue_path, withdraw_submission

    try:
        vault = KeyVault()
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    queue = SubmissionQueue(queue_path(settings))
    with writer_store(settings) as store:
        try:
            result = withdraw_submission(store, queue, vault, submission_id, note)
        except SubmissionError as exc:
            raise click.ClickException(str(exc)) from None
    if as_json:
        emit_json(result)
    else:
        click.echo(result["detail"])

"""Evaluating queued submissions: accept them into the store, generate their reviews, check them, close them.

A submitted base URL is checked again just before its evaluation and every call goes to the address that check
pinned (:func:`grebench.llm.pinned_endpoints`): no second DNS lookup, no redirect followed.  The key lives in
memory only for the evaluation and is deleted with the submission; a stored key this process cannot decrypt (a
wrong ``GREBENCH_SECRET_KEY``) leaves the submission running with its ciphertext, and says so.

Nobody blocks the service: running submissions take turns on the worker (round robin, one time slice each per
round: :mod:`grebench.submissions._turns`), and the calls of each run under its own budgets (call deadline and
retries, failures in a row and the failure rate over a window, wall time of its own turns); a submission that
spends one is stopped and failed with the reason.  Nothing anonymous buys rank: the reviews are generated on the
papers the *declared* cutoff calls clean (and on papers whose reviews are not public yet), then pass the copy
detector that uploads pass (:func:`grebench.bench.copied_shares`); one copy fails the whole submission and none of
its reviews is scored.
The candidate itself (kind ``submitted``) has no cutoff until the operator vouches for it
(:func:`approve_submission`), so until then only its sealed reviews count.

Queued imports (files of reviews written elsewhere, uploaded in the app) are imported here too: checked again
against the live store and written in one transaction each (:func:`grebench.submissions.accept_queued_imports`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from datetime import date
from typing import Any, NotRequired, TypedDict, cast

from grebench.endpoints import KeyUnreadable, KeyVault
from grebench.progress import NoProgress, Progress
from grebench.scoring import GAP_MIN_PAPERS, information_flags, information_shift, sealed_gap
from grebench.settings import Settings
from grebench.store import Store, utcnow
from grebench.submissions._copycheck import check_copies
from grebench.submissions._form import SubmissionError
from grebench.submissions._holds import (
    APPROVAL_REFUSED,
    OVERRIDE,
    gap_evidence,
    hold,
    information_evidence,
    shift_evidence,
)
from grebench.submissions._imports import ImportOutcome, accept_queued_imports
from grebench.submissions._keys import key_in_env
from grebench.submissions._log import sync_log
from grebench.submissions._nearcopy import unseal_near_copies
from grebench.submissions._queue import SubmissionQueue, accept_queued_submissions, finish_submission
from grebench.submissions._turns import TALLY_KEYS, stored_totals, submission_settings, take_turn, turn_state

__all__ = ["approve_submission", "evaluate_queued", "refuse_copied_generations", "submission_settings"]
log = logging.getLogger(__name__)


def _pin_submitted(settings: Settings, resolver: Any, api_base: str | None) -> tuple[list[Any], str | None]:
    """The pinned endpoint of a submitted base URL, checked again now, or the reason it may not be called.

    The address is pinned from this fresh check (not the one made at submission time): whatever DNS says now
    must still be a public address, and every call of this evaluation then goes to that one address.
    """
    from grebench.endpoints import URLRejected, check_submitted_url

    if not api_base:
        return [], None
    try:
        endpoint = check_submitted_url(api_base, settings, resolver)
    except URLRejected as exc:
        return [], f"base URL rejected before evaluation: {exc}"
    if endpoint.url != api_base.rstrip("/"):
        return [], "base URL rejected before evaluation: it no longer normalises to the accepted URL"
    return [endpoint], None


def refuse_copied_generations(store: Store, name: str, settings: Settings | None = None) -> str | None:
    """Why a candidate's reviews are refused (some copy their paper's public reviews, or do not read as text), or
    None.

    The copy check and the prose test (:func:`grebench.submissions._copycheck.check_copies`, the one approval runs
    too) on every review of the candidate; on a flag, every review of the candidate is marked failed (never scored)
    and the submission is held for the operator with the evidence (approval refuses it on the same evidence).

    Reviews the near-paper copy check flags (they carry another, nearby paper's public reviews: an unlinked earlier
    version of the paper, copied) do not refuse the candidate: they count as written with public reviews in view
    (:func:`unseal_near_copies`), so only once the operator vouches for its cutoff, and on the public side of the
    sealed-gap test that approval runs.
    """
    check = check_copies(store, name, settings)
    if not check.flagged:
        unseal_near_copies(store, check)
        return None
    reason = f"refused: {check.summary()}; none of its reviews is scored"
    with store.transaction() as con:
        con.execute("UPDATE generations SET status = 'failed', error = ? WHERE candidate = ?", [reason[:500], name])
        con.execute("DELETE FROM scores WHERE candidate = ?", [name])
        con.execute("INSERT INTO board_changes VALUES (?, 'submission', ?, ?)", [utcnow(), name, reason[:2000]])
        hold(store, name, f"held for the operator: {reason}")
    return reason


class _RunningRow(TypedDict):
    id: str
    model_name: str
    cutoff: date | None


class _Evaluated(TypedDict):
    calls_made: int
    cached: int
    gave_up: int
    reviews: int
    failed: int
    tokens_in: int
    tokens_out: int
    cost_usd: float
    turns: int
    own_s: float
    stopped: NotRequired[str]
    error: NotRequired[str]
    copied: NotRequired[str]


class EvaluationReport(TypedDict):
    """What became of a running submission in a queue pass: refused before its turns (``error``), or evaluated
    (this pass's calls, the stored totals of its reviews, its turns and own time; why it stopped or failed, and the
    copy check's refusal, when they did)."""

    id: str
    ok: bool
    error: NotRequired[str]
    calls_made: NotRequired[int]
    cached: NotRequired[int]
    gave_up: NotRequired[int]
    reviews: NotRequired[int]
    failed: NotRequired[int]
    tokens_in: NotRequired[int]
    tokens_out: NotRequired[int]
    cost_usd: NotRequired[float]
    turns: NotRequired[int]
    own_s: NotRequired[float]
    stopped: NotRequired[str]
    copied: NotRequired[str]


@dataclass
class _Running:
    """A running submission taking turns in this queue pass: what its turns need, and what they did."""

    sub_id: str
    name: str
    candidate: Any                      # the declared candidate (its cutoff chooses the papers)
    pins: list[Any]
    secret: Any
    papers: list[str]
    tally: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TALLY_KEYS, 0))
    turns: int = 0
    stopped: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class _Pass:
    """What every submission of one queue pass is evaluated with: the store, the settings, the run, the queue file,
    the key vault and the resolver of submitted host names."""

    store: Store
    settings: Settings
    run_id: str
    queue: SubmissionQueue
    vault: KeyVault
    resolver: Any


def _prepare(qp: _Pass, sub: _RunningRow) -> tuple[_Running | None, EvaluationReport | None]:
    """A running submission ready for its turns, or the report of why it cannot have one (None: nothing to say)."""
    from grebench.bench import is_clean, stored_candidate, unreviewed_paper_ids

    store, settings, queue, vault, resolver = qp.store, qp.settings, qp.queue, qp.vault, qp.resolver
    row = store.rows("SELECT * FROM candidates WHERE name = ?", [sub["model_name"]])
    if not row:
        finish_submission(queue, vault, sub["id"], False, "candidate missing from the store", store)
        return None, None
    pins, refused = _pin_submitted(settings, resolver, row[0]["api_base"])
    if refused is not None:
        finish_submission(queue, vault, sub["id"], False, refused, store)
        return None, {"id": sub["id"], "ok": False, "error": refused}
    stored = queue.rows("SELECT key_ciphertext FROM submissions WHERE id = ?", [sub["id"]])
    try:
        secret = vault.open(sub["id"], stored[0]["key_ciphertext"] if stored else None)
    except KeyUnreadable as exc:  # the operator's setting is wrong: keep the ciphertext, try again next pass
        log.error("submission %s not evaluated: %s", sub["id"], exc)
        return None, {"id": sub["id"], "ok": False, "error": f"{exc}; the submission stays running and its stored "
                      "key is kept: fix GREBENCH_SECRET_KEY and run the queue again"}
    papers = [r["paper_id"] for r in store.rows("SELECT paper_id FROM baseline_splits ORDER BY paper_id")]
    papers += unreviewed_paper_ids(store)
    # the declared cutoff chooses where to generate (its clean papers); the board trusts it only once vouched
    # its calls are its own: no other candidate's cached reply (nor its time) ever serves it
    declared = replace(stored_candidate(row[0]), cutoff=row[0]["cutoff"] or sub["cutoff"],
                       cache_owner=f"submission:{sub['id']}")
    # only those papers (as generate_for's clean_only): a paper it would skip is not offered turn after turn
    public = {r["paper_id"]: r["reviews_public_at"] for r in store.rows("SELECT paper_id, reviews_public_at "
                                                                        "FROM papers")}
    papers = [p for p in papers if p in public and is_clean(declared.cutoff, public[p])]
    return _Running(sub["id"], sub["model_name"], declared, pins, secret, papers), None


def _turn(qp: _Pass, sub: _Running, progress: Progress) -> bool:
    """Give one submission its turn; whether its evaluation is over."""
    from grebench.llm import pinned_endpoints

    store, settings, run_id = qp.store, qp.settings, qp.run_id
    sub.turns += 1
    try:
        with pinned_endpoints(sub.pins), key_in_env(sub.sub_id, None if sub.secret is None else
                                                    sub.secret.reveal()) as env:
            result = take_turn(store, settings, run_id, sub.sub_id, replace(sub.candidate, api_key_env=env),
                               sub.papers, progress)
    except Exception as exc:  # a hostile or broken endpoint fails its own submission, never the job
        sub.error = f"{type(exc).__name__}: {exc}"[:2000]
        return True
    for key, value in result.tally.items():
        sub.tally[key] += value
    sub.stopped = result.stopped
    return result.finished


def _close(qp: _Pass, sub: _Running) -> EvaluationReport:
    """End a submission's evaluation: the copy check, its status and reason, the key deleted; its summary."""
    store, settings, queue, vault = qp.store, qp.settings, qp.queue, qp.vault
    # calls made in this pass; reviews, failures, tokens and cost of every stored call (exact over passes)
    summary: _Evaluated = {"calls_made": sub.tally["calls_made"], "cached": sub.tally["cached"],
                           "gave_up": sub.tally["gave_up"], **stored_totals(store, sub.name), "turns": sub.turns,
                           "own_s": round(turn_state(store, sub.sub_id)[1], 1)}
    if sub.stopped is not None:
        summary["stopped"] = sub.stopped
    if sub.error is not None:
        summary["error"] = sub.error
        summary["failed"] = summary["failed"] or 1
    copied = refuse_copied_generations(store, sub.name, settings)
    if copied is not None:
        summary["copied"] = copied
    ok = not (summary.get("failed") or summary.get("gave_up") or "error" in summary or "stopped" in summary
              or copied)
    reason = None if ok else (copied or summary.get("stopped") or summary.get("error")
                              or f"{summary.get('failed', 0)} generation(s) failed")
    finish_submission(queue, vault, sub.sub_id, ok, reason, store)
    return {"id": sub.sub_id, "ok": ok, **summary}


def evaluate_queued(store: Store, settings: Settings, run_id: str, queue: SubmissionQueue, vault: KeyVault,
                    resolver: Any = None, progress: Progress | None = None) -> QueuePass:
    """Accept queued submissions, evaluate the running ones in turns, import queued review files; the summary.

    Round robin: every running submission gets one turn (:func:`grebench.submissions._turns.take_turn`) per
    round, oldest first, until each is finished or stopped; submissions queued meanwhile are accepted between
    rounds and join the next one.  ``resolver`` resolves submitted host names (None: the system resolver; tests
    pass a table so that no DNS query leaves the machine).
    """
    display = progress or NoProgress()
    qp = _Pass(store, settings, run_id, queue, vault, resolver)
    sync_log(store, queue)  # the public log: tries refused or withdrawn in the queue since the last pass
    accepted: list[str] = []
    done: list[EvaluationReport] = []
    seen: set[str] = set()
    running: dict[str, _Running] = {}
    while True:
        accepted += [c["name"] for c in accept_queued_submissions(store, queue, settings, resolver)]
        for sub in cast(list[_RunningRow], store.rows("SELECT id, model_name, cutoff FROM submissions WHERE "
                                                      "status = 'running' ORDER BY created_at, id")):
            if sub["id"] in seen:
                continue
            seen.add(sub["id"])
            ready, report = _prepare(qp, sub)
            if report is not None:
                done.append(report)
            if ready is not None:
                running[ready.sub_id] = ready
        if not running:
            break
        for sub_id, sub_state in list(running.items()):
            if _turn(qp, sub_state, display):
                done.append(_close(qp, sub_state))
                del running[sub_id]
    imported = accept_queued_imports(store, queue, settings)
    sync_log(store, queue)
    for item in imported:  # a refused file is the submitter's; a store failure is the job's (its record says so)
        if item["our_failure"]:
            # an import that failed on our side always says why (accept_queued_imports)
            store.record_failure(run_id, "submissions", f"import {item['id']}", cast(str, item["reason"]))
    return {"accepted": accepted, "evaluated": done, "imported": imported}


class QueuePass(TypedDict):
    """The submissions stage's summary (:func:`evaluate_queued`): submissions accepted (their names), evaluated,
    and queued review files imported."""

    accepted: list[str]
    evaluated: list[EvaluationReport]
    imported: list[ImportOutcome]


class Approval(TypedDict):
    """A vouched submission (:func:`approve_submission`): its candidate, the cutoff now trusted, the audit line and
    how many stored reviews the copy check read."""

    id: str
    candidate: str
    cutoff: str
    detail: str
    checked: int


def approve_submission(store: Store, sub_id: str, note: str = "", settings: Settings | None = None,
                       override: str = "") -> Approval:
    """The operator vouches for a submitted model's declared cutoff: its candidate gets that cutoff (its reviews
    on papers whose reviews became public after it count from the next board computation).  Audited in the store
    (``board_changes``).  :class:`SubmissionError` when there is nothing to approve.

    Approval first runs the copy check and the prose test of evaluation again on what is stored now
    (:func:`check_copies`: every review of the candidate, including any added since it was evaluated or refused then,
    against today's public reviews): a flag refuses the approval with the evidence (:class:`SubmissionError`) and
    changes nothing but an audit row; so does the information view of a copy
    (:func:`grebench.scoring.information_flags`: a paper whose references the candidate explains far beyond what the
    human review of that paper explains; the pipeline runs it again whenever scores change,
    :func:`grebench.submissions.recheck_held`), the submission-level test of its information ratios against the
    honest reviewers' (:func:`grebench.scoring.information_shift`) and the sealed-gap test
    (:func:`grebench.scoring.sealed_gap`: its information where the reviews were public when it wrote against its
    own where they were sealed), both shown with their p in the approval's audit line either way
    (``board_changes`` kind :data:`APPROVAL_REFUSED`), so the submission stays held for the operator.  Reviews the
    near-paper copy check flags now are unsealed first (:func:`unseal_near_copies`), so the sealed-gap test reads them
    on its public side; they are named in the audit line.

    With ``settings.submissions.approval_needs_sealed`` (the default), approval also waits until the sealed-gap test
    can run (enough papers of each kind scored): refused with what is missing, nothing written.  ``override`` (the
    operator's reason, required to be non-empty) approves over any of that: the audit line names the evidence
    overridden and the reason, and :func:`recheck_held` does not hold again on that evidence (new evidence still
    holds)."""
    rows = store.rows("SELECT s.id, s.model_name, s.cutoff, s.status, c.kind, c.cutoff AS vouched "
                      "FROM submissions s LEFT JOIN candidates c ON c.name = s.model_name WHERE s.id = ?", [sub_id])
    if not rows:
        raise SubmissionError(f"no accepted submission {sub_id!r} in the store (the queue job accepts queued ones)")
    sub = rows[0]
    if sub["kind"] is None:
        raise SubmissionError(f"submission {sub_id} has no candidate in the store (status {sub['status']})")
    if sub["vouched"] is not None:
        raise SubmissionError(f"submission {sub_id} ({sub['model_name']}) is vouched for already: cutoff "
                              f"{sub['vouched']}")
    if sub["cutoff"] is None:
        raise SubmissionError(f"submission {sub_id} declared no cutoff")
    now = utcnow()
    override = override.strip()[:500]
    check = check_copies(store, sub["model_name"], settings)
    unseal_near_copies(store, check)  # before the sealed-gap test: those reviews are on its public side
    informed = information_flags(store, sub["model_name"])
    shift = information_shift(store, sub["model_name"])
    gap = sealed_gap(store, sub["model_name"])
    found: list[tuple[str, str]] = []  # (label, evidence in words)
    if check.flagged:
        found.append(("copy check", check.summary()))
    if informed:
        found.append(("information view", information_evidence(informed)))
    if shift is not None and shift.held:
        found.append(("information shift test", shift_evidence(shift)))
    if gap is not None and gap.held:
        found.append(("sealed-gap test", gap_evidence(gap)))
    needs_sealed = settings.submissions.approval_needs_sealed if settings is not None else True
    waiting = needs_sealed and (gap is None or not gap.testable)
    if found and not override:
        detail = (f"approval of submission {sub_id} refused, held for the operator: "
                  f"{'; '.join(words for _, words in found)}; the declared cutoff {sub['cutoff']} is not trusted "
                  "(the operator may approve over it: --override REASON)")
        store.con.execute("INSERT INTO board_changes VALUES (?, ?, ?, ?)",
                          [now, APPROVAL_REFUSED, sub["model_name"], detail[:2000]])
        log.warning("%s", detail)
        raise SubmissionError(detail)
    if waiting and not override:
        have = (f"{gap.sealed} sealed and {gap.public} public papers scored" if gap is not None
                else "no paper of it scored beside the human baseline yet")
        raise SubmissionError(
            f"approval of submission {sub_id} waits for sealed evidence: {have}; the sealed-gap test needs "
            f"{GAP_MIN_PAPERS} of each (papers whose reviews were still hidden when it wrote are scored once their "
            "reviews are public; the copy check passed, nothing was written). The operator may approve without it: "
            "--override REASON")
    if waiting:
        found.append(("no sealed-gap test yet", "approved before its sealed-gap test could run"
                      + ("" if gap is None else f" ({gap.describe()})")))
    detail = (f"submission {sub_id} vouched for by the operator: declared cutoff {sub['cutoff']} trusted"
              + (f" ({note.strip()[:500]})" if note.strip() else "")
              + ("" if check.flagged else f"; copy check passed on {check.checked} stored reviews")
              + (f"; {check.near_summary()}: counted as written with public reviews in view" if check.near_copies
                 else "")
              + (f"; {shift.describe()}" if shift is not None else "")
              + (f"; {gap.describe()}" if gap is not None and gap.testable else ""))
    if found:  # an override: what it overrides and why, in the public audit
        detail += (f"; {OVERRIDE}: {', '.join(label for label, _ in found)} (reason: {override}); evidence: "
                   f"{'; '.join(words for _, words in found)}")
    if sub["status"] != "finished":  # the cutoff is trusted, but a failed or stopped run chose its papers
        detail += (f"; the submission is {sub['status']}: it stays unranked on every board whose sample it did not "
                   "review (grebench/scoring/_coverage.py)")
    with store.transaction() as con:
        con.execute("UPDATE candidates SET cutoff = ?, updated_at = ? WHERE name = ?",
                    [sub["cutoff"], now, sub["model_name"]])
        con.execute("INSERT INTO board_changes VALUES (?, 'submission', ?, ?)",
                    [now, sub["model_name"], detail[:4000]])
    log.info("%s", detail)
    return {"id": sub_id, "candidate": sub["model_name"], "cutoff": str(sub["cutoff"]), "detail": detail,
            "checked": check.checked}

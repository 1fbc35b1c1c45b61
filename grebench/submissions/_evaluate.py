"""Evaluating queued submissions: accept them into the store, generate their reviews, check them, close them.

A submitted base URL is checked again just before its evaluation and every call goes to the address that check
pinned (:func:`grebench.llm.pinned_endpoints`): no second DNS lookup, no redirect followed.  The key lives in
memory only for the evaluation and is deleted with the submission; a stored key this process cannot decrypt (a
wrong ``GREBENCH_SECRET_KEY``) leaves the submission running with its ciphertext, and says so.

Nobody blocks the service: the calls of one submission run under their own budgets
(``submission_call_timeout_s``, ``submission_max_retries``, ``submission_max_consecutive_failures``,
``submission_max_wall_s``), checked between batches of calls; a submission that spends one is stopped and failed
with the reason.  Nothing anonymous buys rank: the reviews are generated on the papers the *declared* cutoff calls
clean (and on papers whose reviews are not public yet), then pass the copy detector that uploads pass
(:func:`grebench.bench.copied_shares`); one copy fails the whole submission and none of its reviews is scored.
The candidate itself (kind ``submitted``) has no cutoff until the operator vouches for it
(:func:`approve_submission`), so until then only its sealed reviews count.

Queued imports (files of reviews written elsewhere, uploaded in the app) are imported here too: checked again
against the live store and written in one transaction each (:func:`grebench.submissions.accept_queued_imports`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any

from grebench.endpoints import KeyUnreadable, KeyVault
from grebench.progress import NoProgress, Progress
from grebench.settings import Settings
from grebench.store import Store, utcnow
from grebench.submissions._imports import accept_queued_imports
from grebench.submissions._keys import key_in_env
from grebench.submissions._queue import SubmissionError, SubmissionQueue, accept_queued_submissions, finish_submission

log = logging.getLogger(__name__)
_clock = time.monotonic  # the wall-time budget's clock (tests replace it)


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


def submission_settings(settings: Settings) -> Settings:
    """The settings one submission's calls run under: the call deadline and retries capped by the submission
    budgets (a submitted endpoint never gets the operator's long deadlines)."""
    return settings.replace(llm_timeout_s=min(settings.llm_timeout_s, settings.submission_call_timeout_s),
                            llm_max_retries=min(settings.llm_max_retries, settings.submission_max_retries))


def _generate_within_budget(store: Store, settings: Settings, run_id: str, candidate: Any, papers: list[str],
                            progress: Progress) -> dict[str, Any]:
    """Generate in batches of ``bench_concurrency`` papers; stop when a budget is spent (``stopped``: why)."""
    from grebench.bench import generate_for

    capped = submission_settings(settings)
    batch_size = max(1, settings.bench_concurrency)
    started = _clock()
    total: dict[str, Any] = {"calls_made": 0, "cached": 0, "failed": 0, "gave_up": 0, "tokens_in": 0,
                             "tokens_out": 0, "cost_usd": 0.0}
    in_a_row = 0
    for i in range(0, len(papers), batch_size):
        elapsed = _clock() - started
        if elapsed >= settings.submission_max_wall_s:
            total["stopped"] = (f"stopped: wall-time budget spent ({elapsed:.0f} s of "
                                f"submission_max_wall_s = {settings.submission_max_wall_s:.0f} s) after {i} of "
                                f"{len(papers)} papers")
            break
        part = generate_for(store, capped, run_id, [candidate], papers[i:i + batch_size], clean_only=True,
                            progress=progress)
        for key in total:
            total[key] += part.get(key, 0)
        made = part["calls_made"] + part["cached"]
        in_a_row = in_a_row + part["failed"] + part["gave_up"] if part["failed"] + part["gave_up"] >= made else 0
        if in_a_row >= settings.submission_max_consecutive_failures:
            last = store.scalar("SELECT error FROM generations WHERE candidate = ? AND status = 'failed' "
                                "ORDER BY generated_at DESC LIMIT 1", [candidate.name])
            total["stopped"] = (f"stopped: {in_a_row} failed calls in a row (submission_max_consecutive_failures = "
                                f"{settings.submission_max_consecutive_failures}); last error: "
                                f"{str(last or 'unknown')[:300]}")
            break
    total["cost_usd"] = round(total["cost_usd"], 6)
    return total


def refuse_copied_generations(store: Store, name: str) -> str | None:
    """Why a candidate's reviews are refused (some copy their paper's public reviews), or None.

    The copy detector of uploads (:func:`grebench.bench.copied_shares`, :data:`grebench.bench.COPY_THRESHOLD`) on
    every ``ok`` review of the candidate; on a copy, every review of the candidate is marked failed (never scored).
    """
    from grebench.bench import COPY_THRESHOLD, copied_shares

    rows = store.rows("SELECT generation_id, paper_id, text FROM generations WHERE candidate = ? AND status = 'ok' "
                      "ORDER BY paper_id", [name])
    shares = copied_shares(store, [(r["paper_id"], r["text"] or "") for r in rows])
    copies = [(r["paper_id"], s) for r, s in zip(rows, shares, strict=True) if s >= COPY_THRESHOLD]
    if not copies:
        return None
    shown = ", ".join(f"{pid} ({share:.0%})" for pid, share in copies[:5])
    reason = (f"refused: {len(copies)} of {len(rows)} reviews copy their paper's public reviews (share of words in "
              f"5-word sequences of them at or above {COPY_THRESHOLD:.0%}: {shown}{', ...' if len(copies) > 5 else ''})"
              "; none of its reviews is scored")
    with store.transaction() as con:
        con.execute("UPDATE generations SET status = 'failed', error = ? WHERE candidate = ?", [reason[:500], name])
        con.execute("DELETE FROM scores WHERE candidate = ?", [name])
        con.execute("INSERT INTO board_changes VALUES (?, 'submission', ?, ?)", [utcnow(), name, reason[:2000]])
    return reason


def evaluate_queued(store: Store, settings: Settings, run_id: str, queue: SubmissionQueue, vault: KeyVault,
                    resolver: Any = None, progress: Progress | None = None) -> dict[str, Any]:
    """Accept queued submissions, evaluate the running ones, import queued review files; the summary.

    ``resolver`` resolves submitted host names (None: the system resolver; tests pass a table so that no DNS
    query leaves the machine).
    """
    from grebench.bench import stored_candidate, unreviewed_paper_ids
    from grebench.llm import pinned_endpoints

    accepted = accept_queued_submissions(store, queue, settings, resolver)
    done = []
    for sub in store.rows("SELECT id, model_name, cutoff FROM submissions WHERE status = 'running' "
                          "ORDER BY created_at"):
        row = store.rows("SELECT * FROM candidates WHERE name = ?", [sub["model_name"]])
        if not row:
            finish_submission(queue, vault, sub["id"], False, "candidate missing from the store", store)
            continue
        pins, refused = _pin_submitted(settings, resolver, row[0]["api_base"])
        if refused is not None:
            finish_submission(queue, vault, sub["id"], False, refused, store)
            done.append({"id": sub["id"], "ok": False, "error": refused})
            continue
        stored = queue.rows("SELECT key_ciphertext FROM submissions WHERE id = ?", [sub["id"]])
        try:
            secret = vault.open(sub["id"], stored[0]["key_ciphertext"] if stored else None)
        except KeyUnreadable as exc:  # the operator's setting is wrong: keep the ciphertext, try again next pass
            log.error("submission %s not evaluated: %s", sub["id"], exc)
            done.append({"id": sub["id"], "ok": False, "error": f"{exc}; the submission stays running and its "
                         "stored key is kept: fix GREBENCH_SECRET_KEY and run the queue again"})
            continue
        papers = [r["paper_id"] for r in store.rows("SELECT paper_id FROM baseline_splits ORDER BY paper_id")]
        papers += unreviewed_paper_ids(store)
        # the declared cutoff chooses where to generate (its clean papers); the board trusts it only once vouched
        # its calls are its own: no other candidate's cached reply (nor its time) ever serves it
        declared = replace(stored_candidate(row[0]), cutoff=row[0]["cutoff"] or sub["cutoff"],
                           cache_owner=f"submission:{sub['id']}")
        try:
            with pinned_endpoints(pins), key_in_env(sub["id"], None if secret is None else secret.reveal()) as env:
                summary = _generate_within_budget(store, settings, run_id, replace(declared, api_key_env=env),
                                                  papers, progress or NoProgress())
        except Exception as exc:  # a hostile or broken endpoint fails its own submission, never the job
            summary = {"error": f"{type(exc).__name__}: {exc}"[:2000], "failed": 1}
        copied = refuse_copied_generations(store, sub["model_name"])
        if copied is not None:
            summary["copied"] = copied
        ok = not (summary.get("failed") or summary.get("gave_up") or "error" in summary or "stopped" in summary
                  or copied)
        reason = None if ok else (copied or summary.get("stopped") or summary.get("error")
                                  or f"{summary.get('failed', 0)} generation(s) failed")
        finish_submission(queue, vault, sub["id"], ok, reason, store)
        done.append({"id": sub["id"], "ok": ok, **summary})
    imported = accept_queued_imports(store, queue, settings)
    return {"accepted": [c["name"] for c in accepted], "evaluated": done, "imported": imported}


def approve_submission(store: Store, sub_id: str, note: str = "") -> dict[str, Any]:
    """The operator vouches for a submitted model's declared cutoff: its candidate gets that cutoff (its reviews
    on papers whose reviews became public after it count from the next board computation).  Audited in the store
    (``board_changes``).  :class:`SubmissionError` when there is nothing to approve."""
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
    detail = (f"submission {sub_id} vouched for by the operator: declared cutoff {sub['cutoff']} trusted"
              + (f" ({note.strip()[:500]})" if note.strip() else ""))
    with store.transaction() as con:
        con.execute("UPDATE candidates SET cutoff = ?, updated_at = ? WHERE name = ?",
                    [sub["cutoff"], now, sub["model_name"]])
        con.execute("INSERT INTO board_changes VALUES (?, 'submission', ?, ?)", [now, sub["model_name"], detail])
    log.info("%s", detail)
    return {"id": sub_id, "candidate": sub["model_name"], "cutoff": str(sub["cutoff"]), "detail": detail}

"""Evaluating queued submissions: accept them into the store, generate their reviews on clean papers, close them.

A submitted base URL is checked again just before its evaluation and every call goes to the address that check
pinned (:func:`grebench.llm.pinned_endpoints`): no second DNS lookup, no redirect followed.  The key lives in
memory only for the evaluation and is deleted with the submission.  Queued imports (files of reviews written
elsewhere, uploaded in the app) are imported here too: checked again against the live store and written in one
transaction each (:func:`grebench.submissions.accept_queued_imports`).
"""

from __future__ import annotations

from typing import Any

from grebench.endpoints import KeyVault
from grebench.progress import NoProgress, Progress
from grebench.settings import Settings
from grebench.store import Store
from grebench.submissions._imports import accept_queued_imports
from grebench.submissions._keys import key_in_env
from grebench.submissions._queue import SubmissionQueue, accept_queued_submissions, finish_submission


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


def evaluate_queued(store: Store, settings: Settings, run_id: str, queue: SubmissionQueue, vault: KeyVault,
                    resolver: Any = None, progress: Progress | None = None) -> dict[str, Any]:
    """Accept queued submissions, evaluate the running ones, import queued review files; the summary.

    ``resolver`` resolves submitted host names (None: the system resolver; tests pass a table so that no DNS
    query leaves the machine).
    """
    from grebench.bench import generate_for, stored_candidate, unreviewed_paper_ids
    from grebench.llm import pinned_endpoints

    accepted = accept_queued_submissions(store, queue, settings, resolver)
    done = []
    for sub in store.rows("SELECT id, model_name FROM submissions WHERE status = 'running' ORDER BY created_at"):
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
        secret = vault.open(sub["id"], stored[0]["key_ciphertext"] if stored else None)
        papers = [r["paper_id"] for r in store.rows("SELECT paper_id FROM baseline_splits ORDER BY paper_id")]
        papers += unreviewed_paper_ids(store)
        try:
            with pinned_endpoints(pins), key_in_env(sub["id"], None if secret is None else secret.reveal()) as env:
                summary = generate_for(store, settings, run_id, [stored_candidate(row[0], env)], papers,
                                       clean_only=True, progress=progress or NoProgress())
        except Exception as exc:  # a hostile or broken endpoint fails its own submission, never the job
            summary = {"error": f"{type(exc).__name__}: {exc}", "failed": 1}
        ok = not summary.get("failed") and not summary.get("gave_up") and "error" not in summary
        reason = None if ok else summary.get("error") or f"{summary.get('failed', 0)} generation(s) failed"
        finish_submission(queue, vault, sub["id"], ok, reason, store)
        done.append({"id": sub["id"], "ok": ok, **summary})
    imported = accept_queued_imports(store, queue, settings)
    return {"accepted": [c["name"] for c in accepted], "evaluated": done, "imported": imported}

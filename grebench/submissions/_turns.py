"""Submitted endpoints take turns on the scheduler's worker, under failure and time budgets.

Running submissions share the single worker round robin (:func:`grebench.submissions.evaluate_queued` drives the
rounds): each gets a turn (:func:`take_turn`) of ``submission_slice_s`` seconds, in which it runs batches of
``bench_concurrency`` calls, then the next submission gets its turn.  A turn checks its slice between batches and
a batch's calls run at once, each under ``submission_call_timeout_s`` and ``submission_max_retries``: a turn ends
within the slice plus one batch, so a hostile or slow endpoint delays another submission by at most that per round.

Budgets (a submission that spends one is stopped and failed with the reason):

- ``submission_max_consecutive_failures`` failed calls in a row, and more than ``submission_max_failure_rate`` of
  ``submission_failure_window`` calls failed among its last ``submission_failure_window`` calls (an endpoint that
  hangs on 3 prompts of 4 never fails 4 in a row); both checked after each batch (:func:`failure_stop`);
- ``submission_max_wall_s`` of its own turns only (the others' turns do not count), checked before each batch.

Everything a later turn needs is in the store, so a later pass, or a restart after a stop (:mod:`grebench.stop`),
resumes exactly where a turn ended: every completed call left a generation row of the candidate (ok or failed),
and those papers are never asked again; the failure window is read from those rows in the order they were
written; the wall time used is in ``submission_turns``.  A call in flight when a stop came left no row: it is the
only one asked again.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, TypedDict

from grebench.progress import Progress
from grebench.settings import Settings, SubmissionSettings
from grebench.store import Store, utcnow

log = logging.getLogger(__name__)
_clock = time.monotonic  # the clock of slices and the wall-time budget (tests and benchmarks replace it)

#: What one turn's batches add up (``generate_for``'s tallies: calls made in this process, not stored rows).
TALLY_KEYS = ("calls_made", "cached", "gave_up")


@dataclass
class TurnResult:
    """One turn of one submission: whether its evaluation is over, why it was stopped, what it did."""

    finished: bool                      # no paper left, or a budget stopped it
    stopped: str | None                 # the budget's reason, when one stopped it
    batches: int                        # batches of calls run in this turn
    tally: dict[str, int] = field(default_factory=dict)


def submission_settings(settings: Settings) -> Settings:
    """The settings one submission's calls run under: the call deadline and retries capped by the submission
    budgets (a submitted endpoint never gets the operator's long deadlines)."""
    limits, bounds = settings.limits, settings.submissions
    return settings.replace(llm_timeout_s=min(limits.llm_timeout_s, bounds.submission_call_timeout_s),
                            llm_max_retries=min(limits.llm_max_retries, bounds.submission_max_retries))


def done_papers(store: Store, name: str) -> set[str]:
    """Papers on which the candidate has a stored generation, ok or failed: they are never asked again."""
    return {r["paper_id"] for r in store.rows("SELECT DISTINCT paper_id FROM generations WHERE candidate = ?",
                                              [name])}


def call_history(store: Store, name: str) -> list[tuple[bool, str | None]]:
    """(ok, error) of each of the candidate's stored calls, in the order they were written."""
    return [(r["status"] == "ok", r["error"]) for r in store.rows(
        "SELECT status, error FROM generations WHERE candidate = ? ORDER BY generated_at, generation_id", [name])]


def failure_stop(submissions: SubmissionSettings, history: list[tuple[bool, str | None]]) -> str | None:
    """Why the failure budgets stop a submission with this call history (oldest first), or None."""
    in_a_row = 0
    for ok, _error in reversed(history):
        if ok:
            break
        in_a_row += 1
    last = next((error for ok, error in reversed(history) if not ok), None)
    tail = f"; last error: {str(last or 'unknown')[:300]}"
    if in_a_row >= submissions.submission_max_consecutive_failures:
        return (f"stopped: {in_a_row} failed calls in a row (submission_max_consecutive_failures = "
                f"{submissions.submission_max_consecutive_failures}){tail}")
    size, rate = submissions.submission_failure_window, submissions.submission_max_failure_rate
    window = history[-size:]
    failed = sum(1 for ok, _error in window if not ok)
    # measured against the whole window even before it is full: 5 failures in the first 6 calls stop it too
    if failed > rate * size:
        return (f"stopped: {failed} of the last {len(window)} calls failed (more than submission_max_failure_rate "
                f"= {rate:g} of submission_failure_window = {size} calls){tail}")
    return None


def turn_state(store: Store, sub_id: str) -> tuple[int, float]:
    """(turns taken, wall seconds of its own turns) of a submission so far."""
    rows = store.rows("SELECT slices, spent_s FROM submission_turns WHERE id = ?", [sub_id])
    return (int(rows[0]["slices"]), float(rows[0]["spent_s"])) if rows else (0, 0.0)


def _save_turn(store: Store, sub_id: str, slices: int, spent_s: float) -> None:
    with store.transaction() as con:
        con.execute("DELETE FROM submission_turns WHERE id = ?", [sub_id])
        con.execute("INSERT INTO submission_turns VALUES (?, ?, ?, ?)", [sub_id, slices, spent_s, utcnow()])


def take_turn(store: Store, settings: Settings, run_id: str, sub_id: str, candidate: Any, papers: list[str],
              progress: Progress) -> TurnResult:
    """One turn of a submission: batches of ``bench_concurrency`` of its papers not done yet, until its slice is
    spent (the first batch always runs, so every turn makes progress), its papers are done, or a budget stops it.

    The turn's wall time is added to the submission's own even when a stop (:class:`grebench.stop.Interrupted`)
    ends it.
    """
    from grebench.bench import generate_for

    capped = submission_settings(settings)
    batch_size = max(1, settings.bench.bench_concurrency)
    slices, spent = turn_state(store, sub_id)
    have = done_papers(store, candidate.name)
    todo = [p for p in papers if p not in have]
    tally = dict.fromkeys(TALLY_KEYS, 0)
    stopped: str | None = None
    batches = 0
    started = _clock()
    try:
        while todo:
            elapsed = _clock() - started
            if spent + elapsed >= settings.submissions.submission_max_wall_s:
                stopped = (f"stopped: wall-time budget spent ({spent + elapsed:.0f} s of its own turns, "
                           f"submission_max_wall_s = {settings.submissions.submission_max_wall_s:.0f} s) after "
                           f"{len(papers) - len(todo)} of {len(papers)} papers")
                break
            if batches and elapsed >= settings.submissions.submission_slice_s:
                break  # its slice is spent: the next submission's turn
            part = generate_for(store, capped, run_id, [candidate], todo[:batch_size], clean_only=True,
                                progress=progress)
            todo = todo[batch_size:]
            batches += 1
            for key in TALLY_KEYS:
                tally[key] += int(part.get(key, 0))
            stopped = failure_stop(settings.submissions, call_history(store, candidate.name))
            if stopped is not None:
                break
    finally:
        _save_turn(store, sub_id, slices + 1, spent + (_clock() - started))
    log.info("submission %s: turn %d, %d batch(es), %d of %d papers left%s", sub_id, slices + 1, batches,
             len(todo), len(papers), f" ({stopped})" if stopped else "")
    return TurnResult(finished=stopped is not None or not todo, stopped=stopped, batches=batches, tally=tally)


class StoredTotals(TypedDict):
    """What a candidate's stored generations add up to (:func:`stored_totals`)."""

    reviews: int
    failed: int
    tokens_in: int
    tokens_out: int
    cost_usd: float


def stored_totals(store: Store, name: str) -> StoredTotals:
    """What the candidate's stored generations add up to (exact over turns, passes and restarts): reviews, failed
    calls, tokens and cost."""
    row = store.rows("SELECT count(*) FILTER (WHERE status = 'ok') AS reviews, "
                     "count(*) FILTER (WHERE status <> 'ok') AS failed, coalesce(sum(tokens_in), 0) AS tokens_in, "
                     "coalesce(sum(tokens_out), 0) AS tokens_out, coalesce(sum(cost_usd), 0) AS cost_usd "
                     "FROM generations WHERE candidate = ?", [name])[0]
    return {"reviews": int(row["reviews"]), "failed": int(row["failed"]), "tokens_in": int(row["tokens_in"]),
            "tokens_out": int(row["tokens_out"]), "cost_usd": round(float(row["cost_usd"]), 6)}

"""Whether a board row covers the board's sample: a contestant is ranked only when it reviewed the papers it was due.

A candidate that fails on the papers it would do badly on, and answers the rest, chooses its own sample: its mean
over the papers it kept is not comparable with a mean over the board's sample.  So a contestant's row is ranked only
when it has an ``ok`` review of (nearly) every board paper it was *due* to review:

* the board papers clean for it by its cutoff (the vouched one; for a submission not vouched yet, the declared
  cutoff that chose the papers it was asked to review: its ``submissions.cutoff``; for imported reviews without a
  cutoff, the day the file was received: every paper whose reviews were still hidden then, where a review in the
  file would have been sealed), and
* every board paper on which it has a sealed generation (written before the reviews were public), whatever its
  status.

How many may be missing (``board_max_missing_share`` of the due papers, rounded down):

* **none** for a submitted model, whatever its status (failed, stopped by a budget, running, finished): its missing
  papers are the ones its endpoint did not answer, and an HTTP 500 looks the same whether the server broke or chose
  to fail; a submission that failed or was stopped always misses some;
* **none** for any other kind a submitter controls (not configurable by the operator: ``imported`` files chose
  their papers);
* up to the share for the operator's own configured models: their generations run on our machines with our keys
  and schedule, so a paper lost there (a local model timing out, a call the machine could not finish) is not the
  candidate's choice, and a few papers dropped by chance move a mean over the sample by little.  At the default 5 %
  a 12-paper sample (the default run) allows none, 60 papers allow 3.

Completeness is about what the candidate answered, not what a scope counts: it is computed from the generations
(which the sealed scope does not filter), so the ``all`` and ``sealed`` boards of one venue agree.  The baseline and
the controls (built from the human reviews of every paper) get the same figures, but only contestants are unranked
by them.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from datetime import date, datetime
from typing import TypedDict, cast

from grebench.bench import CONTESTANT, is_clean, kind_info
from grebench.store import Store

#: The ``board_max_missing_share`` default (see the setting).
DEFAULT_MAX_MISSING_SHARE = 0.05


class Coverage(TypedDict):
    """Whether a candidate reviewed a board's sample (:func:`coverage`)."""

    due_papers: int
    missing_papers: int
    complete: bool


class _CandidateCutoffs(TypedDict):
    name: str
    kind: str | None
    cutoff: date | None
    declared: date | None
    submission: str | None


def _candidates(store: Store, names: Collection[str]) -> dict[str, _CandidateCutoffs]:
    """kind, cutoff, declared cutoff and submission status of each named candidate."""
    rows = cast(list[_CandidateCutoffs], store.rows(
        "SELECT c.name, c.kind, c.cutoff, s.cutoff AS declared, s.status AS submission "
        "FROM candidates c LEFT JOIN submissions s ON s.model_name = c.name "
        "WHERE c.name IN (SELECT unnest(?::VARCHAR[]))", [sorted(names)]))
    return {r["name"]: r for r in rows}


def allowed_missing(kind: str | None, submission: str | None, due: int, max_missing_share: float) -> int:
    """How many of ``due`` papers a contestant may miss and still be ranked (see the module docstring):
    ``submission`` is the status of its submission (None: not a submitted model)."""
    if submission is not None or not kind_info(kind).configurable:
        return 0
    return math.floor(max_missing_share * due + 1e-9)


def coverage(store: Store, board_papers: Collection[str], kinds: dict[str, str | None],
             max_missing_share: float = DEFAULT_MAX_MISSING_SHARE) -> dict[str, Coverage]:
    """Per candidate of ``kinds`` (name → kind): ``due_papers``, ``missing_papers``, ``complete`` on this board.

    ``store`` may be a venue scope (:func:`grebench.scoring.venue_scope`): its ``papers`` and ``generations``."""
    papers = set(board_papers)
    if not papers or not kinds:
        return {}
    public = {r["paper_id"]: r["reviews_public_at"] for r in store.rows(
        "SELECT paper_id, reviews_public_at FROM papers WHERE paper_id IN (SELECT unnest(?::VARCHAR[]))",
        [sorted(papers)])}
    answered: dict[str, set[str]] = {}
    sealed: dict[str, set[str]] = {}
    received: dict[str, datetime] = {}
    for r in store.rows("SELECT candidate, paper_id, bool_or(status = 'ok') AS ok, bool_or(sealed) AS sealed, "
                        "max(generated_at) AS at FROM generations WHERE candidate IN (SELECT unnest(?::VARCHAR[])) "
                        "AND paper_id IN (SELECT unnest(?::VARCHAR[])) GROUP BY ALL", [sorted(kinds), sorted(papers)]):
        if r["at"] is not None and (r["candidate"] not in received or r["at"] > received[r["candidate"]]):
            received[r["candidate"]] = r["at"]
        if r["ok"]:
            answered.setdefault(r["candidate"], set()).add(r["paper_id"])
        if r["sealed"]:
            sealed.setdefault(r["candidate"], set()).add(r["paper_id"])
    facts = _candidates(store, kinds)
    out: dict[str, Coverage] = {}
    for name, kind in kinds.items():
        cand = facts.get(name)
        if kind_info(kind).role != CONTESTANT:
            due = papers
        else:
            cutoff: date | datetime | None = (cand["cutoff"] or cand["declared"]) if cand else None
            if cutoff is None and not kind_info(kind).generated:  # a file: it could have sealed what was hidden
                cutoff = received.get(name)
            due = {p for p in papers if is_clean(cutoff, public.get(p), kind)} | sealed.get(name, set())
        missing = len(due - answered.get(name, set()))
        allowed = allowed_missing(kind, cand["submission"] if cand else None, len(due), max_missing_share)
        out[name] = {"due_papers": len(due), "missing_papers": missing, "complete": missing <= allowed}
    return out

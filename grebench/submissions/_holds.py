"""Holds: a submission whose reviews copy, do not read as text, or explain their references far beyond the human
review (one paper at a time, or summed over the submission: :func:`grebench.scoring.information_shift`) is held for
the operator, with the evidence, whenever that is found; so is one whose information is higher where the reviews
were public when it wrote than on its own sealed papers (:func:`grebench.scoring.sealed_gap`, issue 62).  The
operator can approve over a hold (``grebench submissions approve ID --override REASON``): the approval's audit line
names the evidence overridden (:data:`OVERRIDE`), and :func:`recheck_held` holds again only on other evidence.

Before issue 48 the information view ran only at approval: an approval given before ``grebench score`` got the lexical
check alone, and nothing looked again once scores arrived.  Now the pipeline calls :func:`recheck_held` after every
scoring of its papers (the score stage): each submitted candidate's stored scores are read by the information view
(:func:`grebench.scoring.information_flags`), and a flag holds it — an approved submission loses its vouched cutoff
(so only its sealed reviews count, as before approval) and the audit row says why.  A hold is an audit row of kind
:data:`APPROVAL_REFUSED` in ``board_changes``; ``grebench submissions list`` shows the latest as ``HELD``.
"""

from __future__ import annotations

import logging
from typing import Any, TypedDict

from grebench.store import Store, utcnow

log = logging.getLogger(__name__)

#: ``board_changes.kind`` of a hold: an approval the checks refused, a refusal at evaluation, or a flag raised after
#: approval (``grebench submissions list`` shows the latest).
APPROVAL_REFUSED = "approval_refused"


def hold(store: Store, candidate: str, detail: str) -> None:
    """Record a hold of ``candidate`` with ``detail`` (the evidence), unless its latest hold says the same."""
    latest = store.rows("SELECT kind, detail FROM board_changes WHERE subject = ? AND kind IN ('submission', ?) "
                        "ORDER BY changed_at DESC LIMIT 1", [candidate, APPROVAL_REFUSED])
    if latest and latest[0]["kind"] == APPROVAL_REFUSED and latest[0]["detail"] == detail[:2000]:
        return
    store.con.execute("INSERT INTO board_changes VALUES (?, ?, ?, ?)", [utcnow(), APPROVAL_REFUSED, candidate,
                                                                        detail[:2000]])


def held_submissions(store: Store) -> dict[str, str]:
    """Submissions held for the operator (candidate name → why): the latest audit row of each candidate is a hold
    (an approval that passed later writes a newer row)."""
    rows = store.rows("SELECT subject, arg_max(kind, changed_at) AS kind, arg_max(detail, changed_at) AS detail "
                      "FROM board_changes WHERE kind IN ('submission', ?) GROUP BY subject", [APPROVAL_REFUSED])
    return {r["subject"]: r["detail"] for r in rows if r["kind"] == APPROVAL_REFUSED}


def information_evidence(flags: list[Any]) -> str:
    """``N of its scored reviews explain their references far beyond the human review of the paper (...)``."""
    shown = "; ".join(flag.describe() for flag in flags[:3])
    return (f"{len({f.paper_id for f in flags})} of its scored reviews explain their paper's references far beyond "
            f"the human review of the paper ({shown}{'; ...' if len(flags) > 3 else ''})")


def gap_evidence(gap: Any) -> str:
    """``its information is higher where ... (sealed-gap test ...)``: the sealed-gap test
    (:func:`grebench.scoring.sealed_gap`) as a hold states it."""
    return (f"its information is higher on papers whose reviews were public when it wrote than on its sealed papers "
            f"({gap.describe()})")


#: What an operator's override (``grebench submissions approve ID --override REASON``) writes into the approval's
#: audit line, followed by the evidence it overrides; :func:`recheck_held` does not hold again on that evidence.
OVERRIDE = "OVERRIDE by the operator over"


def overridden(store: Store, candidate: str) -> set[str]:
    """The labels of the evidence the operator's override in force for ``candidate`` overrode (``sealed-gap test``,
    ``information shift test``, ``information view``, ``copy check``, ``no sealed-gap test yet``): read from its
    latest approval's audit line, ``OVERRIDE by the operator over: LABEL, LABEL (reason: ...)``; empty when there is
    no override or a hold came after it."""
    latest = store.rows("SELECT kind, detail FROM board_changes WHERE subject = ? AND kind IN ('submission', ?) "
                        "ORDER BY changed_at DESC LIMIT 1", [candidate, APPROVAL_REFUSED])
    if not latest or latest[0]["kind"] != "submission" or OVERRIDE not in (latest[0]["detail"] or ""):
        return set()
    labels = str(latest[0]["detail"]).split(OVERRIDE + ": ", 1)[1].split(" (reason: ", 1)[0]
    return {label.strip() for label in labels.split(",")}


def shift_evidence(shift: Any) -> str:
    """``its information is shifted above the honest reviewers' on the same papers (information shift test ...)``:
    the submission-level test (:func:`grebench.scoring.information_shift`) as a hold states it."""
    return f"its information is shifted above the honest reviewers' on the same papers ({shift.describe()})"


class HeldSubmission(TypedDict):
    """A submitted candidate the information view holds (:func:`recheck_held`)."""

    candidate: str
    approved: bool
    papers: int
    detail: str


def recheck_held(store: Store) -> list[HeldSubmission]:
    """The information view, the shift test and the sealed-gap test on every submitted candidate's stored scores,
    now: a flag holds it (an approved one loses its vouched cutoff), unless the operator's override in force names
    that evidence already.  Returns what was held; writes only for flags not recorded already."""
    from grebench.scoring import information_flags, information_shift, sealed_gap

    held = held_submissions(store)
    out: list[HeldSubmission] = []
    for row in store.rows("SELECT c.name, c.cutoff FROM candidates c WHERE c.kind = 'submitted' AND EXISTS "
                          "(SELECT 1 FROM scores s WHERE s.candidate = c.name) ORDER BY c.name"):
        over = overridden(store, row["name"])
        flags = information_flags(store, row["name"])
        shift = information_shift(store, row["name"])
        gap = sealed_gap(store, row["name"])
        # (label as an override names it, words a hold's detail contains, the evidence, its papers)
        evidence: list[tuple[str, str, str, set[str]]] = []
        if flags:
            evidence.append(("information view", "explain their paper's references", information_evidence(flags),
                             {f.paper_id for f in flags}))
        if shift is not None and shift.held:
            evidence.append(("information shift test", "information shift test", shift_evidence(shift),
                             set(shift.excess_papers)))
        if gap is not None and gap.held:
            evidence.append(("sealed-gap test", "sealed-gap test", gap_evidence(gap), set(gap.excess_papers)))
        evidence = [e for e in evidence if e[0] not in over]
        if not evidence:
            continue
        approved = row["cutoff"] is not None
        detail = (f"held for the operator after scoring: {'; '.join(words for _, _, words, _ in evidence)}"
                  + (f"; the vouched cutoff {row['cutoff']} is withdrawn until the operator approves again"
                     if approved else ""))
        if not approved and row["name"] in held and all(mark in held[row["name"]] for _, mark, _, _ in evidence):
            continue  # held already on this evidence
        with store.transaction() as con:
            if approved:
                con.execute("UPDATE candidates SET cutoff = NULL, updated_at = ? WHERE name = ?",
                            [utcnow(), row["name"]])
            hold(store, row["name"], detail)
        log.warning("%s: %s", row["name"], detail)
        papers = set().union(*(p for _, _, _, p in evidence))
        out.append({"candidate": row["name"], "approved": approved, "papers": len(papers), "detail": detail})
    return out

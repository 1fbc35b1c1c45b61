"""The copy check of a submitted candidate, one function for evaluation and approval.

Evaluation refuses a candidate whose reviews copy their papers' public reviews; approval (vouching for a declared
cutoff) runs the same check again on what is stored *then*: every ``ok`` review of the candidate, including any added
after its evaluation, against the public reviews the store holds then (reviews that became public since, linked
earlier versions of the paper, a stronger detector).  The flag itself is the bench's copy detector
(:func:`grebench.bench.copy_findings`: a score at or above :data:`grebench.bench.COPY_THRESHOLD`), so replacing the
detector changes both callers at once.  The evidence names, for each flagged review, the paper, the share and the public
review it carries most of (:func:`_closest_reference`).
"""

from __future__ import annotations

from dataclasses import dataclass

from grebench.store import Store


@dataclass(frozen=True)
class CopiedReview:
    """One flagged review: its paper, the detector's share, and the public review it carries most of."""

    paper_id: str
    share: float
    reference: str | None  # review id (with its paper when that is another one: a linked earlier version)
    detail: str = ""  # the detector's own account (:meth:`grebench.bench.CopyEvidence.describe`)

    def text(self) -> str:
        """``paper (share, closest public review ...: what the detector found)``."""
        ref = f", closest public review {self.reference}" if self.reference else ""
        detail = f": {self.detail}" if self.detail else ""
        return f"{self.paper_id} ({self.share:.0%}{ref}{detail})"


@dataclass(frozen=True)
class CopyCheck:
    """The outcome of :func:`check_copies` on one candidate."""

    candidate: str
    checked: int
    copies: tuple[CopiedReview, ...]

    @property
    def flagged(self) -> bool:
        """Whether some review copies its paper's public reviews."""
        return bool(self.copies)

    def evidence(self, limit: int = 5) -> str:
        """The first ``limit`` flagged reviews, as text."""
        shown = ", ".join(c.text() for c in self.copies[:limit])
        return shown + (f", and {len(self.copies) - limit} more" if len(self.copies) > limit else "")

    def summary(self) -> str:
        """``N of M reviews copy their paper's public reviews (...)``: what a refusal says."""
        from grebench.bench import COPY_THRESHOLD

        return (f"{len(self.copies)} of {self.checked} reviews copy their paper's public reviews (copy detector score "
                f"at or above {COPY_THRESHOLD:.0%}: {self.evidence()})")


def _closest_reference(store: Store, paper_id: str, text: str) -> str | None:
    """The public review (id, and its paper when another: a linked version) that ``text`` carries most of.

    Attribution only, for the operator: the flag is the detector's.  Looked up among the texts the detector compares
    against (:func:`grebench.bench.copied_shares` reads them through ``public_review_texts``), so a linked earlier
    version's review is named too."""
    from grebench.bench import copy_share, paper_own_texts, public_review_texts

    refs = public_review_texts(store, [paper_id]).get(paper_id) or []
    if not refs:
        return None
    own = paper_own_texts(store, [paper_id]).get(paper_id, "")
    words = set(text.split())

    def closeness(ref: str) -> tuple[float, float]:  # the detector's score; ties (near-identical reviews): shared words
        other = set(ref.split())
        return copy_share(text, [ref], own), len(words & other) / max(1, len(words | other))

    best = max(refs, key=closeness)
    found = store.rows("SELECT r.review_id, r.paper_id FROM review_versions v JOIN reviews r USING (review_id) "
                       "WHERE v.text = ? ORDER BY r.paper_id <> ?, r.review_id LIMIT 1", [best, paper_id])
    if not found:
        return None
    row = found[0]
    return row["review_id"] if row["paper_id"] == paper_id else f"{row['review_id']} (of paper {row['paper_id']})"


def check_copies(store: Store, candidate: str) -> CopyCheck:
    """The copy detector on every ``ok`` review the store holds for ``candidate``, with the evidence of each flag.

    Writes nothing: evaluation (:func:`grebench.submissions.refuse_copied_generations`) and approval
    (:func:`grebench.submissions.approve_submission`) decide what a flag does."""
    from grebench.bench import copy_findings

    rows = store.rows("SELECT paper_id, text FROM generations WHERE candidate = ? AND status = 'ok' "
                      "ORDER BY paper_id, generation_id", [candidate])
    findings = copy_findings(store, [(r["paper_id"], r["text"] or "") for r in rows])
    copies = tuple(CopiedReview(r["paper_id"], found.score, _closest_reference(store, r["paper_id"], r["text"] or ""),
                                found.describe())
                   for r, found in zip(rows, findings, strict=True) if found.copied)
    return CopyCheck(candidate, len(rows), copies)

"""The information view of a copy: one reference predicted far better than any human review predicts another.

The lexical detector (:mod:`grebench.bench._copies`) reads words; a copy rewritten beyond its reach (a paraphrase
by another LLM, a translation round trip) still carries the reference's information, and GEM-S measures exactly
that.  For a (candidate, paper, reference) score, the **share** of the reference's information the candidate
explains is ``pmi / -marginal``: the log-probability the candidate's lines add to the reference's lines, over what
the reference's lines cost given the abstract alone.  A verbatim copy explains much of it (most with an LM, a
quarter with the offline word model); a human review of the same paper explains a little of another reviewer's (the
human baseline's best share on the paper, over its references).

A score is flagged when its share is at least :data:`MIN_SHARE` **and** at least :data:`HUMAN_FACTOR` times the
human baseline's best share on that paper (under the same estimator, preprocessor and metric): far above what any
human review of that paper reaches with any other.  A flag holds a submission for the operator (approval refuses
with the evidence), like the lexical detector's.
"""

from __future__ import annotations

from dataclasses import dataclass

from grebench.store import Store

#: A candidate that explains at least this share of one reference's information has seen it ...
MIN_SHARE = 0.15
#: ... provided no human review of the paper comes within this factor of it.  Measured with the offline estimator
#: (the weakest: a word model) on 30 bundled ICLR 2026 papers: a verbatim copy of a reference explains 0.215 to
#: 0.327 of it (median 0.276); the human review's best share is at most 0.027, every control's at most 0.038.  An
#: LM explains far more of a copy (SmolLM2: GEM-S 534 for the copy against 40 for the human review).
HUMAN_FACTOR = 5.0
#: The human baseline's candidate name (:data:`grebench.bench.HUMAN`; not imported, to keep this module a leaf).
HUMAN = "human"


@dataclass(frozen=True)
class InformationFlag:
    """One score whose share of its reference's information no human review of the paper approaches."""

    paper_id: str
    reference_review_id: str
    metric: str
    share: float
    human_share: float | None

    def describe(self) -> str:
        """``paper: explains 93% of reference R's information under gem-s (the human review: 8%)``."""
        human = "no human baseline" if self.human_share is None else f"the human review: {self.human_share:.0%}"
        return (f"{self.paper_id}: explains {self.share:.0%} of reference {self.reference_review_id}'s information "
                f"under {self.metric} ({human})")


def information_flags(store: Store, candidate: str, metric: str = "gem-s") -> list[InformationFlag]:
    """Every stored score of ``candidate`` under ``metric`` whose information share is an outlier (see the module
    docstring), across every scored setup; empty when nothing is scored yet."""
    rows = store.rows(
        "WITH shares AS (SELECT candidate, estimator, preprocessor, paper_id, reference_review_id, "
        "  pmi / -marginal AS share FROM scores WHERE metric = ? AND marginal < 0 AND candidate IN (?, ?)), "
        "best_human AS (SELECT estimator, preprocessor, paper_id, max(share) AS share FROM shares "
        "  WHERE candidate = ? GROUP BY ALL) "
        "SELECT s.paper_id, s.reference_review_id, s.share, h.share AS human_share FROM shares s "
        "LEFT JOIN best_human h USING (estimator, preprocessor, paper_id) "
        "WHERE s.candidate = ? AND s.share >= ? ORDER BY s.share DESC, s.paper_id, s.reference_review_id",
        [metric, candidate, HUMAN, HUMAN, candidate, MIN_SHARE])
    return [InformationFlag(r["paper_id"], r["reference_review_id"], metric, float(r["share"]),
                            None if r["human_share"] is None else float(r["human_share"]))
            for r in rows if r["human_share"] is None or r["share"] >= HUMAN_FACTOR * max(r["human_share"], 0.0)]

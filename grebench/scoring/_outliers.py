"""The information view of a copy: a paper's references explained far beyond what the human review explains.

The lexical detector (:mod:`grebench.bench._copies`) reads words; a copy rewritten beyond its reach (a paraphrase
by another LLM, a translation round trip, words moved apart) still carries the references' information, and GEM-S
measures exactly that.  For a (candidate, paper, reference) score, the **share** of the reference's information the
candidate explains is ``max(pmi, 0) / -marginal``: the log-probability the candidate's lines add to the reference's
lines, over what the reference's lines cost given the abstract alone.

The view is **relative and summed** (issue 48): a copy spread over three or four references explains each of them a
little (0.06-0.10 each with the offline word model, under any absolute floor) but all of them together far more than
the human review of that paper does.  For each paper and scored setup (estimator, preprocessor, metric):

* ``candidate`` = the sum over the paper's references of the candidate's shares;
* ``human`` = the sum over the same references of the human baseline's shares;
* ``typical`` = the median of ``human`` over the papers of that setup (a paper whose human review explains almost
  nothing does not make every candidate an outlier);

and the paper is flagged when ``candidate >= HUMAN_FACTOR * max(human, typical)``.  No absolute floor: the bar is
the human review's, on that paper and in that setup.  A flag holds a submission for the operator (approval refuses
with the evidence); the pipeline runs the view again whenever scores change (:func:`grebench.submissions.recheck_held`),
so a flag raised after approval holds it again.
"""

from __future__ import annotations

from dataclasses import dataclass

from grebench.store import Store

#: A paper is flagged when the candidate explains at least this many times the human review's summed share (or the
#: setup's typical human share, if larger).  Measured with the offline estimator on 10 papers of each bundled sample
#: (``benchmarks/copy_detection.py``, a small run on a shared machine): a reviewer's own review scored as a candidate
#: against the paper's other references reaches at most 2.0 times the bar (median 0.45; 68 reviews); the content
#: words of every review in 9 rows, a median of 2.3 times; 30 % of every review after another paper's reviews, 6.6
#: times.  The offline word model reads word salad poorly, so the lexical evidence and the prose test carry those
#: cases; this view is the line for paraphrases (an LM reads a paraphrase's information, the words do not).
HUMAN_FACTOR = 3.0
#: The human baseline's candidate name (:data:`grebench.bench.HUMAN`; not imported, to keep this module a leaf).
HUMAN = "human"


@dataclass(frozen=True)
class InformationFlag:
    """One paper whose references the candidate explains far beyond what the human review of the paper does."""

    paper_id: str
    reference_review_id: str  # the reference it explains most of
    metric: str
    share: float              # summed over the paper's references
    human_share: float | None  # the human review's, over the same references
    typical: float | None = None  # the setup's median human summed share
    references: int = 0

    def describe(self) -> str:
        """``paper: explains 31% of its 3 references' information under gem-s, most of R (the human review: 4%; a
        typical paper's human review: 5%)``."""
        human = "no human baseline" if self.human_share is None else f"the human review: {self.human_share:.0%}"
        typical = "" if self.typical is None else f"; a typical paper's human review: {self.typical:.0%}"
        return (f"{self.paper_id}: explains {self.share:.0%} of its {self.references} references' information under "
                f"{self.metric}, most of {self.reference_review_id} ({human}{typical})")


def information_flags(store: Store, candidate: str, metric: str = "gem-s") -> list[InformationFlag]:
    """Every paper whose stored scores of ``candidate`` under ``metric`` explain its references far beyond the human
    review (see the module docstring), across every scored setup; empty when nothing is scored yet."""
    rows = store.rows(
        "WITH shares AS (SELECT candidate, estimator, preprocessor, paper_id, reference_review_id, "
        "  greatest(pmi, 0) / -marginal AS share FROM scores WHERE metric = ? AND marginal < 0 "
        "  AND candidate IN (?, ?)), "
        "human AS (SELECT estimator, preprocessor, paper_id, reference_review_id, share FROM shares "
        "  WHERE candidate = ?), "
        "human_sum AS (SELECT estimator, preprocessor, paper_id, sum(share) AS share FROM human GROUP BY ALL), "
        "typical AS (SELECT estimator, preprocessor, median(share) AS typical FROM human_sum GROUP BY ALL), "
        "mine AS (SELECT s.estimator, s.preprocessor, s.paper_id, sum(s.share) AS share, "
        "  sum(h.share) AS human_share, count(h.share) AS matched, count(*) AS refs, "
        "  arg_max(s.reference_review_id, s.share) AS top FROM shares s LEFT JOIN human h "
        "  USING (estimator, preprocessor, paper_id, reference_review_id) WHERE s.candidate = ? GROUP BY ALL) "
        "SELECT m.*, t.typical FROM mine m LEFT JOIN typical t USING (estimator, preprocessor) "
        "ORDER BY m.share DESC, m.paper_id",
        [metric, candidate, HUMAN, HUMAN, candidate])
    flags: list[InformationFlag] = []
    seen: set[str] = set()
    for r in rows:
        human = float(r["human_share"]) if r["matched"] else None
        typical = None if r["typical"] is None else float(r["typical"])
        bar = max(human or 0.0, typical or 0.0)
        if r["paper_id"] in seen or bar <= 0 or float(r["share"]) < HUMAN_FACTOR * bar:
            continue  # (no human score in the setup: nothing to compare with)
        seen.add(r["paper_id"])
        flags.append(InformationFlag(r["paper_id"], r["top"], metric, round(float(r["share"]), 4),
                                     None if human is None else round(human, 4),
                                     None if typical is None else round(typical, 4), int(r["refs"])))
    return flags

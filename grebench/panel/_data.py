"""What the panel reads from the store: papers, candidates' latest reviews, human reviews, GEM scores.

GEM for the ``gem`` reference judge comes from the ``scores`` table, under the setup and metric the caller passes
(:func:`grebench.scoring.gem_judge_metric` chooses the metric).  Exam texts that are no candidate's review of that
paper (a human review of another paper, a reference review) have no stored score: :meth:`GemScores.extend` has
scoring compute their PMI per reference with the same setup (:func:`grebench.scoring.score_texts`: the score
stage's pair rule, cached in ``logprob_cache``, never scoring a review against itself).  When that is impossible
(another estimator, preprocessing failed) they stay unscored and the judge abstains on them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from grebench.panel._judges import PaperView, ReviewView, TfIdf, VenueInputs
from grebench.progress import Progress
from grebench.scoring import EstimatorHandle, Preprocessor, ScoredSetup, TextPmis, score_texts, stored_pmis
from grebench.settings import Settings
from grebench.store import ReviewRecord, Store

log = logging.getLogger(__name__)


def sha(text: str) -> str:
    """Key of a review text (same as the scoring stage's)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def rating_value(rating: Any) -> float:
    """'6: Weak Accept' → 6.0; unknown → 0."""
    match = re.match(r"\s*(-?\d+(?:\.\d+)?)", str(rating or ""))
    return float(match.group(1)) if match else 0.0


class HumanReview(TypedDict):
    """A human official review of a paper, as the exam reads it (its latest version)."""

    review_id: str
    text: str
    rating: float
    words: int


class Unjudged(TypedDict):
    """A candidate with reviews in the venue that no verdict covers, and why."""

    venue_id: str
    candidate: str
    reason: str


@dataclass
class VenueData:
    """One venue-year's material for the panel."""

    venue_id: str
    papers: dict[str, PaperView]
    families: dict[str, str | None]                                   # candidate -> family
    kinds: dict[str, str]                                             # candidate -> kind (llm, human, control...)
    generations: dict[str, dict[str, ReviewView]]                     # paper -> candidate -> latest ok review
    reviews: dict[str, list[HumanReview]] = field(default_factory=dict)  # paper -> human official reviews
    splits: dict[str, tuple[str, list[str]]] = field(default_factory=dict)

    def judge_inputs(self) -> VenueInputs:
        """What a judge reads of this venue-year (:meth:`grebench.panel.Judge.for_venue`): the TF-IDF model fitted on
        its papers' title, abstract and text."""
        return VenueInputs(self.venue_id, TfIdf("\n".join([p.title, p.abstract, p.text]) for p in self.papers.values()))


def venues(store: Store) -> list[str]:
    """Venue ids that have candidate reviews."""
    return [r["venue_id"] for r in store.rows(
        """SELECT DISTINCT p.venue_id FROM generations g JOIN papers p ON p.paper_id = g.paper_id
           WHERE g.status = 'ok' ORDER BY 1""")]


def load_venue(store: Store, venue_id: str, sample: Collection[str] | None = None) -> VenueData:
    """Everything the panel needs for one venue-year, read once; restricted to the papers of ``sample`` (the job's
    sample: the panel works on the same papers as the boards) unless it is None."""
    papers = {r["paper_id"]: PaperView(r["paper_id"], r["title"] or "", r["abstract"] or "", r["text"] or "")
              for r in store.rows(
                  """SELECT p.paper_id, p.title, p.abstract, CASE WHEN t.status = 'ok' THEN t.text END AS text
                     FROM papers p LEFT JOIN paper_texts t ON t.paper_id = p.paper_id
                     WHERE p.venue_id = ? ORDER BY p.paper_id""", [venue_id])
              if sample is None or r["paper_id"] in sample}
    rows = store.rows("SELECT name, family, kind FROM candidates")
    families = {r["name"]: r["family"] for r in rows}
    kinds = {r["name"]: r["kind"] for r in rows}
    generations: dict[str, dict[str, ReviewView]] = defaultdict(dict)
    for g in store.rows(
            """SELECT g.generation_id, g.candidate, g.paper_id, g.text, g.source_review_id FROM generations g
               JOIN papers p ON p.paper_id = g.paper_id
               WHERE p.venue_id = ? AND g.status = 'ok' AND g.text IS NOT NULL AND length(trim(g.text)) > 0
               QUALIFY row_number() OVER (PARTITION BY g.candidate, g.paper_id
                                          ORDER BY g.generated_at DESC, g.generation_id) = 1
               ORDER BY g.paper_id, g.candidate""", [venue_id]):
        if g["paper_id"] not in papers:
            continue
        generations[g["paper_id"]][g["candidate"]] = ReviewView(
            g["text"], g["candidate"], g["generation_id"], g["source_review_id"], families.get(g["candidate"]))
    reviews: dict[str, list[HumanReview]] = defaultdict(list)
    for r in store.rows(
            f"""SELECT r.review_id, r.paper_id, v.text, v.rating FROM reviews r
               JOIN review_versions v ON v.review_id = r.review_id AND v.version = r.latest_version
               JOIN papers p ON p.paper_id = r.paper_id
               WHERE p.venue_id = ? AND r.kind = '{ReviewRecord.OFFICIAL}'
               ORDER BY r.paper_id, r.review_id""", [venue_id]):
        if r["paper_id"] not in papers:
            continue
        reviews[r["paper_id"]].append({"review_id": r["review_id"], "text": r["text"],
                                       "rating": rating_value(r["rating"]), "words": len(r["text"].split())})
    splits = {r["paper_id"]: (r["candidate_review_id"], json.loads(r["reference_review_ids_json"]))
              for r in store.rows("SELECT * FROM baseline_splits")}
    return VenueData(venue_id, papers, families, kinds, dict(generations), dict(reviews),
                     {p: s for p, s in splits.items() if p in papers})


class GemScores:
    """PMI per reference for (paper, review text) under the setup and metric the caller names: stored scores first,
    computed ones (:func:`grebench.scoring.score_texts`) for exam texts, with the job's estimator (``handle``, the
    resolved run's) and the setup's built ``preprocessor`` (None: exam texts without a stored score cannot be
    scored: the gem judge is not examined).  No setup or no metric: unknown for all."""

    def __init__(self, store: Store, settings: Settings, setup: ScoredSetup | None, metric: str | None,
                 handle: EstimatorHandle | None = None, preprocessor: Preprocessor | None = None) -> None:
        self.store, self.settings, self.setup, self.handle = store, settings, setup, handle
        self.preprocessor = preprocessor
        self.metric = metric if setup is not None else None
        self._values: TextPmis | None = None
        self.estimator_calls = 0  # requests the estimator computed (not found in the log-prob cache) for exam texts
        self.failure: str | None = None  # why exam texts could not be scored (the estimator failed), if they could not

    def release(self) -> None:
        """Close the evaluation LM the exam texts were scored with (the job's handle builds it again if another
        venue-year needs it): called before a local judge's server starts, whose model would otherwise sit beside
        this one (issue 47: the job's peak is this process plus that server)."""
        if self.handle is not None:
            self.handle.close()

    def unusable(self) -> str | None:
        """Why a judge reading these scores cannot be examined (nothing scored with this setup, or the exam's texts
        could not be scored); None when it can."""
        if self.setup is None or self.metric is None:
            return "nothing in the store is scored with this evaluation LM and preprocessor (run grebench score first)"
        return self.failure

    @property
    def values(self) -> TextPmis:
        """PMI per reference by (paper id, text hash); stored scores are read on first use (a skipped panel never)."""
        if self._values is None:
            self._values = defaultdict(dict)
            if self.setup is not None and self.metric is not None:
                self._values.update(stored_pmis(self.store, self.setup, self.metric))
        return self._values

    def __call__(self, paper_id: str, review: ReviewView) -> dict[str, float] | None:
        """The review's PMI per reference on this paper, or None when unknown."""
        return self.values.get((paper_id, sha(review.text))) or None

    def extend(self, items: Sequence[tuple[str, str]], papers: Collection[str], progress: Progress | None = None,
               label: str = "gem judge's exam texts") -> int:
        """Compute PMIs for (paper_id, text) items of ``papers`` not yet known; returns how many pairs were added
        (0 when impossible).  ``progress`` shows the estimator's requests under ``label``."""
        todo = [(p, t) for p, t in dict.fromkeys(items) if (p, sha(t)) not in self.values and p in papers]
        if not todo or self.setup is None or self.metric is None:
            return 0
        try:
            if self.handle is None:
                raise ValueError("the job gave no estimator to score them with")
            scored = score_texts(self.store, self.settings, self.setup, self.metric, todo, progress, label,
                                 handle=self.handle, preprocessor=self.preprocessor)
        except Exception as exc:  # the judge abstains on these texts rather than failing the panel
            self.failure = f"could not score {len(todo)} exam texts ({exc})"
            log.warning("gem judge: %s; it is not examined", self.failure)
            return 0
        for key, pmis in scored.pmis.items():
            self.values[key].update(pmis)
        self.estimator_calls += scored.estimator_calls
        return sum(len(pmis) for pmis in scored.pmis.values())

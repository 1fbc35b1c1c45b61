"""What the panel reads from the store: papers, candidates' latest reviews, human reviews, GEM scores.

GEM for the ``gem`` reference judge comes from the ``scores`` table (the headline metric, else another default one;
the (estimator, preprocessor) pair scored most recently).  Exam texts that are no candidate's review of that paper (a
human review of another paper, a reference review) have no stored score: :meth:`GemScores.extend` computes their
PMI per reference with the same estimator and preprocessor (cached in ``logprob_cache`` like all scoring), never
scoring a review against itself.  When that is impossible (another estimator, no judgment lines) they stay
unscored and the judge abstains on them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from grebench.scoring._leaderboard import FLOOR_JOIN, FLOORED_PMI
from grebench.panel._judges import PaperView, ReviewView
from grebench.settings import Settings
from grebench.store import Store

log = logging.getLogger(__name__)


def sha(text: str) -> str:
    """Key of a review text (same as the scoring stage's)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def rating_value(rating: Any) -> float:
    """'6: Weak Accept' → 6.0; unknown → 0."""
    match = re.match(r"\s*(-?\d+(?:\.\d+)?)", str(rating or ""))
    return float(match.group(1)) if match else 0.0


@dataclass
class VenueData:
    """One venue-year's material for the panel."""

    venue_id: str
    papers: dict[str, PaperView]
    families: dict[str, str | None]                                   # candidate -> family
    kinds: dict[str, str]                                             # candidate -> kind (llm, human, control...)
    generations: dict[str, dict[str, ReviewView]]                     # paper -> candidate -> latest ok review
    reviews: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # paper -> human official reviews
    splits: dict[str, tuple[str, list[str]]] = field(default_factory=dict)


def venues(store: Store) -> list[str]:
    """Venue ids that have candidate reviews."""
    return [r["venue_id"] for r in store.rows(
        """SELECT DISTINCT p.venue_id FROM generations g JOIN papers p ON p.paper_id = g.paper_id
           WHERE g.status = 'ok' ORDER BY 1""")]


def sampled_papers(store: Store, venue_id: str) -> set[str] | None:
    """The papers of the main job's sample in this venue (``paper_samples``), or None when it used every paper.

    The panel works on the same papers as the boards: a run on a sample neither judges nor examines others.
    """
    rows = store.con.execute("SELECT paper_id FROM paper_samples WHERE venue_id = ?", [venue_id]).fetchall()
    return {r[0] for r in rows} or None


def load_venue(store: Store, venue_id: str) -> VenueData:
    """Everything the panel needs for one venue-year (restricted to the main job's sample), read once."""
    sample = sampled_papers(store, venue_id)
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
    reviews: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in store.rows(
            """SELECT r.review_id, r.paper_id, v.text, v.rating FROM reviews r
               JOIN review_versions v ON v.review_id = r.review_id AND v.version = r.latest_version
               JOIN papers p ON p.paper_id = r.paper_id
               WHERE p.venue_id = ? AND r.kind = 'official_review' ORDER BY r.paper_id, r.review_id""", [venue_id]):
        if r["paper_id"] not in papers:
            continue
        reviews[r["paper_id"]].append({"review_id": r["review_id"], "text": r["text"],
                                       "rating": rating_value(r["rating"]), "words": len(r["text"].split())})
    splits = {r["paper_id"]: (r["candidate_review_id"], json.loads(r["reference_review_ids_json"]))
              for r in store.rows("SELECT * FROM baseline_splits")}
    return VenueData(venue_id, papers, families, kinds, dict(generations), dict(reviews),
                     {p: s for p, s in splits.items() if p in papers})


class GemScores:
    """PMI per reference for (paper, review text): stored scores first, computed ones for exam texts."""

    def __init__(self, store: Store, settings: Settings, estimator_spec: str | None = None,
                 preprocessor_spec: str | None = None) -> None:
        self.store, self.settings = store, settings
        # the setup the run scored with (exam texts are scored with the same one), else the settings'
        self.estimator_spec = estimator_spec or settings.estimator
        self.preprocessor_spec = preprocessor_spec or settings.preprocessor
        self.metric, self.estimator, self.preprocessor = self._table()
        self._values: dict[tuple[str, str], dict[str, float]] | None = None
        self.estimator_calls = 0  # requests the estimator computed (not found in the log-prob cache) for exam texts

    @property
    def values(self) -> dict[tuple[str, str], dict[str, float]]:
        """PMI per reference by (paper id, text hash); stored scores are read on first use (a skipped panel never)."""
        if self._values is None:
            self._values = defaultdict(dict)
            if self.metric is not None:
                # the boards' rule: a review without judgment lines gets the reference's floor, not PMI 0
                setup = [self.metric, self.estimator, self.preprocessor]
                for paper_id, ref, pmi, digest in self.store.con.execute(
                        f"""SELECT s.paper_id, s.reference_review_id, {FLOORED_PMI}, sha256(g.text) FROM scores s
                            JOIN generations g ON g.generation_id = s.generation_id {FLOOR_JOIN}
                            WHERE s.metric = ? AND s.estimator = ? AND s.preprocessor = ?""",
                        setup + setup).fetchall():
                    self._values[(paper_id, digest)][ref] = float(pmi)
        return self._values

    def _table(self) -> tuple[str | None, str | None, str | None]:
        from grebench.scoring._metrics import METRICS, headline_metric

        # the headline metric first, then the other default ones that score judgment lines
        for metric in dict.fromkeys([headline_metric()] + [e.name for e in METRICS if e.obj.default and not e.obj.raw]):
            row = self.store.rows(
                """SELECT estimator, preprocessor FROM scores WHERE metric = ?
                   GROUP BY ALL ORDER BY max(created_at) DESC, count(*) DESC LIMIT 1""", [metric])
            if row:
                return metric, row[0]["estimator"], row[0]["preprocessor"]
        return None, None, None

    def __call__(self, paper_id: str, review: ReviewView) -> dict[str, float] | None:
        """The review's PMI per reference on this paper, or None when unknown."""
        return self.values.get((paper_id, sha(review.text))) or None

    def extend(self, items: Sequence[tuple[str, str]], splits: dict[str, tuple[str, list[str]]],
               reviews: dict[str, str]) -> int:
        """Compute PMIs for (paper_id, text) items not yet known; returns how many were added (0 when impossible)."""
        todo = [(p, t) for p, t in dict.fromkeys(items) if (p, sha(t)) not in self.values and p in splits]
        if not todo or self.metric is None:
            return 0
        try:
            return self._compute(todo, splits, reviews)
        except Exception as exc:  # the judge abstains on these texts rather than failing the panel
            log.warning("gem judge: could not score %d exam texts (%s); the judge abstains on them", len(todo), exc)
            return 0

    def _compute(self, todo: list[tuple[str, str]], splits: dict[str, tuple[str, list[str]]],
                 reviews: dict[str, str]) -> int:
        from grebench.progress import NoProgress
        from grebench.scoring._engine import _evaluate, corpus_texts, estimator_corpus, request_key
        from grebench.scoring._preprocess import preprocess_texts, resolve_preprocessor
        from grebench.scoring._request import GEM_PROMPT_VERSION, LogprobRequest
        from grebench.scoring.estimators import close_estimator, resolve_estimator

        preprocessor = resolve_preprocessor(self.preprocessor_spec, self.settings, self.store)
        if preprocessor.id != self.preprocessor:
            raise RuntimeError(f"stored scores use preprocessor {self.preprocessor}, this run's is {preprocessor.id}")
        # the corpus the score stage fitted on (every paper with a split, not only this venue's): the same
        # estimator id as the stored scores, so exam texts are comparable with them
        fitted_on = corpus_texts(self.store)
        lines = preprocess_texts(self.store, preprocessor, [t for _, t in fitted_on.values()]
                                 + list(reviews.values()) + [t for _, t in todo])
        estimator = resolve_estimator(self.estimator_spec, self.settings, corpus=estimator_corpus(fitted_on, lines))
        if estimator.id != self.estimator:
            close_estimator(estimator)
            raise RuntimeError(f"stored scores use estimator {self.estimator}, this run's is {estimator.id}")
        abstracts = {r["paper_id"]: (r["abstract"] or "").strip() for r in self.store.rows(
            "SELECT paper_id, abstract FROM papers")}
        from grebench.scoring._metrics import SynopsisInputs, metric

        # the metric's own synopsis of each paper (what its stored scores are conditioned on)
        synopses = metric(str(self.metric)).synopses(SynopsisInputs(
            self.store, self.settings, sorted({pid for pid, _ in todo}), abstracts, lambda *_: None)) or {}
        floors = {(p, r): min(0.0, float(v)) for p, r, v in self.store.con.execute(
            """SELECT paper_id, reference_review_id, min(pmi) FROM scores WHERE metric = ? AND estimator = ?
               AND preprocessor = ? AND conditional <> marginal GROUP BY ALL""",
            [self.metric, self.estimator, self.preprocessor]).fetchall()}
        pending = []
        for pid, text in todo:
            x = lines.get(sha(text))
            if x is None or x.status != "ok":
                continue
            if not x.lines:  # no judgment lines: the reference's floor, as on the boards (no estimator call)
                for ref in splits[pid][1]:
                    if reviews.get(ref) is not None and sha(reviews[ref]) != sha(text):
                        self.values[(pid, sha(text))][ref] = floors.get((pid, ref), 0.0)
                continue
            if pid not in synopses:
                continue  # the metric cannot be scored on this paper (no abstract): the judge abstains
            synopsis = synopses[pid]
            for ref in splits[pid][1]:
                ref_text = reviews.get(ref)
                y = lines.get(sha(ref_text)) if ref_text else None
                if ref_text is None or sha(ref_text) == sha(text) or y is None or y.status != "ok" or not y.lines:
                    continue
                pending.append((pid, text, ref,
                                LogprobRequest(pid, synopsis, x.text or None, y.text, GEM_PROMPT_VERSION),
                                LogprobRequest(pid, synopsis, None, y.text, GEM_PROMPT_VERSION)))
        try:
            results, calls, _, _ = _evaluate(self.store, [(estimator, c) for *_, c, _ in pending]
                                         + [(estimator, m) for *_, m in pending], NoProgress())
        finally:  # local servers the estimator started (vllm-local) stop here
            close_estimator(estimator)
        for pid, text, ref, cond, marg in pending:
            value = results[request_key(estimator.id, cond)].logprob - results[request_key(estimator.id, marg)].logprob
            self.values[(pid, sha(text))][ref] = float(value)
        self.estimator_calls += calls
        return len(pending)

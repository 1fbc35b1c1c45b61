"""The evaluation LM's view of two papers' abstracts: how much one tells about the other (issue 62 §3).

For papers A and B (each read as its title and abstract) and any estimator::

    info(A → B) = [log P(B | A) − log P(B)] / −log P(B)

where ``log P(B | A)`` is the log-probability of B's text with A's as the synopsis of the GEM prompt and ``log
P(B)`` with none (:class:`~grebench.scoring.LogprobRequest`): the share of B's information that A makes predictable.
The statistic of a pair is the mean of both directions (a resubmission that dropped sentences is predicted by its
earlier version better than the other way round; the mean keeps either from deciding alone).  Nothing reads a word:
the same number comes from the offline word model (a copy of the rare content words both share is what it rewards)
or from a real LM (SmolLM2 reads paraphrases as well).

:class:`LMAbstractReader` is the linking code's :class:`grebench.ingest._abstract_view.AbstractReader` (ingest is a
lower layer: the pipeline and the CLI hand it in).  A corpus-fitted estimator (``offline``) is fitted on the store's
papers' titles and abstracts, leaving the read paper out (its request's paper id); its answers are not cached (its id
changes with every paper stored, and it reads 1,000 pairs in about a second).  Another estimator's answers go through
the log-prob cache (:func:`grebench.scoring._engine._evaluate`): a venue's calibration is read once per model.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from grebench.ingest import PaperText
from grebench.progress import NoProgress, Progress
from grebench.scoring._engine import _evaluate, request_key
from grebench.scoring._request import LogprobRequest, LogprobResult
from grebench.scoring.estimators import EstimatorHandle, estimator_label

if TYPE_CHECKING:
    from grebench.store import Store


def paper_words(paper: PaperText) -> str:
    """What the LM reads of a paper: its title, then its abstract."""
    return f"{paper.title}\n{paper.abstract or ''}".strip()


def mutual_information(answers: Sequence[tuple[float, float, float, float]]) -> list[float]:
    """Per pair, from ``(log P(B | A), log P(B), log P(A | B), log P(A))``: the mean of both directions' share."""
    return [0.5 * ((ba - b) / -b + (ab - a) / -a) if a < 0 and b < 0 else 0.0 for ba, b, ab, a in answers]


class LMAbstractReader:
    """The evaluation LM of ``handle`` reading pairs of papers' abstracts (the estimator built at each call and
    closed after it: a link reads every pair in one call).  Linking's is ``LMAbstractReader(store,
    EstimatorHandle(settings.ingest.link_estimator, settings))`` where that setting is not empty."""

    def __init__(self, store: Store, handle: EstimatorHandle, progress: Progress | None = None) -> None:
        self.store, self.handle = store, handle
        self.progress = progress or NoProgress()
        self.calls = 0  # estimator requests computed (not found in the cache)

    @property
    def label(self) -> str:
        """The words for the estimator (``offline word model (fast proxy)``)."""
        return estimator_label(self.handle.spec)

    def information(self, pairs: Sequence[tuple[PaperText, PaperText]]) -> list[float]:
        """Per pair, the mean share of each paper's title-and-abstract information the other makes predictable."""
        if not pairs:
            return []
        handle = self.handle
        corpus = None
        if handle.info.needs_corpus:
            corpus = {r["paper_id"]: [paper_words(PaperText(r["paper_id"], r["title"], r["abstract"]))]
                      for r in self.store.rows("SELECT paper_id, title, abstract FROM papers")}
        requests = []
        for a, b in pairs:
            ta, tb = paper_words(a), paper_words(b)
            requests += [LogprobRequest(b.paper_id, ta, None, tb), LogprobRequest(b.paper_id, None, None, tb),
                         LogprobRequest(a.paper_id, tb, None, ta), LogprobRequest(a.paper_id, None, None, ta)]
        try:
            estimator = handle.get(corpus, self.progress)
            if corpus is not None:
                unique = list(dict.fromkeys(requests))
                answers = dict(zip(unique, estimator.logprobs(unique), strict=True))
                self.calls += len(unique)
                values = [answers[r].logprob for r in requests]
            else:
                cached, asked, hits, _ = _evaluate(self.store, [(estimator, r) for r in requests], self.progress,
                                                   label="link: abstracts")
                self.calls += asked - hits
                values = [cached.get(request_key(estimator.id, r), LogprobResult(0.0, 0)).logprob for r in requests]
        finally:
            handle.close()
        return mutual_information([(values[i], values[i + 1], values[i + 2], values[i + 3])
                                   for i in range(0, len(values), 4)])


"""Scores of texts that are no stored generation, with the setup the stored scores were made with.

:class:`CachedLogprobs` is an estimator's ``logprobs`` behind the same cache, for checks that build their own
requests (the LM copy check, :class:`grebench.scoring.LMCopyCheck`).

The judge panel's ``gem`` judge needs GEM of its exam texts (a human review of another paper, a reference review):
:func:`score_texts` scores them against their paper's references through the score stage's own pair rule
(:class:`~grebench.scoring._pairs.PairRule`), estimator and log-prob cache, so their PMIs are comparable with the
stored ones (:func:`stored_pmis`).  A text without judgment lines gets each reference's floor, as on the boards.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from grebench.progress import NoProgress, Progress
from grebench.scoring._engine import (
    ScoringData,
    ScoringError,
    _evaluate,
    _load,
    corpus_texts,
    estimator_corpus,
    request_key,
)
from grebench.scoring._leaderboard import FLOOR_JOIN, FLOORED_PMI, reference_floors
from grebench.scoring._metrics import METRICS, SynopsisInputs, headline_metric, metric, metric_preprocessor
from grebench.scoring._pairs import PairRule, pmi
from grebench.scoring._preprocess import Preprocessor, preprocess_texts, text_sha256
from grebench.scoring._request import LogprobRequest, LogprobResult
from grebench.scoring._setup import ScoredSetup
from grebench.settings import Settings
from grebench.store import Store

if TYPE_CHECKING:
    from grebench.scoring.estimators import Estimator, EstimatorHandle

#: (paper id, sha256 of a review text) → reference review id → PMI.
TextPmis = dict[tuple[str, str], dict[str, float]]


@dataclass
class TextScores:
    """What :func:`score_texts` found: PMI (and the marginal) per reference by (paper id, text sha256), and how many
    requests the estimator computed (not found in the log-prob cache)."""

    pmis: TextPmis = field(default_factory=lambda: defaultdict(dict))
    estimator_calls: int = 0
    #: the marginal log-probability of each reference (its cost given the synopsis alone), as ``pmis``; absent for
    #: floored texts (no judgment lines: no estimator call)
    marginals: TextPmis = field(default_factory=lambda: defaultdict(dict))


def gem_judge_metric(store: Store, setup: ScoredSetup | None) -> str | None:
    """The metric the panel's ``gem`` judge reads: the headline metric when ``setup`` has scores of it, else the first
    other default metric that scores judgment lines and has some; None when nothing was scored."""
    if setup is None:
        return None
    names = [headline_metric()] + [e.name for e in METRICS if e.obj.default and not e.obj.raw]
    for name in dict.fromkeys(names):
        if store.scalar("SELECT count(*) FROM scores WHERE metric = ? AND estimator = ? AND preprocessor = ?",
                        [name, setup.estimator_id, metric_preprocessor(name, setup.preprocessor_id)]):
            return name
    return None


def stored_pmis(store: Store, setup: ScoredSetup, metric_name: str) -> TextPmis:
    """PMI per reference of every stored score of ``metric_name`` under ``setup``, keyed by (paper id, text sha256)
    of the scored generation; a review without judgment lines carries the reference's floor, as on the boards."""
    params = [metric_name, setup.estimator_id, metric_preprocessor(metric_name, setup.preprocessor_id)]
    values: TextPmis = defaultdict(dict)
    for paper_id, ref, value, digest in store.con.execute(
            f"""SELECT s.paper_id, s.reference_review_id, {FLOORED_PMI}, sha256(g.text) FROM scores s
                JOIN generations g ON g.generation_id = s.generation_id {FLOOR_JOIN}
                WHERE s.metric = ? AND s.estimator = ? AND s.preprocessor = ?""", params + params).fetchall():
        values[(paper_id, digest)][ref] = float(value)
    return values


def score_texts(store: Store, settings: Settings, setup: ScoredSetup, metric_name: str,
                items: Iterable[tuple[str, str]], progress: Progress | None = None,
                label: str = "score", *, handle: EstimatorHandle, preprocessor: Preprocessor | None) -> TextScores:
    """PMI of each (paper id, text) in ``items`` against its paper's references, as the score stage would store it.

    Scoring takes built parts and builds none (issue 61): ``handle`` is the job's estimator (the resolved run's, or
    one the caller built and closes) and ``preprocessor`` the built preprocessor of ``setup`` (None only for a raw
    metric).  The text is preprocessed with it and scored with the handle's estimator (fitted on the same corpus as
    the score stage, so the ids agree; :class:`ScoringError` when the estimator's or the preprocessor's id is not
    ``setup``'s), conditioned on the metric's synopsis; a reference whose text is this text is left out.  A text
    without judgment lines gets each reference's floor (no estimator call).  Items whose paper has no baseline
    split, whose preprocessing failed or which the metric cannot score on their paper are left out of the result.
    ``progress`` shows the requests under ``label``.
    """
    data = _load(store)
    splits = data["splits"]
    todo = [(pid, text) for pid, text in dict.fromkeys(items) if pid in splits]
    out = TextScores()
    if not todo:
        return out
    # the corpus the score stage fitted on (every paper with a split): the estimator id of the stored scores
    fitted_on = corpus_texts(store)
    rule = _rule(store, setup, metric_name, preprocessor, [t for _, t in fitted_on.values()] + [t for _, t in todo])
    estimator = handle.get(estimator_corpus(fitted_on, None if rule.raw else rule.lines) if handle.info.needs_corpus
                           else None)
    if estimator.id != setup.estimator_id:
        raise ScoringError(f"stored scores use estimator {setup.estimator_id}, this run's is {estimator.id}")
    pending = _requests(store, settings, setup, rule, todo, data, out)
    results, out.estimator_calls, _, _ = _evaluate(store, [(estimator, c) for *_, c, _ in pending]
                                                   + [(estimator, m) for *_, m in pending],
                                                   progress or NoProgress(), label)
    for pid, digest, ref, cond, marg in pending:
        out.pmis[(pid, digest)][ref] = pmi(results[request_key(estimator.id, cond)],
                                           results[request_key(estimator.id, marg)])
        out.marginals[(pid, digest)][ref] = results[request_key(estimator.id, marg)].logprob
    return out


def _rule(store: Store, setup: ScoredSetup, metric_name: str, preprocessor: Preprocessor | None,
          texts: list[str]) -> PairRule:
    """The metric's pair rule with the judgment lines of ``texts`` (cached like all preprocessing)."""
    if metric(metric_name).raw:
        return PairRule(metric_name, True, {})
    if preprocessor is None:
        raise ScoringError(f"{metric_name} scores judgment lines: score_texts needs the preprocessor of "
                           f"{setup.preprocessor_id}")
    if preprocessor.id != setup.preprocessor_id:
        raise ScoringError(f"stored scores use preprocessor {setup.preprocessor_id}, this run's is {preprocessor.id}")
    return PairRule(metric_name, False, preprocess_texts(store, preprocessor, texts))


def _requests(store: Store, settings: Settings, setup: ScoredSetup, rule: PairRule, todo: list[tuple[str, str]],
              data: ScoringData, out: TextScores) -> list[tuple[str, str, str, LogprobRequest, LogprobRequest]]:
    """The pairs' requests; texts without judgment lines get the floors into ``out`` at once."""
    splits = data["splits"]
    ref_texts = {rid: text for rid, (_, text) in data["reviews"].items()}
    synopses = metric(rule.metric).synopses(SynopsisInputs(
        store, settings, sorted({pid for pid, _ in todo}), data["abstracts"], lambda *_: None)) or {}
    floors: dict[tuple[str, str], float] | None = None
    pending = []
    for pid, text in todo:
        x = rule.text(text, "candidate review")
        if x is False:
            continue
        digest = text_sha256(text)
        if not x:  # no judgment lines: the reference's floor, as on the boards (no estimator call)
            if floors is None:
                floors = reference_floors(store, rule.metric, setup.estimator_id,
                                          metric_preprocessor(rule.metric, setup.preprocessor_id))
            for ref in splits[pid][1]:
                if ref in ref_texts and text_sha256(ref_texts[ref]) != digest:
                    out.pmis[(pid, digest)][ref] = floors.get((pid, ref), 0.0)
            continue
        if pid not in synopses:
            continue  # the metric cannot be scored on this paper (no abstract)
        pending += [(pid, digest, ref, c, m) for ref, c, m in rule.requests(pid, synopses[pid], x, splits[pid][1],
                                                                            ref_texts, own_text=text)]
    return pending


def unconditional_logprobs(store: Store, handle: EstimatorHandle, texts: list[str]) -> list[tuple[float, int]]:
    """(summed log-probability, tokens) of each text under the evaluation LM of ``handle`` (built, and closed, by
    the caller), with the GEM prompt given neither abstract nor first review: how readable the LM finds it (the
    prose test's LM path).  Through the log-prob cache, like every score; a corpus-fitted estimator is fitted as the
    score stage fits it."""
    corpus = estimator_corpus(corpus_texts(store), None) if handle.info.needs_corpus else None
    estimator = handle.get(corpus)
    requests = [LogprobRequest("prose-test", None, None, text) for text in texts]
    results, *_ = _evaluate(store, [(estimator, r) for r in requests], NoProgress(), "prose test")
    return [(results[request_key(estimator.id, r)].logprob, results[request_key(estimator.id, r)].n_tokens)
            for r in requests]


@dataclass
class CachedLogprobs:
    """``estimator.logprobs`` through the store's log-prob cache (the score stage's :func:`_evaluate`): a request
    cached before is read, the others are computed and cached as they come (a stop or a crash loses at most one
    batch).  ``computed`` counts the requests the estimator was asked (not found in the cache) over every call."""

    store: Store
    estimator: Estimator
    label: str = "LM requests"
    progress: Progress = field(default_factory=NoProgress)
    computed: int = 0

    def __call__(self, requests: Sequence[LogprobRequest]) -> list[LogprobResult]:
        """The answer of each request, in request order."""
        results, asked, _, _ = _evaluate(self.store, [(self.estimator, r) for r in requests], self.progress,
                                         self.label)
        self.computed += asked
        return [results[request_key(self.estimator.id, r)] for r in requests]

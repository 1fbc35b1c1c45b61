"""Scoring engine: stored generations and references → log-prob requests → ``scores`` rows.

GEM(x, y) = log P(y | x) - log P(y) and GEM-S(x, y | s) = log P(y | x, s) - log P(y | s).  The marginal term does not
depend on the candidate, so it is requested once per (paper, reference, synopsis) and shared by every candidate;
every estimator answer is cached in ``logprob_cache`` under its canonical request key as it arrives (a server
estimator streams, an in-process one answers bounded batches of requests), and pairs already in ``scores`` are
skipped, so a rerun with nothing new makes no estimator call and a crash loses at most one batch.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, TypedDict

from grebench import stop
from grebench.bench import CONTROLS, REFERENCE, kind_info
from grebench.progress import NoProgress, Progress, Task
from grebench.scoring._attribution import ScoreKey, attributed, attributes, leave_one_out, write_attribution
from grebench.scoring._metrics import METRICS, RAW_PREPROCESSOR, SynopsisInputs, default_metrics, metric
from grebench.scoring._pairs import PairRule, Skips, pmi
from grebench.scoring._preprocess import Judgment, Preprocessor, preprocess_texts, text_sha256
from grebench.scoring._request import GEM_PROMPT_VERSION, LogprobRequest, LogprobResult
from grebench.store import ReviewRecord, Store, utcnow

if TYPE_CHECKING:
    from grebench.scoring.estimators import Estimator, EstimatorHandle
    from grebench.settings import Settings

PAPERS_PER_BATCH = 40


class ScoringError(ValueError):
    """Scoring refused to run (mixed preprocessors, a leaked reference, an unknown metric)."""


def request_key(estimator_id: str, req: LogprobRequest) -> str:
    """Canonical cache key of one estimator request.

    The paper id is part of it because the offline estimator leaves the scored paper out of its fit, so the same
    texts can get different numbers for different papers.
    """
    return _request_key(estimator_id, req)


@lru_cache(maxsize=65536)  # a marginal is shared by every candidate, and each key is needed twice in a run
def _request_key(estimator_id: str, req: LogprobRequest) -> str:
    blob = json.dumps([estimator_id, req.prompt_version, req.paper_id, req.synopsis, req.first_review, req.target],
                      ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


@dataclass
class _Pair:
    metric: str
    candidate: str
    paper_id: str
    reference: str
    generation_id: str
    conditional: LogprobRequest
    marginal: LogprobRequest


def _splits_and_reviews(store: Store) -> tuple[dict[str, tuple[str, list[str]]], dict[str, tuple[str, str]]]:
    splits = {r["paper_id"]: (r["candidate_review_id"], json.loads(r["reference_review_ids_json"]))
              for r in store.rows("SELECT * FROM baseline_splits")}
    reviews = {r["review_id"]: (r["paper_id"], r["text"]) for r in store.rows(
        f"""SELECT r.review_id, r.paper_id, v.text FROM reviews r JOIN review_versions v
           ON v.review_id = r.review_id AND v.version = r.latest_version WHERE r.kind = '{ReviewRecord.OFFICIAL}'""")}
    return splits, reviews


def corpus_texts(store: Store) -> dict[str, tuple[str, str]]:
    """The human reviews a corpus-fitted estimator is fitted on, by review id: (paper id, text) of the latest
    version of every official review of every paper with a baseline split.  The score stage and the gem judge
    (which scores exam texts with the same estimator) both fit on exactly these, so their estimator ids agree."""
    splits, reviews = _splits_and_reviews(store)
    return {rid: (pid, text) for rid, (pid, text) in reviews.items() if pid in splits}


def estimator_corpus(texts: Mapping[str, tuple[str, str]], lines: Mapping[str, Judgment] | None
                     ) -> dict[str, list[str]]:
    """The corpus per paper from :func:`corpus_texts`: the raw texts (``lines`` None: a raw metric) or their
    judgment lines (reviews without any are left out)."""
    corpus: dict[str, list[str]] = defaultdict(list)
    for pid, text in texts.values():
        if lines is None:
            corpus[pid].append(text)
        elif (j := lines.get(text_sha256(text))) is not None and j.status == "ok" and j.lines:
            corpus[pid].append(j.text)
    return dict(corpus)


class ScoringData(TypedDict):
    """What scoring reads from the store (:func:`_load`): the splits (paper id -> (candidate review id, reference
    review ids)), the abstracts, the official reviews (review id -> (paper id, text)) and the latest generation of
    each candidate on each paper."""

    splits: dict[str, tuple[str, list[str]]]
    abstracts: dict[str, str | None]
    reviews: dict[str, tuple[str, str]]
    generations: list[dict[str, Any]]


class Attribution(TypedDict):
    """What the per-line attribution did (:func:`_attribute`): the pairs, the requests and estimator batches it
    made, the cache hits and the rows written (the score stage's ``attribution``; docs/scoring.md)."""

    pairs: int
    requests: int
    cache_hits: int
    batches: int
    rows: int


def _load(store: Store) -> ScoringData:
    splits, reviews = _splits_and_reviews(store)
    abstracts = {r["paper_id"]: r["abstract"] for r in store.rows("SELECT paper_id, abstract FROM papers")}
    generations = store.rows(
        """SELECT g.generation_id, g.candidate, g.paper_id, g.text, g.source_review_id, c.kind FROM generations g
           LEFT JOIN candidates c ON c.name = g.candidate
           WHERE g.status = 'ok' AND g.text IS NOT NULL
           QUALIFY row_number() OVER (PARTITION BY g.candidate, g.paper_id ORDER BY g.generated_at DESC,
                                      g.generation_id) = 1
           ORDER BY g.candidate, g.paper_id""")
    return {"splits": splits, "abstracts": abstracts, "reviews": reviews, "generations": generations}


def _check_no_leak(data: ScoringData) -> None:
    """The review being scored is never one of its own references (baseline_splits guarantees it; we verify), except
    a control registered with ``source="reference"`` (``reference-copy``): its leak is the measurement."""
    leaking = {e.name for e in CONTROLS if e.obj.source == "reference"}
    for g in data["generations"]:
        split = data["splits"].get(g["paper_id"])
        if g["candidate"] in leaking and kind_info(g["kind"]).role == REFERENCE:  # built from the references on purpose
            continue
        if split and g["source_review_id"] and g["source_review_id"] in split[1]:
            raise ScoringError(f"generation {g['generation_id']} ({g['candidate']}, paper {g['paper_id']}) is derived "
                               f"from review {g['source_review_id']}, which is one of its references")
        if split and split[0] in split[1]:
            raise ScoringError(f"paper {g['paper_id']}: the human baseline's review is in its own reference set")


def run_scoring(store: Store, settings: Settings, run_id: str | None, metrics: Sequence[str] = (), *,
                handle: EstimatorHandle | None, preprocessor: Preprocessor | None,
                progress: Progress | None = None, estimator: Estimator | None = None,
                paper_ids: Collection[str] | None = None, controls: Collection[str] | None = None,
                label: str = "score") -> dict[str, Any]:
    """Score every stored generation against its references; returns the run summary.

    Scoring takes built parts and builds none (issue 61): ``handle`` is the job's estimator
    (:class:`~grebench.scoring.estimators.EstimatorHandle`, held by the resolved run, or built by the caller): its
    instances are used and left to whoever built the handle to close; ``preprocessor`` is the built preprocessor in
    force (:func:`~grebench.scoring.resolve_preprocessor`, once, by the caller), None only when every metric scores
    raw texts.  ``estimator`` overrides the handle (tests hand in a fake that speaks the same protocol, with
    ``handle=None``); ``paper_ids``
    limits the scoring to those papers (the main job's sample); ``controls`` to those controls (the run's set: a
    core run leaves controls an earlier full run wrote unscored), None: every stored one.  ``label`` names the
    progress lines (the fast proxy's say so, so that its seconds are never read as the evaluation LM's).
    """
    metrics = list(dict.fromkeys(metrics or default_metrics()))
    unknown = [m for m in metrics if m not in METRICS]
    if unknown:
        raise ScoringError(f"unknown metric(s) {unknown}: choose from {', '.join(METRICS.names())}")
    if estimator is not None:
        needs_corpus, unbuilt = False, estimator.id
    elif handle is None:
        raise ScoringError("run_scoring needs the job's estimator handle")
    else:  # an unknown kind fails here, before any text is preprocessed
        needs_corpus, unbuilt = handle.info.needs_corpus, handle.spec
    needs_lines = any(not metric(m).raw for m in metrics)
    if needs_lines and preprocessor is None:
        raise ScoringError(f"{', '.join(m for m in metrics if not metric(m).raw)} score judgment lines: run_scoring "
                           "needs the preprocessor in force")
    skips = Skips()
    data = _load(store)
    _check_no_leak(data)
    splits, reviews, generations = data["splits"], data["reviews"], data["generations"]
    ref_texts = {rid: text for rid, (_, text) in reviews.items()}
    wanted = splits if paper_ids is None else set(paper_ids) & set(splits)
    generations = [g for g in generations if g["paper_id"] in wanted
                   and (controls is None or g["candidate"] in controls or kind_info(g["kind"]).role != REFERENCE)]
    if not needs_lines:
        preprocessor = None
    # what each text becomes: judgment lines (or the raw text for a raw metric)
    corpus_ids = [rid for rid, (pid, _) in reviews.items() if pid in splits]
    lines: dict[str, Judgment] = {}
    display = progress or NoProgress()
    if preprocessor is not None:
        texts = [reviews[rid][1] for rid in corpus_ids] + [g["text"] for g in generations]
        with display.task(f"preprocess ({preprocessor.id})", len(set(texts)), "texts") as task:
            lines = preprocess_texts(store, preprocessor, texts, task.advance)
        _refuse_mixing(preprocessor.id, splits, reviews, lines)
    est_cache: dict[bool, Estimator] = {}

    def estimator_for(raw: bool) -> Estimator:
        if estimator is not None:
            return estimator
        if raw not in est_cache:
            assert handle is not None
            corpus: dict[str, list[str]] | None = None
            if needs_corpus:  # one model serves raw and preprocessed texts alike, unless it is fitted on them
                corpus = estimator_corpus({rid: reviews[rid] for rid in corpus_ids}, None if raw else lines)
            est_cache[raw] = handle.get(corpus, progress=display)
        return est_cache[raw]

    pairs: list[tuple[Estimator, str, _Pair]] = []
    to_attribute: list[tuple[Estimator, str, _Pair, tuple[str, ...]]] = []
    for name in metrics if generations else ():  # nothing to score: no model is pulled, loaded or locked
        raw = metric(name).raw
        prep_id = RAW_PREPROCESSOR if raw else preprocessor.id  # type: ignore[union-attr]
        synopses = _synopses(store, settings, name, data, skips)
        if synopses is None:
            continue
        est = estimator_for(raw)
        existing = {(r["candidate"], r["paper_id"], r["reference_review_id"]): r["generation_id"]
                    for r in store.rows("SELECT candidate, paper_id, reference_review_id, generation_id "
                                        "FROM scores WHERE metric = ? AND estimator = ? AND preprocessor = ?",
                                        [name, est.id, prep_id])}
        rule = PairRule(name, raw, lines, skips)
        attribute = not raw and attributes(settings.scoring.attribution, _is_proxy(est))
        done = attributed(store, name, est.id, prep_id) if attribute else set()
        for g in generations:
            pid = g["paper_id"]
            if pid not in synopses:
                continue
            cand_text = rule.text(g["text"], "candidate review")
            if cand_text is False:
                continue
            for ref, conditional, marginal in rule.requests(pid, synopses[pid], cand_text, splits[pid][1],
                                                            ref_texts):
                pair = _Pair(name, g["candidate"], pid, ref, g["generation_id"], conditional, marginal)
                if existing.get((g["candidate"], pid, ref)) != g["generation_id"]:
                    pairs.append((est, prep_id, pair))
                if attribute and cand_text and (g["candidate"], pid, ref, g["generation_id"]) not in done:
                    to_attribute.append((est, prep_id, pair, lines[text_sha256(g["text"])].lines))
    results, calls, hits, batches = _evaluate(store, [(e, p.conditional) for e, _, p in pairs]
                                              + [(e, p.marginal) for e, _, p in pairs], display, label)
    _write_scores(store, pairs, results)
    attribution = _attribute(store, to_attribute, display, label.replace("score", "attribute", 1))
    summary: dict[str, Any] = {
        "metrics": metrics,
        "estimator": next(iter(est_cache.values())).id if est_cache else unbuilt,
        "preprocessor": preprocessor.id if preprocessor else RAW_PREPROCESSOR,
        # every request asked of the estimator is counted (each is a new cache row), the attribution's included;
        # ``attribution`` says how many were its own (its cache hits count the scores' conditionals it reread)
        "pairs_scored": len(pairs), "estimator_calls": calls + attribution["requests"],
        "estimator_batches": batches + attribution["batches"], "cache_hits": hits,
        "skipped": skips.report(), "attribution": attribution,
    }
    if not generations:
        summary["nothing_to_score"] = True
    if run_id is not None:
        for item in summary["skipped"]:
            if item["what"] == "metric":
                store.record_failure(run_id, "score", item["metric"], item["reason"])
    return summary


def _is_proxy(est: Estimator) -> bool:
    """Whether an estimator is a fast proxy: its id's kind says so (a kind not registered is not one)."""
    from grebench.scoring.estimators import estimator_info

    return estimator_info(est.id).proxy


def _attribute(store: Store, todo: list[tuple[Estimator, str, _Pair, tuple[str, ...]]],
               progress: Progress, label: str = "attribute") -> Attribution:
    """Leave-one-line-out contributions of the pairs in ``todo`` (through the cache, like every request); returns
    the requests it made, the cache hits, the estimator batches and the rows written."""
    if not todo:
        return {"pairs": 0, "requests": 0, "cache_hits": 0, "batches": 0, "rows": 0}
    loo = [leave_one_out(p.conditional, cand_lines) for _, _, p, cand_lines in todo]
    requests = [(est, p.conditional) for est, _, p, _ in todo]
    requests += [(est, r) for (est, _, _, _), reqs in zip(todo, loo, strict=True) for r in reqs]
    results, calls, hits, batches = _evaluate(store, requests, progress, label=label)
    rows = []
    for (est, prep_id, p, cand_lines), reqs in zip(todo, loo, strict=True):
        full = results[request_key(est.id, p.conditional)].logprob
        rows.append((ScoreKey(p.metric, est.id, prep_id, p.candidate, p.paper_id, p.reference, p.generation_id),
                     cand_lines, [full - results[request_key(est.id, r)].logprob for r in reqs]))
    return {"pairs": len(todo), "requests": calls, "cache_hits": hits, "batches": batches,
            "rows": write_attribution(store, rows)}


def _refuse_mixing(prep_id: str, splits: dict[str, tuple[str, list[str]]], reviews: dict[str, tuple[str, str]],
                   lines: dict[str, Judgment]) -> None:
    """Imported lines must exist for every reference: a ranking never mixes preprocessors."""
    if not prep_id.startswith("imported:"):
        return
    refs = {ref for _, refs in splits.values() for ref in refs if ref in reviews}
    missing = [ref for ref in refs if lines.get(text_sha256(reviews[ref][1]), Judgment("missing")).status != "ok"]
    if missing:
        raise ScoringError(f"--preprocessor imported: {len(missing)} of {len(refs)} reference reviews have no "
                           f"judgment lines from {prep_id.split(':', 1)[1]!r}; a ranking cannot mix preprocessors "
                           "(use rules or litellm:MODEL for all reviews)")


def _synopses(store: Store, settings: Settings, name: str, data: ScoringData,
              skips: Skips) -> dict[str, str | None] | None:
    """Synopsis per paper for this metric (None: nothing conditioned on); papers left out are counted as skipped."""
    return metric(name).synopses(SynopsisInputs(store, settings, list(data["splits"]), data["abstracts"],
                                                lambda what, reason, n: skips.add(name, what, reason, n)))


def _evaluate(store: Store, requests: list[tuple[Estimator, LogprobRequest]],
              progress: Progress, label: str = "score") -> tuple[dict[str, LogprobResult], int, int, int]:
    """Answers keyed by request key: cache first, then the estimator; returns (answers, requests asked, cache hits,
    cache writes).

    Nothing answered waits on anything else to be cached: an estimator that streams (``stream(requests,
    on_result)``: the server estimators' dispatcher, the Ray executor) hands each answer over as it arrives and the
    answers are cached :data:`FLUSH_REQUESTS` at a time (or after :data:`FLUSH_S` seconds); an in-process estimator
    is called in bounded batches of requests (whole papers together up to :data:`REQUESTS_PER_BATCH`, its
    ``papers_per_batch`` at most), each cached before the next.  A stop or a kill loses at most one batch."""
    keyed: dict[str, tuple[Estimator, LogprobRequest]] = {}
    for est, req in requests:
        keyed.setdefault(request_key(est.id, req), (est, req))
    results: dict[str, LogprobResult] = {}
    if keyed:
        for row in store.rows("SELECT request_key, logprob, n_tokens FROM logprob_cache "
                              "WHERE request_key IN (SELECT unnest(?::VARCHAR[]))", [list(keyed)]):
            results[row["request_key"]] = LogprobResult(row["logprob"], row["n_tokens"])
    hits = len(results)
    todo: dict[tuple[int, str], list[str]] = defaultdict(list)
    ests: dict[int, Estimator] = {}
    for key, (est, req) in keyed.items():
        if key not in results:
            ests[id(est)] = est
            todo[(id(est), req.paper_id)].append(key)
    total = sum(len(v) for v in todo.values())
    writes = 0
    with progress.task(label, total, "requests") as task:
        for est_id, est in ests.items():
            keys = [k for group in sorted(g for g in todo if g[0] == est_id) for k in todo[group]]
            writer = _CacheWriter(store, est.id, results, task)
            stream = getattr(est, "stream", None)
            try:
                if callable(stream):
                    answers = stream([keyed[k][1] for k in keys], lambda i, a, ks=keys, w=writer: w.add(ks[i], a))
                    if len(answers) != len(keys):
                        raise RuntimeError(f"estimator {est.id} returned {len(answers)} results for {len(keys)} "
                                           "requests")
                else:
                    for batch in _request_batches(keys, keyed, est):
                        stop.check()  # a batch boundary: every earlier batch's answers are cached already
                        answers = est.logprobs([keyed[k][1] for k in batch])
                        if len(answers) != len(batch):
                            raise RuntimeError(f"estimator {est.id} returned {len(answers)} results for "
                                               f"{len(batch)} requests")
                        for k, answer in zip(batch, answers, strict=True):
                            writer.add(k, answer, flush=False)
                        writer.flush()
            finally:  # what arrived before a stop or a failure is cached
                writer.flush()
                writes += writer.writes
    return results, total, hits, writes


#: Most requests one call of an in-process estimator gets: a kill loses at most this many, and the progress line
#: moves at least this often (issue 64: the offline estimator's batch of 40 papers once held 13,592 requests).
REQUESTS_PER_BATCH = 512
#: A streaming estimator's answers are cached this many at a time, or after this many seconds.
FLUSH_REQUESTS = 256
FLUSH_S = 2.0


def _request_batches(keys: list[str], keyed: Mapping[str, tuple[Estimator, LogprobRequest]],
                     est: Estimator) -> list[list[str]]:
    """``keys`` (in paper order) cut into batches: whole papers together (their prefixes are reused within a
    call) up to the estimator's ``papers_per_batch`` and :data:`REQUESTS_PER_BATCH` requests; a paper with more
    requests than that is cut."""
    cap = max(1, int(getattr(est, "requests_per_batch", REQUESTS_PER_BATCH)))
    papers_cap = max(1, int(getattr(est, "papers_per_batch", PAPERS_PER_BATCH)))
    papers: list[list[str]] = []
    for k in keys:
        if not papers or keyed[papers[-1][0]][1].paper_id != keyed[k][1].paper_id:
            papers.append([])
        papers[-1].append(k)
    batches: list[list[str]] = []
    current: list[str] = []
    count = 0
    for paper in papers:
        if current and (count >= papers_cap or len(current) + len(paper) > cap):
            batches.append(current)  # the paper would not fit whole: it starts the next batch
            current, count = [], 0
        for start in range(0, len(paper), cap):
            piece = paper[start:start + cap]
            if current and len(current) + len(piece) > cap:  # a paper larger than a batch is cut
                batches.append(current)
                current, count = [], 0
            current.extend(piece)
        count += 1
    if current:
        batches.append(current)
    return batches


class _CacheWriter:
    """Caches answers as they arrive, in bounded writes (one DuckDB statement per write)."""

    def __init__(self, store: Store, estimator_id: str, results: dict[str, LogprobResult], task: Task) -> None:
        import time

        self.store, self.estimator_id, self.results, self.task = store, estimator_id, results, task
        self.keys: list[str] = []
        self.answers: list[LogprobResult] = []
        self.writes = 0
        self._clock = time.monotonic
        self._since = self._clock()

    def add(self, key: str, answer: LogprobResult, flush: bool = True) -> None:
        self.results[key] = answer
        self.keys.append(key)
        self.answers.append(answer)
        if flush and (len(self.keys) >= FLUSH_REQUESTS or self._clock() - self._since >= FLUSH_S):
            self.flush()

    def flush(self) -> None:
        self._since = self._clock()
        if not self.keys:
            return
        keys, answers, self.keys, self.answers = self.keys, self.answers, [], []
        self.store.con.execute(
            """INSERT OR REPLACE INTO logprob_cache SELECT unnest(?::VARCHAR[]), ?, ?, unnest(?::DOUBLE[]),
               unnest(?::INTEGER[]), ?""",
            [keys, self.estimator_id, GEM_PROMPT_VERSION, [float(a.logprob) for a in answers],
             [int(a.n_tokens) for a in answers], utcnow()])
        self.writes += 1
        self.task.advance(len(keys))


def _write_scores(store: Store, pairs: list[tuple[Estimator, str, _Pair]], results: dict[str, LogprobResult]) -> None:
    if not pairs:
        return
    cols: dict[str, list[Any]] = defaultdict(list)
    for est, prep_id, p in pairs:
        cond = results[request_key(est.id, p.conditional)]
        marg = results[request_key(est.id, p.marginal)]
        for name, value in (("metric", p.metric), ("estimator", est.id), ("preprocessor", prep_id),
                            ("candidate", p.candidate), ("paper_id", p.paper_id), ("reference", p.reference),
                            ("generation_id", p.generation_id), ("conditional", cond.logprob),
                            ("marginal", marg.logprob), ("pmi", pmi(cond, marg)),
                            ("n_tokens", marg.n_tokens)):
            cols[name].append(value)
    store.con.execute(
        """INSERT OR REPLACE INTO scores SELECT unnest(?::VARCHAR[]), unnest(?::VARCHAR[]), unnest(?::VARCHAR[]), ?,
           unnest(?::VARCHAR[]), unnest(?::VARCHAR[]), unnest(?::VARCHAR[]), unnest(?::VARCHAR[]),
           unnest(?::DOUBLE[]), unnest(?::DOUBLE[]), unnest(?::DOUBLE[]), unnest(?::INTEGER[]), ?""",
        [cols["metric"], cols["estimator"], cols["preprocessor"], GEM_PROMPT_VERSION, cols["candidate"],
         cols["paper_id"], cols["reference"], cols["generation_id"], cols["conditional"], cols["marginal"],
         cols["pmi"], cols["n_tokens"], utcnow()])

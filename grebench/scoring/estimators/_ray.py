"""Scoring on Ray actors (``executor = ray``): an in-process estimator (``hf:...``, ``offline``) run as a pool of
actors, each owning its own instance, while the driver stays the one store writer.

- **One build path.**  An actor is made from a small picklable :class:`EstimatorPart` (the spec and the settings)
  and builds its estimator exactly as the driver would, through ``EstimatorHandle(spec, settings,
  executor="local").get(corpus)``: the same model, dtype, prefix-reuse choice and id, so the numbers are the same
  as in-process.  A corpus-fitted kind (``offline``) gets its corpus through Ray's object store, once per corpus,
  and an actor keeps one instance per corpus (a handle's raw and preprocessed texts share one pool of actors).
- **Shards of whole papers.**  Requests are cut into shards of whole papers (a paper's requests share their
  prompt prefixes, which the hf estimator computes once), at most :data:`SHARD_REQUESTS` requests each (a paper
  with more goes alone) and at most the inner estimator's ``papers_per_batch`` papers, so that an actor's batches
  are the ones the in-process path would make.  Each actor has :data:`IN_FLIGHT_PER_ACTOR` shards queued, so it
  never waits for the driver; shards are collected with ``ray.wait`` as they finish and their answers handed to
  ``on_result`` on the caller's thread (the store writer), which caches each under its request key.
- **Ray's fault tolerance, none of our own.**  Actors are created with ``max_restarts`` and ``max_task_retries``:
  an actor whose process dies is restarted by Ray (it builds its estimator again from the same part) and the
  shards it held are run again there.  A shard's answers reach the driver once (its object ref resolves once), and
  the cache and ``scores`` are upserted by request key, so a retried shard writes nothing twice.
- **Server estimators are not wrapped** (``vllm:``, ``sglang:``, ``vllm-local:``): their requests already stream
  from the driver to their servers through :class:`~grebench.dispatch.Dispatcher`; an actor
  in between would add a hop and nothing else.

Ray is imported here only, and only when ``executor = ray`` builds an estimator: ``import grebench`` never imports
it (it is the optional extra ``pip install -e '.[hf,ray]'``).
"""

from __future__ import annotations

import logging
import os
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from grebench import stop
from grebench.cluster import RayMissing, ray_module, start_ray
from grebench.progress import NoProgress, Progress
from grebench.scoring._request import LogprobRequest, LogprobResult

if TYPE_CHECKING:
    from grebench.scoring.estimators import EstimatorContext
    from grebench.scoring.estimators._base import Estimator

log = logging.getLogger(__name__)

#: Most requests in one shard (a paper with more is a shard of its own).
SHARD_REQUESTS = 256
#: Papers in one shard of an estimator that does not say how many it takes at once (``papers_per_batch``).
SHARD_PAPERS = 16
#: Shards queued on each actor: one running, one waiting, so an actor never idles while the driver collects.
IN_FLIGHT_PER_ACTOR = 2
#: Times Ray restarts a dead actor, and retries a shard it held (``max_restarts``, ``max_task_retries``).
ACTOR_RESTARTS = 4
TASK_RETRIES = 4


def ray_installed() -> bool:
    """Whether Ray can be imported (found without importing it)."""
    import importlib.util

    return importlib.util.find_spec("ray") is not None


@dataclass(frozen=True)
class EstimatorPart:
    """What an actor builds its estimator from, nothing built: the spec and the context its factory gets (the
    settings; no corpus: corpora travel once each, through the object store).  Both pickle."""

    spec: str
    context: EstimatorContext

    def build(self, corpus: Mapping[str, Sequence[str]] | None) -> Estimator:
        """The estimator of this spec fitted on ``corpus``, built as in-process (a local handle)."""
        from grebench.scoring.estimators import EstimatorHandle

        return EstimatorHandle(self.spec, self.context.settings, executor="local").get(corpus)


class ActorFacts(TypedDict):
    """What an actor built: the estimator's id, the actor's process id, the estimator's ``papers_per_batch``."""

    id: str
    pid: int
    papers_per_batch: int | None


class ScoringActor:
    """One Ray actor's estimators (one per corpus key), built from :class:`EstimatorPart` on first use.  Its
    methods run one at a time (a plain Ray actor), so an estimator never scores two shards at once."""

    def __init__(self, part: EstimatorPart) -> None:
        self.part = part
        self.built: dict[str, Estimator] = {}

    def _estimator(self, key: str, corpus: list[Any]) -> Estimator:
        made = self.built.get(key)
        if made is None:
            ray = ray_module()
            # the corpus travels as a ref inside a list, so that it is fetched only by an actor that builds
            data = ray.get(corpus[0]) if corpus else None
            made = self.built[key] = self.part.build(data)
        return made

    def prepare(self, key: str, corpus: list[Any]) -> ActorFacts:
        """Build the estimator of corpus ``key`` now; what it is: its id, this process, its batch size."""
        est = self._estimator(key, corpus)
        ppb = getattr(est, "papers_per_batch", None)
        return {"id": est.id, "pid": os.getpid(), "papers_per_batch": None if ppb is None else int(ppb)}

    def pid(self) -> int:
        """This actor's process id (tests kill it to check Ray's restart)."""
        return os.getpid()

    def score(self, key: str, corpus: list[Any], requests: list[LogprobRequest]) -> list[LogprobResult]:
        """The answers of one shard, in request order (the estimator is built again after a restart)."""
        answers = self._estimator(key, corpus).logprobs(requests)
        if len(answers) != len(requests):
            raise RuntimeError(f"estimator returned {len(answers)} results for {len(requests)} requests")
        return list(answers)


def _wait_all(refs: list[Any], on_ready: Callable[[], None] | None = None) -> list[Any]:
    """The values of ``refs``, in their order, waited for in short slices so that a stop is seen
    (:mod:`grebench.stop`); ``on_ready()`` is called as each finishes.  Raises a task's error."""
    ray = ray_module()
    left = list(refs)
    while left:
        ready, left = ray.wait(left, num_returns=1, timeout=stop.POLL_S)
        stop.check()
        for _ in ready:
            if on_ready is not None:
                on_ready()
    return list(ray.get(list(refs)))


def _uses_gpu(spec: str, hf_device: str, gpus: float) -> bool:
    """Whether the estimator's model runs on a GPU: a local model with ``hf_device`` auto on a cluster with GPUs,
    or set to a CUDA device.  (The word model and a model set to the CPU never do.)"""
    from grebench.scoring.estimators import estimator_info

    device = hf_device.strip().lower()
    if not estimator_info(spec).local_model:
        return False
    return device.startswith("cuda") or (device == "auto" and gpus > 0)


class RayPool:
    """The actors of one estimator handle: joins (``ray_address``) or starts Ray, creates ``ray_actors`` actors (0:
    one per CPU, or per GPU when the model runs on one), and stops what it started on :meth:`close`."""

    def __init__(self, part: EstimatorPart, progress: Progress | None = None) -> None:
        from grebench.scoring.estimators import estimator_info

        spec, settings = part.spec, part.context.settings
        info = estimator_info(spec)
        if not info.in_process:
            raise ValueError(f"the ray executor runs in-process estimators (hf:..., offline), not {spec!r}: a "
                             "server estimator (vllm:, sglang:, vllm-local:) already streams its requests to its "
                             "servers from this process")
        ray = ray_module()
        self.spec = spec
        # the caller's Ray (a test's, or a driver script's) is left as it is; this job's own is stopped on close
        self.started_ray = start_ray(settings.run.ray_address)
        resources = ray.cluster_resources()
        gpus, cpus = float(resources.get("GPU", 0)), float(resources.get("CPU", 1))
        gpu = _uses_gpu(spec, settings.scoring.hf_device, gpus)
        count = settings.run.ray_actors or max(1, int(gpus if gpu else cpus))
        have = gpus if gpu else cpus
        share = min(1.0, have / count) if have else 1.0  # more actors than devices: they share them
        remote = ray.remote(ScoringActor).options(max_restarts=ACTOR_RESTARTS, max_task_retries=TASK_RETRIES,
                                                  num_cpus=0 if gpu else share, num_gpus=share if gpu else 0)
        self.actors = [remote.remote(part) for _ in range(count)]
        #: each actor's process id when it last built an estimator (a restarted actor has another)
        self.pids = [0] * count
        self.progress = progress or NoProgress()
        self._prepared: dict[str, ActorFacts] = {}
        log.info("ray executor: %d actors for %s (%s each)", count, spec,
                 f"{share:g} GPU" if gpu else f"{share:g} CPU")

    def prepare(self, key: str, corpus: list[Any]) -> ActorFacts:
        """Have every actor build its estimator of corpus ``key``; what they built (the same id on each: refused
        otherwise).  The first build of the pool runs on one actor before the others, so that what is decided once
        per machine (a model's pull, the dtype and prefix-reuse probes, cached in models_dir) is decided once."""
        if key in self._prepared:
            return self._prepared[key]
        with self.progress.task(f"ray actors ({self.spec})", len(self.actors), "actors") as task:
            first = 0 if self._prepared else 1
            described: list[ActorFacts] = _wait_all([a.prepare.remote(key, corpus) for a in self.actors[:first]],
                                                    task.advance)
            described += _wait_all([a.prepare.remote(key, corpus) for a in self.actors[first:]], task.advance)
        self.pids = [d["pid"] for d in described]
        ids = sorted({d["id"] for d in described})
        if len(ids) != 1:
            raise RuntimeError(f"the Ray actors built different estimators ({', '.join(ids)}): set what they "
                               "decide on their machine (hf_dtype, hf_prefix_reuse) explicitly")
        self._prepared[key] = described[0]
        return described[0]

    def current_pids(self) -> list[int]:
        """Each actor's process id now, asked of the actors (waits behind the shards they hold)."""
        ray = ray_module()
        return [int(p) for p in ray.get([a.pid.remote() for a in self.actors])]

    def close(self) -> None:
        """Kill the actors, busy or not (an actor's process ends with its estimators: an in-process kind holds
        nothing outside it), and stop a Ray this pool started."""
        actors, self.actors = self.actors, []
        if not actors:
            return
        ray = ray_module()
        try:
            for actor in actors:
                ray.kill(actor, no_restart=True)
        finally:
            if self.started_ray:
                ray.shutdown()


def cut_shards(requests: Sequence[LogprobRequest], max_requests: int = SHARD_REQUESTS,
               max_papers: int = SHARD_PAPERS) -> list[list[int]]:
    """Request indices in shards of whole papers (in the order papers first appear): at most ``max_requests``
    requests and ``max_papers`` papers each; a paper with more requests than that is a shard of its own."""
    by_paper: dict[str, list[int]] = {}
    for i, req in enumerate(requests):
        by_paper.setdefault(req.paper_id, []).append(i)
    shards: list[list[int]] = []
    current: list[int] = []
    papers = 0
    for indices in by_paper.values():
        if current and (len(current) + len(indices) > max_requests or papers >= max_papers):
            shards.append(current)
            current, papers = [], 0
        current = current + indices
        papers += 1
    if current:
        shards.append(current)
    return shards


class RayEstimator:
    """An in-process estimator run on a :class:`RayPool`'s actors, fitted on one corpus (None: a kind that fits
    none).  ``id`` is the inner estimator's, as an actor built it; :meth:`stream` hands each answer over as its
    shard returns; :meth:`close` closes the pool."""

    def __init__(self, pool: RayPool, corpus: Mapping[str, Sequence[str]] | None = None,
                 progress: Progress | None = None, shard_requests: int = SHARD_REQUESTS) -> None:
        from grebench.scoring.estimators import _corpus_key

        ray = ray_module()
        self.pool = pool
        self.key = _corpus_key(corpus)
        self._corpus = [ray.put({k: list(v) for k, v in corpus.items()})] if corpus is not None else []
        built = pool.prepare(self.key, self._corpus)
        self.id: str = built["id"]
        inner = built["papers_per_batch"]
        self.shard_papers = int(inner) if inner else SHARD_PAPERS
        self.shard_requests = shard_requests
        #: requests sent to the actors (a retried shard counts once), shards answered, and shards each actor holds
        #: now (sent, not yet answered: one running, the next queued behind it)
        self.requests_sent = 0
        self.shards_done = 0
        self.shards_held = [0] * len(pool.actors)

    def __repr__(self) -> str:
        return f"RayEstimator({self.id!r}, actors={len(self.pool.actors)})"

    def logprobs(self, requests: Sequence[LogprobRequest]) -> list[LogprobResult]:
        """Summed log-probs of each request's target, in request order."""
        return self.stream(requests)

    def stream(self, requests: Sequence[LogprobRequest],
               on_result: Callable[[int, LogprobResult], None] | None = None) -> list[LogprobResult]:
        """Score ``requests`` on the actors; ``on_result(i, answer)`` is called on this thread for every request,
        a shard at a time as shards finish.  Returns the answers in request order.  A stop (:mod:`grebench.stop`)
        is seen within a poll interval: what was handed over stays, the shards still queued are cancelled, and
        :class:`grebench.stop.Interrupted` is raised."""
        ray = ray_module()
        results: list[Any] = [None] * len(requests)
        actors = self.pool.actors
        if not actors:
            raise RuntimeError("the Ray actors of this estimator were closed")
        reqs = list(requests)
        todo = deque(cut_shards(reqs, self.shard_requests, self.shard_papers))
        in_flight: dict[Any, tuple[list[int], int]] = {}

        def submit(actor: int) -> None:
            shard = todo.popleft()
            ref = actors[actor].score.remote(self.key, self._corpus, [reqs[i] for i in shard])
            in_flight[ref] = (shard, actor)
            self.requests_sent += len(shard)
            self.shards_held[actor] += 1

        try:
            for _ in range(IN_FLIGHT_PER_ACTOR):
                for actor in range(len(actors)):
                    if todo:
                        submit(actor)
            while in_flight:
                ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=stop.POLL_S)
                stop.check()
                for ref in ready:
                    shard, actor = in_flight.pop(ref)
                    self.shards_held[actor] -= 1
                    answers = self._answers(ray, ref, shard, reqs)
                    for i, answer in zip(shard, answers, strict=True):
                        results[i] = answer
                        if on_result is not None:
                            on_result(i, answer)
                    self.shards_done += 1
                    if todo:
                        submit(actor)
                stop.check()
        finally:
            self.shards_held = [0] * len(actors)
            for ref in in_flight:  # a stop or a failure: nothing queued runs on (a running shard ends on its own)
                try:
                    ray.cancel(ref)
                except Exception:  # best effort: close() kills the actors anyway
                    pass
        return results

    def _answers(self, ray: Any, ref: Any, shard: list[int], reqs: list[LogprobRequest]) -> list[LogprobResult]:
        from ray.exceptions import ActorDiedError, ActorUnavailableError

        try:
            answers: list[LogprobResult] = ray.get(ref)
        except (ActorDiedError, ActorUnavailableError) as exc:
            papers = sorted({reqs[i].paper_id for i in shard})
            raise RuntimeError(f"a Ray actor scoring {len(shard)} requests of {len(papers)} paper(s) "
                               f"({', '.join(papers[:3])}{' ...' if len(papers) > 3 else ''}) died after "
                               f"{ACTOR_RESTARTS} restarts and {TASK_RETRIES} retries: {exc}") from exc
        if len(answers) != len(shard):
            raise RuntimeError(f"a Ray actor returned {len(answers)} results for {len(shard)} requests")
        return answers

    def close(self) -> None:
        """Close the pool: its actors are killed, and a Ray the pool started is stopped."""
        self.pool.close()


__all__ = ["EstimatorPart", "RayEstimator", "RayMissing", "RayPool", "ScoringActor", "cut_shards",
           "ray_installed"]

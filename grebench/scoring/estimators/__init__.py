"""Evaluation-LM estimators for GEM / GEM-S, registered by name in :data:`ESTIMATORS`.

Built in: ``offline`` (embedded word model: a fast proxy), ``hf:PATH`` (transformers), ``vllm:URL[,URL...]`` and
``sglang:URL`` (servers).  A new backend is one module with one registration::

    @ESTIMATORS.register("mybackend", spec="mybackend:ARG", summary="...")
    def make(arg: str, context: EstimatorContext) -> Estimator: ...

listed in the registry's built-in modules, or shipped by another package through the ``grebench`` entry-point
group (see docs/architecture.md).  Implementations import their heavy libraries inside functions: importing this
package never imports torch or an HTTP client.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from grebench.cluster import RAY_INSTALL
from grebench.progress import NoProgress, Progress
from grebench.registry import Entry, PartId, Registry
from grebench.scoring.estimators._base import Estimator

if TYPE_CHECKING:
    from grebench.scoring.estimators._ray import RayPool
    from grebench.settings import Settings

#: Where an in-process estimator runs (the ``executor`` setting): in this process, or on Ray actors.
EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class EstimatorContext:
    """What a factory may use: the settings, the corpus of human judgment texts per paper, a progress display."""

    settings: Settings
    corpus: Mapping[str, Sequence[str]] | None = None
    progress: Progress = field(default_factory=NoProgress)


EstimatorFactory = Callable[[str, EstimatorContext], Estimator]



@dataclass(frozen=True)
class EstimatorInfo:
    """The facts about a kind of estimator that the rest of the product reads (registration meta, with defaults).

    ``proxy``: a fast stand-in for a language model, labelled so on every board, plan and report.
    ``local_model``: runs a language model in this process (a device and a dtype; ``papers = auto`` samples on a
    CPU; the plan's expected time comes from its measured seconds per request).
    ``catalogue_arg``: its ARG names a built-in model (``grebench models list``) or a checkpoint directory, checked
    before a run starts.  ``needs_corpus``: fitted on the human judgment lines (gem-raw needs its own instance).
    ``check_arg``: validates a spec's ARG before any work (the setup check calls it), raising ``ValueError(reason)``
    for one the kind cannot use (``offline:foo``, ``vllm:`` without a URL); None: any ARG passes the check.
    ``label``: the words for one of its ids (``hf:smollm2-135m@…:dtype=bfloat16`` → ``SmolLM2-135M-Instruct (hf,
    bfloat16)``); None: the kind's name and the shortened id.
    ``local_servers``: starts model servers on this machine (loopback ports from ``local_server_port``, one per
    ``vllm_servers`` server), checked before a job starts.
    ``tolerance``: the largest difference (nats) between a stored score and the same pair scored again by an
    estimator with the same id, elsewhere (what ``grebench snapshot rebuild`` allows); None: :data:`TOLERANCE`.
    ``in_process``: computes its answers in the process that built it (no server to call): ``executor = ray`` runs
    it on Ray actors, each building its own from the same spec (a server estimator already spreads its requests
    over its servers through the dispatcher, from this process).
    """

    name: str
    proxy: bool = False
    local_model: bool = False
    catalogue_arg: bool = False
    needs_corpus: bool = False
    check_arg: Callable[[str], None] | None = None
    label: Callable[[str], str] | None = None
    tolerance: Callable[[str], float] | None = None
    local_servers: bool = False
    in_process: bool = False

    def tolerance_for(self, estimator_id: str) -> float:
        """What this kind promises for a score of ``estimator_id`` scored again (see ``tolerance``)."""
        return TOLERANCE if self.tolerance is None else self.tolerance(estimator_id)

    def describe(self, estimator_id: str) -> str:
        """The words for an id of this kind (a readable model name; the exact id stays beside it on the pages)."""
        if self.label is not None:
            return self.label(estimator_id)
        text = PartId.parse(estimator_id).spec
        return f"estimator {text if len(text) <= 48 else text[:47] + '…'}"


#: Registered estimators; an entry's facts are an :class:`EstimatorInfo` (what the product knows about the kind
#: without building one; an unknown keyword is refused at registration).
ESTIMATORS: Registry[EstimatorFactory] = Registry("estimator", builtins=(
    "grebench.scoring.estimators._offline", "grebench.scoring.estimators._hf", "grebench.scoring.estimators._server"),
    facts=EstimatorInfo)



def estimator_entry(spec: str) -> Entry[EstimatorFactory]:
    """The registry entry of an estimator spec (its metadata without building it)."""
    return ESTIMATORS.resolve(spec)[0]


def estimator_info(spec_or_id: str) -> EstimatorInfo:
    """What the registry says about the kind of an estimator spec or stored id (``KIND[:...]``); a kind that is not
    registered (a removed plugin's stored id; a mistyped spec, which the setup check refuses) gets default facts."""
    name = Registry.split(spec_or_id)[0]
    return ESTIMATORS.get(name).facts(EstimatorInfo) if name in ESTIMATORS else EstimatorInfo(name)


def estimator_label(estimator_id: str) -> str:
    """The words for a stored estimator id; an id of a kind no longer registered comes back shortened."""
    return estimator_info(estimator_id).describe(estimator_id)


#: The promise of a kind that makes none: a score scored again agrees to this many nats.
TOLERANCE = 1e-6
#: A low-precision model (bfloat16, float16) scored again on another device or batch drifts (docs/estimators.md).
LOW_PRECISION_TOLERANCE = 0.05


def dtype_tolerance(estimator_id: str) -> float:
    """The tolerance of a model id by its dtype: float32 (or none named) agrees to 1e-4, a lower precision to
    :data:`LOW_PRECISION_TOLERANCE`."""
    dtype = PartId.parse(estimator_id).option("dtype")
    return LOW_PRECISION_TOLERANCE if dtype and dtype != "float32" else 1e-4


def served_model_label(server: str) -> Callable[[str], str]:
    """A label function for ids ``KIND:MODEL@sha[:key=value...]``: ``<model name> (<server>[, dtype])``."""

    def label(estimator_id: str) -> str:
        from grebench.models import model_title

        part = PartId.parse(estimator_id)
        if not (part.model and part.version):
            return EstimatorInfo(server).describe(estimator_id)
        dtype = part.option("dtype")
        # an id from before the target rule (docs/estimators.md, "Which tokens count") scored every target token
        legacy = "" if part.option("target") is not None else ", every token scored"
        return f"{model_title(part.model)} ({server}{', ' + dtype if dtype else ''}{legacy})"

    return label


def resolve_estimator(spec: str, settings: Settings, corpus: Mapping[str, Sequence[str]] | None = None,
                      progress: Progress | None = None) -> Estimator:
    """Build the estimator named by ``spec`` (``NAME[:ARG]``); ``corpus`` is needed by corpus-fitted ones.  A
    one-off :class:`EstimatorHandle`: the caller closes what it gets."""
    return EstimatorHandle(spec, settings).get(corpus, progress)


class EstimatorHandle:
    """One estimator of a job, decided once (issue 49): the run holds it, and every stage that scores takes the
    estimator from it instead of building one from a spec.

    The spec is parsed and its registration looked up on first use (an unknown kind fails there, as
    :func:`resolve_estimator` would); the estimator itself is built on first use for each corpus it is fitted on
    (one instance for a kind that fits none), and every later request of the stage gets the same instance: the
    score stage's raw and preprocessed texts, the gem judge's exam texts of every venue-year.  The runner calls
    :meth:`close` after each stage, which closes what was built: a model in this process, the servers it started
    (``local_model``, ``local_servers``), a fitted word model, so that the next stage's models (the local judges'
    server) load beside nothing of this one's (issue 47: the job's peak memory); a later stage that scores builds
    it again from the same decided spec.  ``builds`` counts the instances made.

    ``executor``: ``local`` builds the estimator in this process; ``ray`` gives an ``in_process`` kind (hf, offline)
    as a :class:`~grebench.scoring.estimators._ray.RayEstimator`, whose actors each build their own through a
    local handle of the same spec and settings, so the numbers are the same (one pool of actors per handle, shared
    by every corpus it is fitted on).  A server kind is built here either way: it already streams its requests to
    its servers.  The job decides (:func:`grebench.pipeline.resolve_run` hands in the ``executor`` setting); a
    handle made for one check (the copy check's, a snapshot rebuild's) stays local."""

    def __init__(self, spec: str, settings: Settings, executor: str = "local") -> None:
        self.spec = spec
        self._settings = settings
        self.executor = executor.strip().lower()
        if self.executor not in EXECUTORS:
            raise ValueError(f"unknown executor {self.executor!r}: choose from {', '.join(EXECUTORS)}")
        self._built: dict[str, Estimator] = {}
        self._entry: tuple[Entry[EstimatorFactory], str] | None = None
        self._pool: RayPool | None = None
        self.builds = 0

    def __repr__(self) -> str:
        return f"EstimatorHandle({self.spec!r}, built={len(self._built)}, executor={self.executor!r})"

    @property
    def info(self) -> EstimatorInfo:
        """The kind's registered facts."""
        return self._resolved()[0].facts(EstimatorInfo)

    def _resolved(self) -> tuple[Entry[EstimatorFactory], str]:
        if self._entry is None:
            self._entry = ESTIMATORS.resolve(self.spec)
        return self._entry

    def get(self, corpus: Mapping[str, Sequence[str]] | None = None, progress: Progress | None = None) -> Estimator:
        """The job's estimator fitted on ``corpus`` (ignored by a kind that fits none): built now, or the one built
        earlier in the job on the same corpus."""
        entry, arg = self._resolved()
        info = entry.facts(EstimatorInfo)
        if info.needs_corpus and corpus is None:
            raise ValueError(f"the {entry.name} estimator needs the corpus of human-review judgment lines")
        key = _corpus_key(corpus) if info.needs_corpus else ""
        made = self._built.get(key)
        if made is None:
            if self.executor == "ray" and info.in_process:
                from grebench.scoring.estimators._ray import EstimatorPart, RayEstimator, RayPool

                if self._pool is None:
                    self._pool = RayPool(EstimatorPart(self.spec, EstimatorContext(self._settings)), progress)
                try:
                    made = RayEstimator(self._pool, corpus if info.needs_corpus else None, progress)
                except BaseException:  # actors that could not build (or a stop): nothing is left running
                    if not self._built:
                        self._pool.close()
                        self._pool = None
                    raise
            else:
                made = entry.obj(arg, EstimatorContext(self._settings, corpus, progress or NoProgress()))
            self._built[key] = made
            self.builds += 1
        return made

    @property
    def ray_pool(self) -> RayPool | None:
        """The Ray actors of ``executor = ray`` while they run (None: none started, or closed)."""
        return self._pool

    def close(self) -> None:
        """Close every instance built (after each stage: see the class docstring), and the Ray actors they ran on."""
        built, self._built = list({id(e): e for e in self._built.values()}.values()), {}
        pool, self._pool = self._pool, None
        try:
            for made in built:
                close_estimator(made)
        finally:
            if pool is not None:
                pool.close()


def _corpus_key(corpus: Mapping[str, Sequence[str]] | None) -> str:
    import hashlib
    import json

    if corpus is None:
        return ""
    text = json.dumps({k: list(v) for k, v in sorted(corpus.items())}, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def close_estimator(estimator: Estimator) -> None:
    """Release what an estimator holds: the local servers a ``vllm-local`` estimator started and its HTTP client (an
    estimator without a ``close`` method holds nothing to release)."""
    close = getattr(estimator, "close", None)
    if callable(close):
        close()


__all__ = ["ESTIMATORS", "EXECUTORS", "LOW_PRECISION_TOLERANCE", "RAY_INSTALL", "TOLERANCE", "Estimator",
           "EstimatorContext", "EstimatorFactory", "EstimatorHandle", "EstimatorInfo", "close_estimator",
           "dtype_tolerance", "estimator_entry", "estimator_info", "estimator_label", "resolve_estimator",
           "served_model_label"]

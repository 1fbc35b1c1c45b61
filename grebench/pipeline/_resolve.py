"""Decide once, pass it down: what a job works with, resolved in one place (issue 32).

:func:`resolve_setup` reads the options over the settings (the only place where ``option or setting`` is written):
the estimator and preprocessor specs a scoring job uses, the metrics, the proxy, the size of the paper sample and
why, the panel's judges.  It needs no store, so the plan lines of ``run`` and ``serve`` read it before any work.

:func:`resolve_run` adds what the store decides, once per job, just before the first stage that reads it (after
``ingest`` in the main job, whose papers the sample is drawn from):

* a job that generates for or scores the sample (its stages say so: :meth:`Stage.draws_sample`) uses the specs as
  set and draws the seeded sample afresh, recording it in ``paper_samples``;
* a job that only reads the stored scores (``validate``, ``exam``, ``judge``) uses what they were made with: the
  named estimator/preprocessor (a spec or an id), else the last scored setup, else the settings'; and the sample
  the scores were made on (``paper_samples``).

The result is one frozen :class:`ResolvedRun` on the stage context.  Stages read it and never re-resolve, and no
stage replaces it: the score stage records the setup it scored with in the store (``scored_setups``), and the
stages after it read that through :meth:`ResolvedRun.scored_setup`, exactly as a job that only reads does.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from grebench.pipeline._runner import RunOptions
from grebench.pipeline._sample import Sample, draw_sample, measured_throughput, papers_size, recorded_sample
from grebench.progress import Progress
from grebench.scoring import EstimatorHandle, ScoredSetup
from grebench.settings import RunSettings, Settings
from grebench.store import ReviewRecord, Store, utcnow


@dataclass(frozen=True)
class RunSetup:
    """What the options and the settings decide, before the store is read."""

    estimator: str                  # the spec a scoring job uses
    preprocessor: str
    proxy: str                      # the fast proxy estimator ("" when none)
    metrics: tuple[str, ...]
    papers: int | None              # sample size; None: every eligible paper
    papers_why: str
    seed: int
    judges: tuple[str, ...]         # the panel's judges by name; empty: every judge
    exam_only: bool
    named_estimator: str | None     # what the user named (a reader matches it to a scored spec or id)
    named_preprocessor: str | None
    local_candidates: tuple[str, ...]
    local_judges: tuple[str, ...]
    validation: str = "full"        # core | full: what the job checks besides the headline board
    validation_why: str = "as set"
    controls: tuple[str, ...] = ()  # the controls the job writes and scores (core: the core set; full: every default)
    #: (tokens per second, dtype) the evaluation LM was measured at on this machine (sized the sample; the plan's
    #: expected time); None: nothing measured here, or no local model
    throughput: tuple[float, str] | None = None
    metrics_named: bool = False     # the user named the metrics (``--metric``): kept as named
    #: why the checks switched to GEM (the sample's papers have no abstracts: :func:`without_abstracts`); "" when not
    abstracts: str = ""

    @property
    def core(self) -> bool:
        """Whether the job checks only the core set (GEM-S, the core controls) rather than the full validation."""
        return self.validation == "core"


def chosen(settings: Settings, options: RunOptions) -> tuple[str, str, str, tuple[str, ...]]:
    """(estimator spec, preprocessor spec, papers, metrics) of a job: each option that is set wins over its setting
    (the metrics over the registry's defaults).  The one place this is written; the setup check reads it too."""
    from grebench.scoring import default_metrics

    papers = options.papers if options.papers is not None else settings.run.papers
    return (options.estimator or settings.scoring.estimator, options.preprocessor or settings.scoring.preprocessor,
            str(papers),
            options.metrics or default_metrics())


def chosen_models(settings: Settings) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """(proxy estimator spec or "", local candidates, local judges) of a job: the language models it runs besides the
    chosen estimator, from the settings (no option overrides them).  Like :func:`chosen`, the one place they are
    read; the setup check and the sample's sizing read them here too."""
    return (settings.scoring.proxy_estimator.strip(), tuple(settings.listed("local_candidates")),
            tuple(settings.listed("local_judges")))


def validation_set(run: RunSettings, options: RunOptions, papers: str, size: int | None) -> tuple[str, str]:
    """(core | full, why) of a job: the option over the setting; ``auto`` is core where ``papers = auto`` sized a
    sample for a CPU (a finite size), and full on a GPU, with every paper or a size as set."""
    chosen_value = (options.validation or run.validation).strip().lower()
    if chosen_value in ("core", "full"):
        return chosen_value, "as set"
    if papers.strip().lower() == "auto" and size is not None:
        return "core", "auto: a CPU run sized to about 15 minutes checks the headline and the core controls"
    return "full", "auto: a GPU, every paper or a sample size as set: every control and both metrics"


def resolve_setup(settings: Settings, options: RunOptions, progress: Progress | None = None) -> RunSetup:
    """The setup of a job with these options (checked first by :func:`grebench.pipeline.check_setup`): the chosen
    specs, the sample's size (``papers = auto`` measures this machine once, here, shown on ``progress``) and what
    the job validates (:func:`validation_set`: the core set scores GEM-S only, unless metrics are named)."""
    from grebench.bench import core_controls, default_controls
    from grebench.scoring import headline_metric

    estimator, preprocessor, papers, metrics = chosen(settings, options)
    proxy, local_candidates, local_judges = chosen_models(settings)
    full = (options.validation or settings.run.validation).strip().lower() == "full"
    size, why = papers_size(papers, settings, estimator, calibrate=options.calibrate,
                            progress=progress, core=not full)
    validation, validation_why = validation_set(settings.run, options, papers, size)
    if validation == "core" and not options.metrics:
        metrics = (headline_metric(),)
    return RunSetup(
        estimator=estimator, preprocessor=preprocessor, proxy=proxy, metrics=metrics,
        papers=size,
        papers_why=why, seed=settings.seed, judges=options.judges, exam_only=options.exam_only,
        named_estimator=options.estimator, named_preprocessor=options.preprocessor,
        local_candidates=local_candidates, local_judges=local_judges, validation=validation,
        validation_why=validation_why,
        controls=tuple(core_controls() if validation == "core"
                       else default_controls(llm=bool(settings.bench.control_model))),
        throughput=measured_throughput(settings, estimator), metrics_named=bool(options.metrics))


@dataclass(frozen=True)
class ResolvedRun:
    """Everything a job works with, decided once: read by every stage, the CLI's plan lines and the panel."""

    setup: RunSetup
    estimator: str                  # the estimator spec in force
    preprocessor: str               # the preprocessor spec in force
    whence: str                     # why these specs: as named, the scored setup, the setting
    #: what the stored scores of these specs were made with when the run was resolved (None: nothing yet); a job
    #: that scores records its own during the job: read :meth:`scored_setup`
    scored: ScoredSetup | None
    sample: Sample
    proxy: ScoredSetup | None = None  # the fast proxy's beside them, when resolved (:meth:`proxy_setup`)
    draws: bool = False             # the job generates for and scores the sample (its scored setup may change)
    #: the job's estimator of ``estimator`` and fast proxy's of ``setup.proxy``, built on first use and shared by
    #: every stage that scores (the score stage, the gem judge's exam texts); closed by the runner after each stage
    #: (:meth:`close`)
    estimator_handle: EstimatorHandle | None = field(default=None, compare=False, repr=False)
    proxy_handle: EstimatorHandle | None = field(default=None, compare=False, repr=False)

    @property
    def metrics(self) -> tuple[str, ...]:
        """The metrics in force."""
        return self.setup.metrics

    @property
    def paper_ids(self) -> tuple[str, ...] | None:
        """The sampled papers (None: every eligible paper)."""
        return self.sample.paper_ids

    @property
    def id(self) -> str:
        """A stable id: the same setup, specs and sample give the same id on every machine and every rerun."""
        facts = {"setup": asdict(self.setup), "estimator": self.estimator, "preprocessor": self.preprocessor,
                 "sample": list(self.sample.paper_ids) if self.sample.paper_ids is not None else None}
        return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:12]

    def close(self) -> None:
        """After each stage (the runner): close what the run's estimators built (a model in this process, servers
        they started); a later stage that scores builds it again."""
        for handle in (self.estimator_handle, self.proxy_handle):
            if handle is not None:
                handle.close()

    def scored_setup(self, store: Store) -> ScoredSetup | None:
        """What the stored scores of this run's specs were made with, now: a job that scores reads what its score
        stage recorded (the latest scoring of these specs); a job that only reads, the setup it resolved (a named
        id stays that id)."""
        if not self.draws:
            return self.scored
        return scored_setups(store, self.estimator, self.preprocessor)

    def proxy_setup(self, store: Store) -> ScoredSetup | None:
        """The fast proxy's scored setup beside :meth:`scored_setup`, read the same way (None: no proxy)."""
        if not self.draws:
            return self.proxy
        return _proxy(store, self.setup, self.preprocessor)

    def as_json(self, store: Store | None = None) -> dict[str, Any]:
        """What the run resolved (stored with the run's summary); with ``store``, the scored setups as they are now
        (a job that scored: what it scored with)."""
        scored = self.scored if store is None else self.scored_setup(store)
        proxy = self.proxy if store is None else self.proxy_setup(store)
        return {"id": self.id, "estimator": self.estimator, "preprocessor": self.preprocessor,
                "whence": self.whence, "metrics": list(self.metrics),
                "scored": None if scored is None else scored.as_json(),
                "proxy": None if proxy is None else proxy.as_json(),
                "sample": self.sample.description, "papers": self.sample.size,
                "validation": self.setup.validation, "controls": list(self.setup.controls),
                **({"abstracts": self.setup.abstracts} if self.setup.abstracts else {})}


def scored_setups(store: Store, estimator: str | None = None, preprocessor: str | None = None) -> ScoredSetup | None:
    """The latest scored setup whose estimator spec or id equals ``estimator`` and whose preprocessor spec or id
    equals ``preprocessor``; with no estimator named, the latest main one (not a fast proxy scored beside it).
    None when no scoring matches."""
    row = store.con.execute(
        """SELECT estimator_spec, preprocessor_spec, estimator_id, preprocessor_id FROM scored_setups
           WHERE (CASE WHEN $e IS NULL THEN role = 'main' ELSE $e IN (estimator_spec, estimator_id) END)
             AND ($p IS NULL OR $p IN (preprocessor_spec, preprocessor_id))
           ORDER BY scored_at DESC, estimator_id, preprocessor_id LIMIT 1""",
        {"e": estimator, "p": preprocessor}).fetchone()
    return None if row is None else ScoredSetup(*row)


def record_scored(store: Store, scored: ScoredSetup, run_id: str, role: str = "main") -> None:
    """Record that ``run_id`` scored with this setup (``role``: main, or proxy for the fast proxy beside it), and
    with which code (:func:`grebench.scoring.code_version`: provenance shows it)."""
    from grebench.scoring import code_version

    store.con.execute("INSERT OR REPLACE INTO scored_setups (estimator_spec, preprocessor_spec, estimator_id, "
                      "preprocessor_id, role, run_id, scored_at, code_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                      [scored.estimator_spec, scored.preprocessor_spec, scored.estimator_id, scored.preprocessor_id,
                       role, run_id, utcnow(), json.dumps(code_version(), sort_keys=True)])


def resolve_run(store: Store, settings: Settings, setup: RunSetup, *, draws: bool) -> ResolvedRun:
    """The run of a job: see the module docstring.  ``draws``: the job generates for or scores the sample.  Its
    estimator runs where the ``executor`` setting says (``--executor``: this process, or Ray actors); the fast
    proxy always in this process: it scores the sample in seconds, and a second pool of actors, alive beside the
    estimator's during the score stage, would wait for CPUs that the estimator's actors hold."""
    executor = settings.run.executor
    proxy_handle = EstimatorHandle(setup.proxy, settings) if setup.proxy else None
    if draws:
        estimator, preprocessor = setup.estimator, setup.preprocessor
        whence = "as named" if setup.named_estimator else "the setting"
        sample = draw_sample(store, setup.papers, setup.seed, setup.papers_why)
        setup = without_abstracts(store, setup, sample, llm_controls=bool(settings.bench.control_model))
        return ResolvedRun(setup, estimator, preprocessor, whence, scored_setups(store, estimator, preprocessor),
                           sample, _proxy(store, setup, preprocessor), True,
                           EstimatorHandle(estimator, settings, executor), proxy_handle)
    scored = scored_setups(store, setup.named_estimator, setup.named_preprocessor)
    if setup.named_estimator:
        whence = "as named"
    elif scored is not None:
        whence = "the setup this store was scored with"
    else:
        whence = "the setting: nothing scored yet"
    # a named id (validate --estimator offline:wb-bigram…) stands for the spec it was scored from
    estimator = scored.estimator_spec if scored else setup.named_estimator or setup.estimator
    preprocessor = scored.preprocessor_spec if scored else setup.named_preprocessor or setup.preprocessor
    return ResolvedRun(setup, estimator, preprocessor, whence, scored, recorded_sample(store),
                       _proxy(store, setup, preprocessor), False,
                       EstimatorHandle(estimator, settings, executor), proxy_handle)


def abstract_counts(store: Store, sample: Sample) -> tuple[int, int]:
    """(papers, papers with an abstract) of the sample (every eligible paper when it holds them all)."""
    from grebench.bench import MIN_REVIEWS

    where = "p.paper_id IN (SELECT unnest(?::VARCHAR[]))" if sample.paper_ids is not None else f"""
        (SELECT count(DISTINCT r.review_id) FROM reviews r WHERE r.paper_id = p.paper_id
           AND r.kind = '{ReviewRecord.OFFICIAL}') >= ?"""
    row = store.con.execute(f"""SELECT count(*), count(*) FILTER (WHERE coalesce(trim(p.abstract), '') <> '')
                                FROM papers p WHERE {where}""",
                            [list(sample.paper_ids) if sample.paper_ids is not None else MIN_REVIEWS]).fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def without_abstracts(store: Store, setup: RunSetup, sample: Sample, llm_controls: bool = False) -> RunSetup:
    """The setup for the sample's papers: when none has an abstract (an archive of reviews only, shaped like the
    GEM authors' ICLR 2023 release), a metric conditioned on the abstract (GEM-S) would score nothing, so the
    checks switch to GEM, the authors' setting, with its core controls (the full validation: every control that
    needs no abstract); ``abstracts`` says so for the plan.  Metrics the user named are kept (a run that then scores
    nothing fails, saying why: the score stage)."""
    from grebench.bench import core_controls, default_controls
    from grebench.scoring import abstract_free_metric, metric

    needing = [m for m in setup.metrics if metric(m).needs_abstract]
    if not needing or setup.metrics_named:
        return setup
    papers, with_abstract = abstract_counts(store, sample)
    if not papers or with_abstract:
        return setup
    gem = abstract_free_metric()
    metrics = tuple(dict.fromkeys(gem if m in needing else m for m in setup.metrics))
    controls = tuple(core_controls(abstracts=False) if setup.core
                     else default_controls(llm=llm_controls, abstracts=False))
    which = f"its core controls ({len(controls)}: {', '.join(controls)})" if setup.core else \
        f"every control that needs no abstract ({len(controls)})"
    note = (f"none of the {papers} papers has an abstract, so GEM-S (conditioned on the abstract) cannot score "
            f"them: the checks switch to {' and '.join(m.upper() for m in metrics)}, the GEM authors' setting, "
            f"with {which}")
    return replace(setup, metrics=metrics, controls=controls, abstracts=note)


def _proxy(store: Store, setup: RunSetup, preprocessor: str) -> ScoredSetup | None:
    """The fast proxy's scored setup beside the main estimator's (same preprocessor), when one is set."""
    return scored_setups(store, setup.proxy, preprocessor) if setup.proxy else None

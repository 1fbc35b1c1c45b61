"""The metrics, registered by name in :data:`METRICS`: what a score's PMI is conditioned on, and how it is shown.

Every metric is the PMI between a candidate review and a held-out human review, estimated by the evaluation LM; a
metric says what both are conditioned on (nothing for GEM, the abstract for GEM-S, the paper's claimed strengths and
weaknesses for GEM-S ASSW) through its ``synopses`` function, and whether it scores the reviews' judgment lines or
their raw text.  A new metric is one registration (a plugin may add one)::

    METRICS.add("gem-s-title", Metric("gem-s-title", "GEM-S (title)", "the paper's title", title_synopses))
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from grebench.registry import Registry
from grebench.store import Store

if TYPE_CHECKING:
    from grebench.settings import Settings


@dataclass(frozen=True)
class SynopsisInputs:
    """What a metric's ``synopses`` function may use: the store, the settings, the papers to score and their
    abstracts, and ``skip(what, reason, n)`` to count papers left out (``what = "metric"``: the whole metric)."""

    store: Store
    settings: Settings
    papers: list[str]
    abstracts: Mapping[str, str | None]
    skip: Callable[[str, str, int], None]


#: A metric's synopsis per paper (None: nothing is conditioned on), or None when the metric cannot be scored.
Synopses = Callable[[SynopsisInputs], "dict[str, str | None] | None"]


@dataclass(frozen=True)
class Metric:
    """One metric.  ``raw``: scores the reviews' raw text (stored with preprocessor ``none``) instead of their
    judgment lines.  ``default``: scored unless the user chooses.  ``headline``: the metric boards, the CLI and the
    validation's per-paper effect size lead with (one metric has it)."""

    name: str
    label: str
    conditions_on: str
    synopses: Synopses
    raw: bool = False
    default: bool = False
    headline: bool = False
    #: conditions on the paper's abstract: a paper without one gets no score of it (a run whose papers have none
    #: scores GEM instead, unless metrics are named: :func:`grebench.pipeline.resolve_run`)
    needs_abstract: bool = False


#: Every metric (built-in ones first, then plugins').
METRICS: Registry[Metric] = Registry("metric", builtins=("grebench.scoring._metrics",))
#: Stored preprocessor id of the scores of a ``raw`` metric.
RAW_PREPROCESSOR = "none"


def _nothing(inputs: SynopsisInputs) -> dict[str, str | None]:
    return dict.fromkeys(inputs.papers)


def _with_abstract(inputs: SynopsisInputs) -> dict[str, str]:
    with_abstract = {p: a for p in inputs.papers if (a := (inputs.abstracts.get(p) or "").strip())}
    if len(with_abstract) < len(inputs.papers):
        inputs.skip("papers", "paper has no abstract (GEM only)", len(inputs.papers) - len(with_abstract))
    return with_abstract


def _abstract(inputs: SynopsisInputs) -> dict[str, str | None]:
    return dict(_with_abstract(inputs))


def _assw(inputs: SynopsisInputs) -> dict[str, str | None] | None:
    from grebench.scoring._synopsis import assw_synopses

    synopses, skipped = assw_synopses(inputs.store, inputs.settings, _with_abstract(inputs))
    configured = bool(inputs.settings.scoring.assw_model)
    for reason, n in Counter(skipped.values()).items():
        inputs.skip("papers" if configured else "metric", reason, n if configured else 1)
    return dict(synopses) if synopses else None


for _metric in (
    Metric("gem", "GEM", "nothing", _nothing, default=True),
    Metric("gem-s", "GEM-S (abstract)", "the abstract", _abstract, default=True, headline=True, needs_abstract=True),
    Metric("gem-s-assw", "GEM-S (claimed strengths & weaknesses)", "an LLM summary of the strengths and weaknesses "
           "the paper claims", _assw, needs_abstract=True),
    Metric("gem-raw", "GEM (raw review text)", "nothing; raw review text, not judgment lines", _nothing, raw=True),
):
    METRICS.add(_metric.name, _metric, summary=_metric.label)


def metric(name: str) -> Metric:
    """The metric called ``name`` (:class:`~grebench.registry.UnknownPart` names the known ones)."""
    return METRICS.get(name).obj


def default_metrics() -> tuple[str, ...]:
    """The metrics scored unless the user chooses."""
    return tuple(e.name for e in METRICS if e.obj.default)


def headline_metric() -> str:
    """The metric boards and the CLI lead with."""
    return next(e.name for e in METRICS if e.obj.headline)


def abstract_free_metric() -> str:
    """The metric a run scores instead of those that need an abstract when its papers have none: the first default
    metric that scores judgment lines and conditions on no abstract (GEM, the GEM authors' setting)."""
    return next(e.name for e in METRICS if e.obj.default and not e.obj.raw and not e.obj.needs_abstract)


def metric_preprocessor(name: str, preprocessor: str) -> str:
    """The preprocessor id a metric's scores are stored under (``none`` for a raw metric; a metric no longer
    registered keeps the one given)."""
    return RAW_PREPROCESSOR if name in METRICS and metric(name).raw else preprocessor

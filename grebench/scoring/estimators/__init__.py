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

from grebench.progress import NoProgress, Progress
from grebench.registry import Entry, Registry
from grebench.scoring.estimators._base import Estimator

if TYPE_CHECKING:
    from grebench.settings import Settings


@dataclass(frozen=True)
class EstimatorContext:
    """What a factory may use: the settings, the corpus of human judgment texts per paper, a progress display."""

    settings: Settings
    corpus: Mapping[str, Sequence[str]] | None = None
    progress: Progress = field(default_factory=NoProgress)


EstimatorFactory = Callable[[str, EstimatorContext], Estimator]

#: Registered estimators.  Entry meta: ``needs_corpus`` (fitted on the human judgment lines, so gem-raw needs its
#: own instance), ``proxy`` (a fast stand-in for a language model: labelled as such everywhere).
ESTIMATORS: Registry[EstimatorFactory] = Registry("estimator", builtins=(
    "grebench.scoring.estimators._offline", "grebench.scoring.estimators._hf", "grebench.scoring.estimators._server"))


def estimator_entry(spec: str) -> Entry[EstimatorFactory]:
    """The registry entry of an estimator spec (its metadata without building it)."""
    return ESTIMATORS.resolve(spec)[0]


def resolve_estimator(spec: str, settings: Settings, corpus: Mapping[str, Sequence[str]] | None = None,
                      progress: Progress | None = None) -> Estimator:
    """Build the estimator named by ``spec`` (``NAME[:ARG]``); ``corpus`` is needed by corpus-fitted ones."""
    entry, arg = ESTIMATORS.resolve(spec)
    if entry.meta.get("needs_corpus") and corpus is None:
        raise ValueError(f"the {entry.name} estimator needs the corpus of human-review judgment lines")
    return entry.obj(arg, EstimatorContext(settings, corpus, progress or NoProgress()))


__all__ = ["ESTIMATORS", "Estimator", "EstimatorContext", "EstimatorFactory", "estimator_entry", "resolve_estimator"]

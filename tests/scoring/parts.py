"""Scoring with built parts, as a job does (issue 61): scoring builds no estimator and no preprocessor, so a test
builds them here from specs (the one builder of each: ``EstimatorHandle`` and ``resolve_preprocessor``), hands them
in and closes the handle after, as the pipeline's resolved run does."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from grebench.scoring import EstimatorHandle, Preprocessor, ScoredSetup, resolve_preprocessor, run_scoring, score_texts
from grebench.scoring._texts import TextScores
from grebench.settings import Settings
from grebench.store import Store


@contextmanager
def parts(store: Store, settings: Settings, estimator_spec: str,
          preprocessor_spec: str) -> Iterator[tuple[EstimatorHandle, Preprocessor]]:
    """The estimator handle and the preprocessor of the specs, the handle closed on the way out."""
    handle = EstimatorHandle(estimator_spec, settings)
    try:
        yield handle, resolve_preprocessor(preprocessor_spec, settings, store)
    finally:
        handle.close()


def score(store: Store, settings: Settings, run_id: str | None, metrics: Sequence[str] = (),
          estimator_spec: str = "offline", preprocessor_spec: str = "rules", **kwargs: Any) -> dict[str, Any]:
    """:func:`run_scoring` with the parts of the specs (a fake ``estimator=`` among ``kwargs`` replaces the
    estimator handle, as in the engine: no handle is built then)."""
    if kwargs.get("estimator") is not None:
        return run_scoring(store, settings, run_id, metrics, handle=None,
                           preprocessor=resolve_preprocessor(preprocessor_spec, settings, store), **kwargs)
    with parts(store, settings, estimator_spec, preprocessor_spec) as (handle, preprocessor):
        return run_scoring(store, settings, run_id, metrics, handle=handle, preprocessor=preprocessor, **kwargs)


def score_setup_texts(store: Store, settings: Settings, setup: ScoredSetup, metric_name: str,
                      items: Iterable[tuple[str, str]], **kwargs: Any) -> TextScores:
    """:func:`score_texts` with the parts of ``setup``'s specs."""
    with parts(store, settings, setup.estimator_spec, setup.preprocessor_spec) as (handle, preprocessor):
        return score_texts(store, settings, setup, metric_name, items, handle=handle, preprocessor=preprocessor,
                           **kwargs)

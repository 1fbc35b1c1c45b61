"""The estimator protocol: one method that turns GEM log-prob requests into summed log-probabilities."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from grebench.scoring._request import LogprobRequest, LogprobResult


@runtime_checkable
class Estimator(Protocol):
    """An evaluation-LM.  ``id`` names every parameter that changes numbers, so cached values never mix models."""

    id: str

    def logprobs(self, requests: Sequence[LogprobRequest]) -> list[LogprobResult]:
        """Summed log-probabilities of each request's target, in request order."""
        ...

"""The setup a set of stored scores was made with, as one typed value (issue 32).

The score stage builds the estimator and the preprocessor from their specs; the ids they produced (a spec names a
model, an id also names its weights, dtype and options) are what the scores are stored under.  A :class:`ScoredSetup`
keeps both, so readers (validation, the judge panel, the CLI's plan line) never match a spec to an id themselves.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ScoredSetup:
    """Estimator and preprocessor: the specs a user writes and the ids the stored scores carry."""

    estimator_spec: str
    preprocessor_spec: str
    estimator_id: str
    preprocessor_id: str

    def as_json(self) -> dict[str, str]:
        """The four fields (stored with summaries)."""
        return {"estimator_spec": self.estimator_spec, "preprocessor_spec": self.preprocessor_spec,
                "estimator": self.estimator_id, "preprocessor": self.preprocessor_id}

"""What produced a snapshot's or a site's numbers, as records (:func:`grebench.scoring.provenance` fills them; the
store holds their shape because a snapshot's manifest carries one)."""

from __future__ import annotations

from typing import NotRequired, TypedDict

#: A decoding parameter as provenance shows it (a nested one as its JSON text).
DecodingValue = str | int | float | bool | None


class CodeVersion(TypedDict):
    """The code that scored (:func:`code_version`)."""

    package_version: str
    git_commit: str | None
    scoring_sha256: str


class EstimatorFacts(TypedDict):
    """An estimator id in parts (:func:`estimator_facts`); an id of another shape has only ``id`` and ``kind``."""

    id: str
    kind: str
    model: NotRequired[str]
    weights_sha8: NotRequired[str]
    dtype: NotRequired[str | None]
    options: NotRequired[dict[str, str]]


class EstimatorProvenance(EstimatorFacts):
    """A board's evaluation LM: its id in parts, its spec and the code it was scored with (None: not recorded)."""

    spec: str | None
    scored_with_code: CodeVersion | None


class PreprocessorProvenance(TypedDict):
    spec: str | None
    version: str


class MetricProvenance(TypedDict):
    label: str
    conditions_on: str
    raw: bool
    prompt_version: str


class CandidateProvenance(TypedDict):
    """A candidate's model, endpoint (no secret), decoding settings and prompt versions."""

    kind: str
    model: str | None
    api_base: str | None
    api_key_env: str | None
    decoding: dict[str, DecodingValue]
    prompt_versions: list[str]


class PanelMember(TypedDict):
    """A judge's exam on a venue, with its kind and model."""

    kind: str | None
    model: str | None
    judge: str
    p_c: float | None
    p_p: float | None
    p_s: float | None
    passed: bool
    weight: float


class SampleProvenance(TypedDict):
    seed: int | None
    papers: int
    eligible: int | None
    description: str | None


class Aggregation(TypedDict):
    version: str
    bootstrap_samples: int
    seed: int


class VenueProvenance(TypedDict):
    sample: SampleProvenance | None
    aggregation: Aggregation | None
    panel: list[PanelMember] | None


class Provenance(TypedDict):
    """What produced the published numbers (:func:`provenance`)."""

    code: CodeVersion
    estimators: dict[str, EstimatorProvenance]
    preprocessors: dict[str, PreprocessorProvenance]
    metrics: dict[str, MetricProvenance]
    prompts: dict[str, str]
    candidates: dict[str, CandidateProvenance]
    venues: dict[str, VenueProvenance]
    rebuild: str

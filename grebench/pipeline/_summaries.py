"""What each stage returns, as typed contracts (issues 32 and 49).

A stage returns its summary as a JSON object (a dict): the runner stores it with the run and in ``stage_state``, and
``--json`` prints it, so what is stored and printed is exactly what the stage built.  The commands do not read that
dict: :func:`summary_of` turns a stage's summary into its dataclass here (:class:`IngestSummary` ...
:class:`SiteSummary`), and they read attributes (``summary.pairs_scored``), so a key that a stage no longer returns
is a type error in the command, not a ``KeyError`` in front of a user.

Every field has a default (None, 0, False or empty) for a key the stage left out: a stage that failed, was skipped,
was stopped or had nothing to do returns only some keys (:class:`StageSummary`: ``error``, ``skipped``,
``interrupted``; ``unchanged``; ``nothing_to_score`` ...).  ``from_json`` reads any stored summary, old rows included:
it converts nothing and checks nothing, and keeps a key the contract does not declare in ``extra``.  ``as_json``
gives the JSON back unchanged: the keys it was read from, in their order, with the values they had (a key left out
stays out, also where its value equals the default), plus the fields set since to something other than their
default.  Rows inside a summary (exam rows, rankings, failures, ...) stay JSON objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, Field, dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Self, TypedDict, overload

if TYPE_CHECKING:
    from grebench.ingest import LinkCounts
    from grebench.panel import AgreementRow, ExamRow, Qualified, RankingRow
    from grebench.scoring import Attribution, EstimatorAgreement, ValidationRow
    from grebench.submissions import HeldSubmission

#: The bookkeeping fields of :class:`StageSummary`: not keys of the stage's JSON.
_BOOKKEEPING = frozenset({"extra", "_keys", "_given"})


class SkippedRow(TypedDict):
    """``score``: what a metric could not score (``Skips.report``), counted."""

    metric: str
    what: str
    reason: str
    count: int


class ProxyScore(TypedDict):
    """``score``: the fast proxy's pass, scored before the evaluation LM's on the same pairs."""

    estimator: str
    preprocessor: str
    pairs_scored: int
    estimator_calls: int
    cache_hits: int
    attribution: Attribution


class Published(TypedDict):
    """``grebench site build`` while a writer holds the store: the published state the site was built from."""

    version: str | None
    published_at: Any  # the export's timestamp, printed by ``--json`` as text
    source: str
    writer: str


@dataclass(slots=True, kw_only=True)
class StageSummary:
    """What every stage's summary may say, besides its own fields, and the JSON round trip."""

    error: str | None = None        # the stage raised (recorded on the run)
    skipped: str | None = None      # a skipped stage: "because [x] failed"
    unchanged: bool = False         # its inputs did not change since its last complete run
    interrupted: str | None = None  # a stop (signal, Ctrl-C) ended it
    run_id: str | None = None       # single-stage commands add the run
    extra: dict[str, Any] = field(default_factory=dict)  # keys this contract does not declare (an older stored row)
    _keys: tuple[str, ...] = field(default=(), repr=False, compare=False)       # the JSON keys read, in order
    _given: frozenset[str] = field(default=frozenset(), repr=False, compare=False)  # the fields they set

    #: A field stored under another JSON key (``score``'s ``skips`` are its ``skipped`` rows).
    _json_names: ClassVar[Mapping[str, str]] = {}

    @classmethod
    def _field_for(cls, key: str, value: object) -> str | None:
        """The field a JSON key is read into (None: ``extra``)."""
        return _declared(cls, key)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        """A stored summary (a stage's dict, from this version or an older one) as this contract; never raises on
        a key it does not know (kept in ``extra``), and converts no value."""
        known: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in data.items():
            name = cls._field_for(key, value)
            if name is None:
                extra[key] = value
            else:
                known[name] = value
        return cls(**known, extra=extra, _keys=tuple(data), _given=frozenset(known))

    def as_json(self) -> dict[str, Any]:
        """The summary as the stage's JSON: the keys it was read from in their order and with their values, then
        the fields set to something other than their default; a field left at its default is left out."""
        out: dict[str, Any] = {}
        for f in fields(self):
            if f.name in _BOOKKEEPING:
                continue
            value = getattr(self, f.name)
            if f.name in self._given or value != _default(f):
                out[self._json_names.get(f.name, f.name)] = value
        out.update(self.extra)
        order = {key: i for i, key in enumerate(self._keys)}
        return dict(sorted(out.items(), key=lambda item: order.get(item[0], len(order))))

    @property
    def ran(self) -> bool:
        """The stage ran (or was unchanged) to a summary: it was in the job and did not fail, was not skipped and
        was not stopped."""
        return bool(self.as_json()) and self.error is None and self.skipped is None and self.interrupted is None


def _declared(cls: type[StageSummary], key: str) -> str | None:
    """The field of ``cls`` stored under JSON key ``key`` (None: it declares none)."""
    for f in fields(cls):
        if f.name not in _BOOKKEEPING and cls._json_names.get(f.name, f.name) == key:
            return f.name
    return None


def _no_links() -> LinkCounts:
    return {}


def _default(f: Field[Any]) -> object:
    return f.default if f.default_factory is MISSING else f.default_factory()


@dataclass(slots=True, kw_only=True)
class IngestSummary(StageSummary):
    """``ingest``: what a source added, and the store's totals."""

    source: str = ""
    papers_seen: int = 0
    papers_added: int = 0
    papers_updated: int = 0
    reviews_added: int = 0
    versions_added: int = 0
    pdfs_extracted: int = 0
    links: LinkCounts = field(default_factory=_no_links)  # the links of the papers it added or changed (none: {})
    failures: list[dict[str, str]] = field(default_factory=list)  # {item, reason}
    papers_total: int = 0
    reviews_total: int = 0
    versions_total: int = 0


@dataclass(slots=True, kw_only=True)
class BenchSummary(StageSummary):
    """``bench``: the candidates' reviews (``generate``: sealed ones only)."""

    calls_made: int = 0
    cached: int = 0
    failed: int = 0
    gave_up: int = 0
    generations_total: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    skipped_papers: list[dict[str, str]] = field(default_factory=list)       # {paper_id, reason}
    skipped_generations: list[dict[str, str]] = field(default_factory=list)  # {candidate, paper_id, reason}
    generations_written: int = 0
    papers_eligible: int = 0
    llm_controls: list[str] = field(default_factory=list)
    # bench: {name, kind, generations[, sample_papers]} per candidate; generate: the LLM candidates' names
    candidates: list[Any] = field(default_factory=list)
    papers: int = 0                 # generate: the unreviewed papers
    sample: str | None = None
    resealed: int = 0
    complete: bool | None = None    # None: not said (the runner then stores the stage's state)
    validation: str | None = None   # core | full: the control set the run wrote


@dataclass(slots=True, kw_only=True)
class ScoreSummary(StageSummary):
    """``score``: pairs scored, with which estimator and preprocessor ids."""

    metrics: list[str] = field(default_factory=list)
    estimator: str = ""
    preprocessor: str = ""
    pairs_scored: int = 0
    estimator_calls: int = 0
    estimator_batches: int = 0
    cache_hits: int = 0
    skips: list[SkippedRow] = field(default_factory=list)  # JSON ``skipped``: what a metric could not score
    attribution: Attribution | None = None  # per-line attribution: pairs, requests, cache_hits, rows (docs/scoring.md)
    nothing_to_score: bool = False
    sample: str | None = None
    proxy: ProxyScore | None = None
    validation: str | None = None   # core | full: the control set and metrics the run scored
    held: list[HeldSubmission] = field(default_factory=list)  # submitted models the information view held (issue 48)

    _json_names: ClassVar[Mapping[str, str]] = {"skips": "skipped"}

    @classmethod
    def _field_for(cls, key: str, value: object) -> str | None:
        if key == "skipped":  # the score stage's rows; a runner's "because [x] failed" (never for score) is text
            return "skips" if isinstance(value, list) else "skipped"
        return _declared(cls, key)  # (no super() in a slots dataclass: the class is rebuilt)


@dataclass(slots=True, kw_only=True)
class BoardsSummary(StageSummary):
    """``boards``: boards and rows stored."""

    boards: int | None = None       # None: the stage did not say (``grebench score --json`` prints null)
    rows: int = 0


@dataclass(slots=True, kw_only=True)
class ValidateSummary(StageSummary):
    """``validate``: the metric's validation for the run's scored setup."""

    estimator: str = ""
    preprocessor: str = ""
    metrics: list[str] = field(default_factory=list)
    rows: list[ValidationRow] = field(default_factory=list)
    agreement: list[EstimatorAgreement] = field(default_factory=list)
    nothing_to_validate: str | None = None
    validation: str | None = None   # core | full | partial: what the report tested
    controls_not_tested: list[str] | None = None
    metrics_not_tested: list[str] | None = None


@dataclass(slots=True, kw_only=True)
class PanelSummary(StageSummary):
    """``panel`` (``exam``, ``judge``): the exam, the ranking, the agreement with GEM-S, per venue-year."""

    venues: list[str] = field(default_factory=list)
    exam: list[ExamRow] = field(default_factory=list)
    rankings: list[RankingRow] = field(default_factory=list)
    agreement: list[AgreementRow] = field(default_factory=list)
    qualified: list[Qualified] = field(default_factory=list)
    unjudged: list[dict[str, str]] = field(default_factory=list)   # {venue_id, candidate, reason}
    votes: int = 0
    votes_total: int = 0
    machine_metrics: int = 0
    gem_metric: str | None = None
    verdicts: int = 0
    flagged: int = 0
    debated: int = 0
    skipped_venues: list[str] = field(default_factory=list)
    calls_made: int = 0
    estimator_calls: int = 0
    cached: int = 0


@dataclass(slots=True, kw_only=True)
class SiteSummary(StageSummary):
    """``site``: the static site built and the tables exported for the app."""

    out: str | None = None
    pages: int = 0
    boards: int = 0
    models: int = 0
    papers: int = 0
    compares: int = 0  # compare pages (two contestants of the headline board side by side)
    leaderboard_json_sha256: str | None = None
    exported_tables: int = 0
    version: str | None = None  # the board version the site shows (new when the boards changed)
    versions: int = 0
    published: Published | None = None  # ``grebench site build`` from the last published state (no stage)
    not_published: str | None = None  # why no new board version: an earlier stage of the run failed


StageName = Literal["ingest", "bench", "score", "boards", "validate", "panel", "site"]

#: The contract of each stage of the main job.
CONTRACTS: dict[str, type[StageSummary]] = {
    "ingest": IngestSummary, "bench": BenchSummary, "score": ScoreSummary, "boards": BoardsSummary,
    "validate": ValidateSummary, "panel": PanelSummary, "site": SiteSummary}


@overload
def summary_of(stages: Mapping[str, Any], name: Literal["ingest"]) -> IngestSummary: ...
@overload
def summary_of(stages: Mapping[str, Any], name: Literal["bench"]) -> BenchSummary: ...
@overload
def summary_of(stages: Mapping[str, Any], name: Literal["score"]) -> ScoreSummary: ...
@overload
def summary_of(stages: Mapping[str, Any], name: Literal["boards"]) -> BoardsSummary: ...
@overload
def summary_of(stages: Mapping[str, Any], name: Literal["validate"]) -> ValidateSummary: ...
@overload
def summary_of(stages: Mapping[str, Any], name: Literal["panel"]) -> PanelSummary: ...
@overload
def summary_of(stages: Mapping[str, Any], name: Literal["site"]) -> SiteSummary: ...


def summary_of(stages: Mapping[str, Any], name: StageName) -> StageSummary:
    """The summary of stage ``name`` in a job's summaries by stage (a JSON object per stage), as its contract; a
    stage that did not run gives an empty one (every field at its default, ``ran`` false)."""
    return CONTRACTS[name].from_json(stages.get(name) or {})

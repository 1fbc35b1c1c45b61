"""The candidates: the human baseline, the controls, and ``[[candidates]]`` tables from the settings file.

A configured candidate's ``kind`` names an entry of :data:`CANDIDATE_KINDS` (default ``llm``: any litellm model or
OpenAI-compatible endpoint), which validates its table and may serve it (a local model is started for the bench
stage and stopped after it).  See ``docs/candidates.md`` for the format.  Validation errors name the candidate and
the key, so a bad config fails before any call is made.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import date
from typing import Any, Protocol

from grebench.llm import endpoint_tables, parse_endpoint, table_name
from grebench.registry import Registry
from grebench.settings import BenchSettings, Settings
from grebench.store import BASELINE, CONTESTANT, REFERENCE, Store, utcnow

ALLOWED_KEYS = {"name", "kind", "model", "api_base", "released", "cutoff", "api_key_env", "params", "family",
                "description", "submitter", "stream"}
DEFAULT_MAX_TOKENS = 4096
HUMAN = "human"
HUMAN_DESCRIPTION = "A held-out human official review of the paper (seeded pick); the other reviews are references."


class CandidateError(ValueError):
    """A ``[[candidates]]`` entry that cannot be used, with the reason."""


@dataclass(frozen=True)
class Candidate:
    """One candidate reviewer: an LLM, the human baseline or a control."""

    name: str
    kind: str
    model: str | None = None
    api_base: str | None = None
    api_key_env: str | None = None
    released: date | None = None
    cutoff: date | None = None
    family: str | None = None
    description: str | None = None
    submitter: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    stream: bool = True  # false: the endpoint cannot stream, every call is one plain JSON request
    endpoint_id: str | None = None  # names the endpoint in call-cache keys when api_base changes (a local server)
    isolated: bool = False  # submitted by the public: its calls never read the operator's environment
    #: Whose calls these are when they may be shared with nobody (a submitted model: ``submission:<id>``); None: an
    #: operator candidate, whose cached calls are shared by endpoint and credential (:mod:`grebench.llm._scope`).
    cache_owner: str | None = None

    @property
    def needs_llm(self) -> bool:
        """Whether generating for this candidate calls an LLM."""
        return self.model is not None


def _date(value: Any, where: str, key: str) -> date | None:
    if value is None:
        return None
    if isinstance(value, date):
        return value
    try:
        return date.fromisoformat(str(value))
    except ValueError:
        raise CandidateError(f"{where}: {key} must be an ISO date (YYYY-MM-DD), got {value!r}") from None


def parse_candidate(raw: Any, index: int, settings: Settings) -> Candidate:
    """Validate one ``[[candidates]]`` table with the parser of its ``kind``."""
    name = table_name(raw, f"[[candidates]] #{index + 1}", CandidateError)
    where = f"candidate {name!r}"
    kind = raw.get("kind", ENDPOINT_KIND)
    configurable = [e.name for e in CANDIDATE_KINDS if kind_info(e.name).configurable]
    if not isinstance(kind, str) or kind not in CANDIDATE_KINDS:
        raise CandidateError(f"{where}: kind must be one of {', '.join(configurable)} (the human "
                             f"baseline and the controls are bundled), got {kind!r}")
    if not kind_info(kind).configurable:
        try:
            CANDIDATE_KINDS.get(kind).obj.parse(raw, where, settings)
        except CandidateError as exc:
            why = str(exc).removeprefix(f"{where}: ")
        else:
            why = "it is not configured in a settings file"
        raise CandidateError(f"{where}: kind must be one of {', '.join(configurable)}, got {kind!r}: {why}")
    return CANDIDATE_KINDS.get(kind).obj.parse(raw, where, settings)


class LLMKind:
    """``kind = "llm"``: a litellm model string, optionally at an OpenAI-compatible ``api_base``."""

    name = "llm"

    def parse(self, raw: dict[str, Any], where: str, settings: Settings) -> Candidate:
        """Validate the table of an ``llm`` candidate."""
        return _parse_llm(raw, where, settings.bench)

    @contextmanager
    def serve(self, candidates: list[Candidate], settings: Settings) -> Iterator[list[Candidate]]:
        """An endpoint candidate needs nothing started: the candidates as they are."""
        yield candidates


def _parse_llm(raw: dict[str, Any], where: str, bench: BenchSettings) -> Candidate:
    endpoint = parse_endpoint(raw, where, ALLOWED_KEYS, CandidateError)
    model = endpoint.model
    cutoff = _date(raw.get("cutoff"), where, "cutoff")
    if cutoff is None:
        raise CandidateError(f"{where}: missing cutoff (training-data cutoff date, YYYY-MM-DD): without it no "
                             "paper can be shown clean")
    stream = raw.get("stream", True)
    if not isinstance(stream, bool):
        raise CandidateError(f"{where}: stream must be true or false, got {stream!r}")
    if not stream and not model.startswith("openai/"):
        raise CandidateError(f"{where}: stream = false works with OpenAI-compatible endpoints only (model "
                             f"'openai/<model id>'), got {model!r}")
    params = endpoint.params
    if "stream" in params or "stream_options" in params:
        raise CandidateError(f"{where}: params.stream: write stream = false as a key of the candidate, next to "
                             "model (it says how replies are fetched, not how the model writes)")
    params = {"temperature": 0, "max_tokens": DEFAULT_MAX_TOKENS, "context_tokens": bench.context_tokens,
              **params}
    for key in ("max_tokens", "context_tokens"):
        if not isinstance(params[key], int) or params[key] <= 0:
            raise CandidateError(f"{where}: params.{key} must be a positive integer")
    if params["max_tokens"] >= params["context_tokens"]:
        raise CandidateError(f"{where}: params.max_tokens must be smaller than params.context_tokens")
    return Candidate(name=endpoint.name, kind=ENDPOINT_KIND, model=model, api_base=endpoint.api_base,
                     api_key_env=endpoint.api_key_env, released=_date(raw.get("released"), where, "released"),
                     cutoff=cutoff, family=endpoint.family, description=endpoint.description,
                     submitter=raw.get("submitter"), params=params, stream=stream)


class CandidateKind(Protocol):
    """A kind of configured candidate: how its ``[[candidates]]`` table is read, and how it is served."""

    name: str

    def parse(self, raw: dict[str, Any], where: str, settings: Settings) -> Candidate:
        """Validate one table (``where`` names it in errors) into a candidate."""
        ...

    def serve(self, candidates: list[Candidate], settings: Settings) -> AbstractContextManager[list[Candidate]]:
        """Make the candidates callable for the bench stage (start a local server, ...); yields them ready."""
        ...


@dataclass(frozen=True)
class KindInfo:
    """The facts about a kind of candidate that boards, pages and plots read (registration meta, with defaults).

    ``role``: :data:`CONTESTANT`, :data:`BASELINE` or :data:`REFERENCE`.  ``tag``: the words shown after a
    candidate's name on boards ('' for a plain model).
    ``colour``: its colour in board plots.  ``clean_without_cutoff``: a candidate of this kind with no training
    cutoff counts as clean (False: its model is unknown, so only its sealed reviews count).  ``configurable``: it may
    be declared in a ``[[candidates]]`` table (bundled and imported kinds come from elsewhere).  ``generated``: the
    bench writes its reviews (imported reviews come from ``grebench bench import``).
    """

    name: str
    role: str = CONTESTANT
    tag: str = ""
    colour: str = "#1f5fa8"
    clean_without_cutoff: bool = True
    configurable: bool = True
    generated: bool = True

    @property
    def ranked(self) -> bool:
        """Whether candidates of this kind get a rank (contestants and the baseline)."""
        return self.role != REFERENCE

    @property
    def always_clean(self) -> bool:
        """Whether its reviews count on every paper (the baseline and references are built from human reviews)."""
        return self.role != CONTESTANT


class _StoredKind:
    """A kind whose candidates are not configured: bundled (the human baseline, the controls) or imported."""

    def __init__(self, name: str, refusal: str) -> None:
        self.name, self.refusal = name, refusal

    def parse(self, raw: dict[str, Any], where: str, settings: Settings) -> Candidate:
        """Refuse the table: this kind is not declared in the settings file."""
        raise CandidateError(f"{where}: {self.refusal}")

    @contextmanager
    def serve(self, candidates: list[Candidate], settings: Settings) -> Iterator[list[Candidate]]:
        """Nothing to start: the candidates as they are."""
        yield candidates


#: Kinds of candidates (``llm`` and ``local`` configured ones, the bundled ``human`` and ``control``, ``imported``
#: reviews; plugins may add more).  An entry's facts are a :class:`KindInfo`.
CANDIDATE_KINDS: Registry[CandidateKind] = Registry("candidate kind", builtins=("grebench.bench._local",),
                                                    facts=KindInfo)
#: The kind of a model called at an endpoint: configured ``[[candidates]]`` by default, and submitted models.
ENDPOINT_KIND = "llm"
#: The kind of the human baseline and of the controls (bundled candidates).
HUMAN_KIND, CONTROL_KIND = "human", "control"
#: The kind of a candidate whose reviews were written elsewhere (``grebench bench import``).
IMPORTED_KIND = "imported"
#: The kind of a model submitted by the public (the app, ``grebench submit``): called like an ``llm`` endpoint, but
#: its declared cutoff is information only until the operator vouches for it (``grebench submissions approve``):
#: until then the candidate has no cutoff and only its sealed reviews count.
SUBMITTED_KIND = "submitted"
CANDIDATE_KINDS.add(ENDPOINT_KIND, LLMKind(), spec="llm", summary="a litellm model or an OpenAI-compatible endpoint")
CANDIDATE_KINDS.add(HUMAN_KIND, _StoredKind(HUMAN_KIND, "the human baseline is bundled"), summary="the human "
                    "baseline", role=BASELINE, tag="human baseline", colour="#2e7d32", configurable=False)
CANDIDATE_KINDS.add(CONTROL_KIND, _StoredKind(CONTROL_KIND, "the controls are bundled"), summary="a control",
                    role=REFERENCE, tag="control", colour="#8a8a8a", configurable=False)
CANDIDATE_KINDS.add(IMPORTED_KIND, _StoredKind(IMPORTED_KIND, "kind 'imported' is not configured: `grebench bench "
                                               "import --candidate NAME FILE.jsonl` stores the candidate and its "
                                               "reviews (docs/candidates.md)"),
                    summary="reviews written elsewhere", tag="imported", colour="#8a4f0f",
                    clean_without_cutoff=False, configurable=False, generated=False)
CANDIDATE_KINDS.add(SUBMITTED_KIND, _StoredKind(SUBMITTED_KIND, "submitted models come from the submission queue "
                                                "(`grebench submit`, the app's Submit tab)"),
                    summary="a model submitted through the queue", tag="submitted", colour="#5e35b1",
                    clean_without_cutoff=False, configurable=False)


def kind_info(kind: str | None) -> KindInfo:
    """What the registry says about a kind of candidate; a kind no longer registered (an old store, a removed
    plugin) is a contestant with default facts."""
    if kind is None or kind not in CANDIDATE_KINDS:
        return KindInfo(str(kind or "unknown"))
    return CANDIDATE_KINDS.get(kind).facts(KindInfo)


def kinds_with_role(*roles: str) -> list[str]:
    """The registered kinds whose role is one of ``roles``."""
    return [e.name for e in CANDIDATE_KINDS if kind_info(e.name).role in roles]


@contextmanager
def candidate_endpoints(candidates: list[Candidate], settings: Settings) -> Iterator[list[Candidate]]:
    """Every candidate ready to be called: each configured kind serves its own (controls go as they are)."""
    with ExitStack() as stack:
        ready: list[Candidate] = []
        by_kind: dict[str, list[Candidate]] = {}
        for c in candidates:
            by_kind.setdefault(c.kind, []).append(c)
        for kind, members in by_kind.items():
            if kind in CANDIDATE_KINDS:
                ready += stack.enter_context(CANDIDATE_KINDS.get(kind).obj.serve(members, settings))
            else:
                ready += members
        order = {c.name: i for i, c in enumerate(candidates)}
        yield sorted(ready, key=lambda c: order.get(c.name, len(order)))


def bundled_candidates(bench: BenchSettings) -> list[Candidate]:
    """The human baseline and the controls; the LLM-made controls only with ``control_model`` set."""
    from grebench.bench.controls import CONTROLS

    out = [Candidate(HUMAN, HUMAN_KIND, description=HUMAN_DESCRIPTION)]
    params = {"temperature": 0, "max_tokens": DEFAULT_MAX_TOKENS, "context_tokens": bench.context_tokens}
    for entry in CONTROLS:
        control = entry.obj
        if not control.needs_llm:
            out.append(Candidate(control.name, CONTROL_KIND, description=control.description))
        elif bench.control_model:
            out.append(Candidate(control.name, CONTROL_KIND, model=bench.control_model,
                                 description=control.description, params=params))
    return out


def builtin_local_tables(settings: Settings, configured: list[Any]) -> list[dict[str, Any]]:
    """``[[candidates]]`` tables of setting ``local_candidates`` (catalogue names served as ``kind = "local"``);
    a configured table of the same name replaces the built-in one."""
    from grebench.bench._local import LOCAL_KIND
    from grebench.models import model_family

    names = {e.get("name") for e in configured if isinstance(e, dict)}
    out = []
    for spec in settings.listed("local_candidates"):
        if spec not in names:
            out.append({"name": spec, "kind": LOCAL_KIND, "model": spec, "family": model_family(spec),
                        "description": f"built-in local candidate: catalogue model {spec} (setting local_candidates)"})
    return out


def load_candidates(settings: Settings) -> list[Candidate]:
    """Every candidate: bundled ones first, then the built-in local ones, then the configured ones (unique names)."""
    raw = endpoint_tables(settings.tables.get("candidates"), "candidates", CandidateError)
    builtin = builtin_local_tables(settings, raw)
    out = bundled_candidates(settings.bench)
    seen = {c.name for c in out}
    from grebench.bench.controls import CONTROLS

    reserved = {HUMAN, *CONTROLS.names()}
    for i, entry in [(-1, t) for t in builtin] + list(enumerate(raw)):
        candidate = parse_candidate(entry, i, settings)
        if candidate.name in seen or candidate.name in reserved:
            raise CandidateError(f"candidate {candidate.name!r}: name already used (or reserved for a bundled one)")
        seen.add(candidate.name)
        out.append(candidate)
    return out


def check_names_free(store: Store, candidates: list[Candidate]) -> None:
    """Raise :class:`CandidateError` when a configured candidate takes the name of imported reviews (reads only)."""
    imported = {r["name"].lower() for r in store.rows("SELECT name FROM candidates WHERE kind = ?", [IMPORTED_KIND])}
    for c in candidates:
        if c.kind != IMPORTED_KIND and c.name.lower() in imported:
            raise CandidateError(f"candidate {c.name!r}: name already used by imported reviews (grebench bench "
                                 "import); choose another name")


def sync_candidates(store: Store, candidates: list[Candidate]) -> None:
    """Write the registry into the ``candidates`` table (the key's variable name only, never a key).

    Imported candidates live only in the store (``grebench bench import``): a configured candidate may not take
    the name of one (its reviews would be mixed with the imported ones).
    """
    check_names_free(store, candidates)
    with store.transaction() as con:
        for c in candidates:
            con.execute("DELETE FROM candidates WHERE name = ?", [c.name])
            con.execute(
                "INSERT INTO candidates (name, kind, model, api_base, family, released, cutoff, api_key_env, "
                "params_json, description, submitter, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [c.name, c.kind, c.model, c.api_base, c.family, c.released, c.cutoff, c.api_key_env,
                 json.dumps(c.params, sort_keys=True), c.description, c.submitter, utcnow()])

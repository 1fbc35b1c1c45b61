"""Reviews written elsewhere (an agentic reviewer, a closed model run elsewhere) as a candidate of kind ``imported``.

``grebench bench import --candidate NAME FILE.jsonl`` reads a JSON Lines file: one object per paper
(``paper_id``, ``review``, optional ``generated_at``), optionally after a first line ``{"_meta": {...}}`` with the
model's metadata (``cutoff``, ``model``, ...; command-line options override it).  Every line is checked before
anything is written (:func:`read_import`): one bad line refuses the whole file, and the error
(:class:`ImportRefused`) names every bad line with its reason.  A valid file becomes the candidate's whole set of
reviews in one transaction (:func:`import_reviews`): new and changed reviews are written, the reviews of papers no
longer in the file go with their scores, and the same file again writes nothing.

The reviews are ordinary generations (``prompt_version`` :data:`IMPORT_VERSION`): parsed, sealed and scored like
an LLM's, ranked among the contestants, and clean by the bench's one rule (:func:`grebench.bench.is_clean`,
:func:`grebench.bench.is_sealed`).  The format, limits and errors are in ``docs/candidates.md``.
"""

from __future__ import annotations

import codecs
import hashlib
import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from typing import Any, Literal, NotRequired, TypedDict

from grebench.bench._contamination import IMPORTED_KIND, is_clean
from grebench.bench._copies import COPY_THRESHOLD, Background, CopyEvidence, bundled_background, copy_evidence
from grebench.bench._generations import COLUMNS, GenerationRow, make_row
from grebench.bench._parse import parse_review
from grebench.bench._prose import ProseEvidence, prose_evidence
from grebench.bench._registry import HUMAN, CandidateError, load_candidates
from grebench.bench._sketches import similar_reviews
from grebench.llm import NAME_PATTERN
from grebench.settings import Settings
from grebench.store import Store, held_reasons, linked_versions, public_since, utcnow

IMPORT_VERSION = "imported-v1"  # prompt_version of imported generations
MAX_REVIEW_BYTES = 100_000  # one review's text, UTF-8
MAX_FILE_BYTES = 64 * 1024 * 1024  # the whole file (400 papers of 100 kB fit with room to spare)
MAX_LISTED = 20  # bad lines named in the message (the rest are counted)
MAX_KEPT = 1000  # bad lines kept on the exception
MAX_REASON = 500  # characters of one bad line's reasons (a refusal message stays a few kB whatever the file holds)
LINE_KEYS = ("paper_id", "review", "generated_at")
META_KEYS = ("cutoff", "released", "model", "family", "description", "url", "submitter")
_DATE_KEYS: tuple[Literal["cutoff", "released"], ...] = ("cutoff", "released")
_TEXT_KEYS: tuple[Literal["model", "family", "description", "url", "submitter"], ...] = (
    "model", "family", "description", "url", "submitter")
#: The declared dates an untrusted import keeps as information only.
_DECLARED: tuple[Literal["cutoff"], ...] = ("cutoff",)
_TEXT_LIMITS = {"model": 200, "family": 100, "description": 2000, "url": 500, "submitter": 200}
_CLOCK_SKEW = timedelta(minutes=5)  # a generated_at this far ahead of our clock is still "now"
_JSON_TYPES = {dict: "an object", list: "an array", str: "a string", int: "a number", float: "a number",
               bool: "a boolean", type(None): "null"}


@dataclass(frozen=True)
class BadLine:
    """One refused line of an import file (``line`` 0: the file as a whole)."""

    line: int
    reason: str


class ImportRefused(ValueError):
    """A file was refused and nothing was written; :attr:`problems` names the bad lines (the first :data:`MAX_KEPT`)."""

    def __init__(self, problems: Sequence[BadLine], total: int | None = None, source: str = "import file") -> None:
        self.problems = list(problems)[:MAX_KEPT]
        self.total = len(problems) if total is None else total
        self.source = source
        super().__init__(self.message())

    def message(self, bullet: str = "  ") -> str:
        """The refusal with the first :data:`MAX_LISTED` bad lines, one per line (``bullet`` starts each)."""
        if self.problems and self.problems[0].line == 0:
            return f"{self.source} refused, nothing written: {self.problems[0].reason}"
        head = f"{self.source} refused, nothing written: {self.total} bad line{'s' if self.total != 1 else ''}"
        listed = [f"{bullet}line {p.line}: {p.reason}" for p in self.problems[:MAX_LISTED]]
        if self.total > len(listed):
            listed.append(f"{bullet}... and {self.total - len(listed)} more")
        return "\n".join([head, *listed])

    def as_json(self) -> ImportRefusal:
        """Machine-readable refusal: the message, the bad lines kept, and how many there were."""
        return {"status": "refused", "error": self.message(), "bad_lines_total": self.total,
                "bad_lines": [{"line": p.line, "reason": p.reason} for p in self.problems]}


class RefusedLine(TypedDict):
    """One bad line of a refused file, as ``--json`` prints it."""

    line: int
    reason: str


class ImportRefusal(TypedDict):
    """A refused import, as ``grebench bench import --json`` prints it (:meth:`ImportRefused.as_json`)."""

    status: str                     # refused
    error: str
    bad_lines_total: int
    bad_lines: list[RefusedLine]


class ModelMeta(TypedDict, total=False):
    """Model metadata, checked (:func:`check_meta`): a key is absent where no value was given."""

    cutoff: date
    released: date
    model: str
    family: str
    description: str
    url: str
    submitter: str
    declared: dict[str, str]        # untrusted declared dates, as text (:func:`import_reviews`)


class ImportSummary(TypedDict):
    """What an import did and how its reviews count (:func:`import_reviews`; ``grebench bench import --json``)."""

    candidate: str
    kind: str
    source: str
    sha256: str
    reviews: int
    changed: bool
    added: int
    replaced: int
    removed: int
    clean: int
    sealed: int
    contaminated: int
    held_unsealed: dict[str, list[str]]  # paper → why its reviews may not count as sealed (undecided possible links)
    papers_with_split: int
    cutoff: date | None
    cutoff_trusted: bool
    declared: dict[str, str]
    model: str | None
    warnings: list[str]
    status: str                     # ok
    outside_sample: NotRequired[list[str]]  # the command adds the papers outside the recorded sample
    sample_size: NotRequired[int | None]


@dataclass(frozen=True)
class ImportedReview:
    """One valid review line: where it was, the paper, the text, and when it was written (naive UTC) if given."""

    line: int
    paper_id: str
    text: str
    generated_at: datetime | None
    declared_at: datetime | None = None   # an untrusted generated_at: kept in the flags as information only


@dataclass(frozen=True)
class ImportFile:
    """A fully valid import file: the ``_meta`` line's metadata (parsed), the reviews in file order, its hash."""

    meta: ModelMeta
    reviews: tuple[ImportedReview, ...]
    sha256: str


def _show(value: Any, limit: int = 60) -> str:
    """A value quoted for an error message, cut short (a hostile file must not make the message huge)."""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return repr(text[:limit] + "…") if len(text) > limit else repr(text)


def _listed(keys: Sequence[Any], limit: int = 10) -> str:
    """The first ``limit`` keys quoted, then a count: a line with a million unknown keys gets a short message."""
    shown = ", ".join(_show(k) for k in keys[:limit])
    return shown + (f" ... and {len(keys) - limit:,} more" if len(keys) > limit else "")


def _type(value: Any) -> str:
    return _JSON_TYPES.get(type(value), type(value).__name__)


def _utf8_size(text: str) -> int | None:
    """Bytes of ``text`` in UTF-8; None when it cannot be stored (a lone surrogate from a ``\\ud800`` escape)."""
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError:
        return None


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {_show(key)}")
        out[key] = value
    return out


def _decode(raw: bytes) -> Any:
    """The JSON value of one line; ValueError with the reason when it is not valid UTF-8 JSON."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"invalid UTF-8 at byte {exc.start}") from None
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON (truncated or malformed): {exc.msg}: column {exc.colno}") from None
    except RecursionError:
        raise ValueError("invalid JSON: nested too deeply") from None


def parse_datetime(value: Any, what: str, now: datetime | None = None) -> datetime:
    """An ISO 8601 date-time (``Z`` or an offset, or none: UTC) as naive UTC; ValueError naming ``what``."""
    if not isinstance(value, str):
        raise ValueError(f"{what} must be an ISO 8601 string, got {_type(value)}")
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise ValueError(f"{what} is not an ISO 8601 date-time: {_show(value)}") from None
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(UTC).replace(tzinfo=None)
    if parsed > (now or utcnow()) + _CLOCK_SKEW:
        raise ValueError(f"{what} {_show(value)} is in the future")
    return parsed


def check_meta(raw: Any, where: str = "_meta") -> tuple[ModelMeta, list[str]]:
    """Validate model metadata (a ``_meta`` object or the command-line options): (parsed values, reasons).

    Keys: :data:`META_KEYS`; ``cutoff`` and ``released`` are dates YYYY-MM-DD, the others strings; None is absent.
    """
    if not isinstance(raw, dict):
        return {}, [f"{where} must be an object, got {_type(raw)}"]
    reasons: list[str] = []
    unknown = sorted(set(raw) - set(META_KEYS))
    if unknown:
        reasons.append(f"unknown {where} key(s) {_listed(unknown)} "
                       f"(allowed: {', '.join(META_KEYS)})")
    meta: ModelMeta = {}
    for key in _DATE_KEYS:  # META_KEYS begins with the dates: the keys are checked (and kept) in its order
        value = raw.get(key)
        if value is None:
            continue
        if isinstance(value, date) and not isinstance(value, datetime):
            meta[key] = value
            continue
        try:
            if not isinstance(value, str) or len(value.strip()) != 10:
                raise ValueError
            meta[key] = date.fromisoformat(value.strip())
        except ValueError:
            reasons.append(f"{where} {key} must be a date YYYY-MM-DD, got {_show(value)}")
    for text_key in _TEXT_KEYS:
        value = raw.get(text_key)
        if value is None:
            continue
        if not isinstance(value, str) or _utf8_size(value) is None:
            reasons.append(f"{where} {text_key} must be a string of valid characters, got {_type(value)}")
        elif len(value) > _TEXT_LIMITS[text_key]:
            reasons.append(f"{where} {text_key} is longer than {_TEXT_LIMITS[text_key]} characters")
        elif text_key == "url" and not value.strip().lower().startswith(("https://", "http://")):
            reasons.append(f"{where} url must start with https:// or http://, got {_show(value)}")
        elif value.strip():
            meta[text_key] = value.strip()
    if (cutoff := meta.get("cutoff")) and (released := meta.get("released")) and cutoff > released:
        reasons.append(f"{where} cutoff {meta['cutoff']} is after released {meta['released']}")
    return meta, reasons


def _review_line(obj: Any, number: int, known: Collection[str], first_line: dict[str, int],
                 now: datetime) -> tuple[ImportedReview | None, list[str]]:
    """One review line checked in full: the review, or every reason it is refused."""
    if not isinstance(obj, dict):
        return None, [f"expected a JSON object, got {_type(obj)}"]
    reasons: list[str] = []
    unknown = sorted(set(obj) - set(LINE_KEYS))
    if unknown:
        reasons.append(f"unknown key(s) {_listed(unknown)} (allowed: {', '.join(LINE_KEYS)})")
    paper_id = obj.get("paper_id")
    if paper_id is None:
        reasons.append("missing paper_id")
    elif not isinstance(paper_id, str):
        reasons.append(f"paper_id must be a string, got {_type(paper_id)}")
    elif paper_id not in known:
        reasons.append(f"unknown paper id {_show(paper_id)} (not in the store)")
    elif paper_id in first_line:
        reasons.append(f"duplicate paper_id {_show(paper_id)} (first on line {first_line[paper_id]})")
    else:
        first_line[paper_id] = number
    text = obj.get("review")
    if text is None:
        reasons.append("missing review")
    elif not isinstance(text, str):
        reasons.append(f"review must be a string, got {_type(text)}")
    elif not text.strip():
        reasons.append("review is empty")
    elif (size := _utf8_size(text)) is None:
        reasons.append("review contains an unpaired surrogate (\\ud800-\\udfff escape)")
    elif size > MAX_REVIEW_BYTES:
        reasons.append(f"review is {size:,} bytes (limit {MAX_REVIEW_BYTES:,})")
    elif "\x00" in text:
        reasons.append("review contains a NUL character")
    generated_at = None
    if obj.get("generated_at") is not None:
        try:
            generated_at = parse_datetime(obj["generated_at"], "generated_at", now)
        except ValueError as exc:
            reasons.append(str(exc))
    if reasons:
        return None, reasons
    assert isinstance(paper_id, str) and isinstance(text, str)
    return ImportedReview(number, paper_id, text, generated_at), []


def read_import(data: bytes, paper_ids: Collection[str], *, now: datetime | None = None,
                max_bytes: int = MAX_FILE_BYTES, source: str = "import file") -> ImportFile:
    """Check every line of an import file; the valid file, or :class:`ImportRefused` listing every bad line.

    ``paper_ids`` are the papers a review may be for (the store's).  Blank lines are allowed; a ``_meta`` line
    may only be the first non-blank line.  Nothing here writes anything.
    """
    if len(data) > max_bytes:
        raise ImportRefused([BadLine(0, f"the file is {len(data):,} bytes (limit {max_bytes:,})")], source=source)
    now = now or utcnow()
    known = paper_ids if isinstance(paper_ids, (set, frozenset, dict)) else frozenset(paper_ids)
    problems: list[BadLine] = []
    total = 0
    meta: ModelMeta = {}
    reviews: list[ImportedReview] = []
    first_line: dict[str, int] = {}
    seen_line = False
    body = data[len(codecs.BOM_UTF8):] if data.startswith(codecs.BOM_UTF8) else data
    for number, raw in enumerate(body.split(b"\n"), start=1):
        if not raw.strip():
            continue
        reasons: list[str]
        try:
            obj = _decode(raw.rstrip(b"\r"))
        except ValueError as exc:
            reasons = [str(exc)]
        else:
            if isinstance(obj, dict) and "_meta" in obj:
                if seen_line:
                    reasons = ["the _meta line must be the first line of the file"]
                elif set(obj) != {"_meta"}:
                    reasons = [f"a _meta line holds only _meta (found also {_listed(sorted(set(obj) - {'_meta'}))})"]
                else:
                    meta, reasons = check_meta(obj["_meta"])
            else:
                review, reasons = _review_line(obj, number, known, first_line, now)
                if review is not None:
                    reviews.append(review)
        seen_line = True
        if reasons:
            total += 1
            if len(problems) < MAX_KEPT:
                reason = "; ".join(reasons)
                problems.append(BadLine(number, reason if len(reason) <= MAX_REASON else reason[:MAX_REASON] + "…"))
    if not problems and not reviews:
        problems, total = [BadLine(0, "the file holds no reviews")], 1
    if problems:
        raise ImportRefused(problems, total, source)
    return ImportFile(meta, tuple(reviews), hashlib.sha256(data).hexdigest())


def reserved_names(settings: Settings) -> set[str]:
    """Names nobody may submit or import under, from the registries: the human baseline, every registered control
    (plugins' too) and every candidate configured in the settings."""
    from grebench.bench.controls import CONTROLS

    return {HUMAN, *CONTROLS.names(), *(c.name for c in load_candidates(settings))}


def is_reserved_name(settings: Settings, name: str) -> bool:
    """Whether ``name`` is one of :func:`reserved_names`, in any case (and with spaces as dashes: a submitted
    model's name becomes its model id that way)."""
    wanted = {name.strip().lower(), name.strip().lower().replace(" ", "-")}
    return bool(wanted & {r.lower() for r in reserved_names(settings)})


def check_candidate_name(store: Store, settings: Settings, name: str) -> None:
    """Refuse a name that is malformed or belongs to a bundled, configured, submitted or LLM candidate."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise CandidateError(f"candidate name must be 1-100 characters of letters, digits and ._:/@+-, got "
                             f"{_show(name)}")
    if is_reserved_name(settings, name):
        raise CandidateError(f"candidate {name!r}: name already used by a bundled or configured candidate")
    for row in store.rows("SELECT name, kind FROM candidates WHERE lower(name) = lower(?)", [name]):
        if row["kind"] != IMPORTED_KIND or row["name"] != name:
            raise CandidateError(f"candidate {name!r}: name already used by candidate {row['name']!r} "
                                 f"(kind {row['kind']})")


def _candidate_row(name: str, meta: ModelMeta, now: datetime) -> dict[str, Any]:
    params: dict[str, Any] = {"url": meta["url"]} if meta.get("url") else {}
    # how cleanliness is decided: the declared dates (the operator vouched: --trust-cutoff), or the server's receipt
    params["cutoff_trusted"] = "declared" not in meta
    params.update({f"declared_{k}": v for k, v in meta.get("declared", {}).items()})
    return {"name": name, "kind": IMPORTED_KIND, "model": meta.get("model"), "api_base": None,
            "family": meta.get("family"), "released": meta.get("released"), "cutoff": meta.get("cutoff"),
            "api_key_env": None, "params_json": json.dumps(params, sort_keys=True),
            "description": meta.get("description"), "submitter": meta.get("submitter"), "updated_at": now}


def _same_candidate(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    return old is not None and all(old[k] == new[k] for k in new if k != "updated_at")


def _generation(name: str, review: ImportedReview, generated_at: datetime,
                public_at: datetime | None) -> GenerationRow:
    """The generations row of one imported review: parsed like an LLM's reply, its id from the text."""
    parsed = parse_review(review.text)
    flags = {"producer": IMPORTED_KIND, "generated_at": "file" if review.generated_at else "import",
             "parse_method": parsed.method, "missing_sections": parsed.missing}
    if review.declared_at is not None:
        flags["declared_generated_at"] = review.declared_at.isoformat()
    params = {"text_sha256": hashlib.sha256(review.text.encode("utf-8")).hexdigest()}
    return make_row(candidate=name, paper_id=review.paper_id, prompt_version=IMPORT_VERSION, params=params,
                    source_review_id=None, status="ok", text=review.text, sections=list(parsed.sections.items()),
                    parse_ok=parsed.parse_ok, flags=flags, error=None, attempts=1, generated_at=generated_at,
                    reviews_public_at=public_at)


def _with_versions(store: Store, paper_ids: Collection[str]) -> dict[str, list[str]]:
    """paper id → itself and every linked version of its work (:func:`grebench.store.linked_versions`)."""
    linked = linked_versions(store, paper_ids)
    return {pid: [pid, *linked.get(pid, [])] for pid in set(paper_ids)}


def public_review_texts(store: Store, paper_ids: Collection[str]) -> dict[str, list[str]]:
    """Every version of every review of these papers in the store, per paper: what a copy would come from.

    A paper's linked versions (the same work at an earlier or later venue, another paper id) count as the paper:
    the reviews of a resubmission's first round are as public as its own.
    """
    versions = _with_versions(store, paper_ids)
    by_paper: dict[str, list[str]] = {}
    for row in store.rows("SELECT r.paper_id, v.text FROM review_versions v JOIN reviews r USING (review_id) "
                          "WHERE r.paper_id IN (SELECT unnest(?::VARCHAR[])) AND v.text IS NOT NULL "
                          "ORDER BY r.paper_id, v.review_id, v.version",
                          [sorted({v for vs in versions.values() for v in vs})]):
        by_paper.setdefault(row["paper_id"], []).append(row["text"])
    out = {pid: [t for v in vs for t in by_paper.get(v, [])] for pid, vs in versions.items()}
    return {pid: texts for pid, texts in out.items() if texts}


def paper_own_texts(store: Store, paper_ids: Collection[str]) -> dict[str, str]:
    """Title, abstract and extracted text of these papers (and of their linked versions): what any review may quote
    without copying a review."""
    versions = _with_versions(store, paper_ids)
    own = {r["paper_id"]: "\n".join(t for t in (r["title"], r["abstract"], r["text"]) if t) for r in store.rows(
        "SELECT p.paper_id, p.title, p.abstract, t.text FROM papers p LEFT JOIN paper_texts t "
        "ON t.paper_id = p.paper_id AND t.status = 'ok' WHERE p.paper_id IN (SELECT unnest(?::VARCHAR[]))",
        [sorted({v for vs in versions.values() for v in vs})])}
    return {pid: "\n".join(own[v] for v in vs if v in own) for pid, vs in versions.items() if pid in own}


#: At most this many of the store's papers join the bundled samples' background (a season of 20,000 papers would
#: take minutes to read for every check; a few thousand papers already tell generic review language apart).
STORE_BACKGROUND_PAPERS = 2000


def store_background(store: Store) -> Background:
    """The bundled samples' background plus the reviews of up to :data:`STORE_BACKGROUND_PAPERS` of the store's
    papers (those not bundled): what counts as generic review language in this store's venues."""
    bundled = bundled_background()
    background = bundled.copy()
    rows = store.rows("SELECT p.venue_id, p.paper_id, v.text FROM papers p JOIN reviews r USING (paper_id) "
                      "JOIN review_versions v USING (review_id) WHERE v.text IS NOT NULL AND p.paper_id IN "
                      "(SELECT paper_id FROM papers ORDER BY paper_id LIMIT ?)", [STORE_BACKGROUND_PAPERS])
    by_paper: dict[str, list[str]] = {}
    for row in rows:
        by_paper.setdefault(f"{row['venue_id']}/{row['paper_id']}", []).append(row["text"])
    for key, texts in by_paper.items():
        background.add(key, texts)
    return background


def copies_elsewhere(store: Store, reviews: Sequence[tuple[str, str]], exclude: Mapping[str, Collection[str]],
                     background: Background, own: Mapping[str, str]) -> list[CopyEvidence | None]:
    """:func:`copy_evidence` of each (paper id, text) against the public reviews of *other* papers that the sketch
    index finds close (:func:`grebench.bench._sketches.similar_reviews`; not the papers in ``exclude[paper id]``:
    the paper and its linked versions), with ``own[paper id]`` and the matched papers' own texts as what may be
    quoted, naming those papers (``elsewhere``); None where the index finds no close review."""
    matched = similar_reviews(store, reviews, exclude)
    quoted = paper_own_texts(store, {p for matches in matched for p, _ in matches})
    found: list[CopyEvidence | None] = []
    for (pid, text), matches in zip(reviews, matched, strict=True):
        if not matches:
            found.append(None)
            continue
        others = sorted({p for p, _ in matches})
        paper = "\n".join([own.get(pid, ""), *(quoted.get(p, "") for p in others)])
        found.append(replace(copy_evidence(text, [t for _, t in matches], paper, background),
                             elsewhere=", ".join(others)))
    return found


def copy_findings(store: Store, reviews: Sequence[tuple[str, str]]) -> list[CopyEvidence]:
    """:func:`copy_evidence` of each (paper id, text) against every version of every review of its paper in the
    store (the paper's own text excepted), and against the reviews of any other paper the sketch index finds close
    (:func:`copies_elsewhere`; the higher score is kept): the copy detector, for imports, uploads, submissions and
    approvals."""
    if not reviews:
        return []
    ids = [pid for pid, _ in reviews]
    public, own = public_review_texts(store, ids), paper_own_texts(store, ids)
    background = store_background(store)
    found = [copy_evidence(text, public.get(pid, ()), own.get(pid, ""), background) for pid, text in reviews]
    # every other public review of the store, through the sketch index: a copy of a review of another paper
    pending = [k for k, finding in enumerate(found) if not finding.copied]
    elsewhere = copies_elsewhere(store, [reviews[k] for k in pending], _with_versions(store, ids), background, own)
    for k, other in zip(pending, elsewhere, strict=True):
        if other is not None and other.score > found[k].score:
            found[k] = other
    return found


def copied_shares(store: Store, reviews: Sequence[tuple[str, str]]) -> list[float]:
    """The detector's score of each (paper id, text) (:func:`copy_findings`); a copy scores :data:`COPY_THRESHOLD`
    or more."""
    return [finding.score for finding in copy_findings(store, reviews)]


def prose_findings(texts: Sequence[str]) -> list[ProseEvidence]:
    """The word-order test of each text (:func:`grebench.bench.prose_evidence`, the word model of the bundled
    reviews): a review must read as text."""
    return [prose_evidence(text) for text in texts]


def refuse_copies(store: Store, reviews: Sequence[ImportedReview], source: str) -> None:
    """:class:`ImportRefused` naming every review that carries its paper's public reviews' content (a detector score
    at or above :data:`COPY_THRESHOLD`): a copy carries no information of its own and would outscore every model; and
    every review that does not read as text (:func:`prose_findings`: words with their order taken away)."""
    findings = copy_findings(store, [(r.paper_id, r.text) for r in reviews])
    prose = prose_findings([r.text for r in reviews])
    bad = [BadLine(review.line, f"review of {review.paper_id} copies its public reviews: {finding.describe()} "
                                f"(limit {COPY_THRESHOLD:.0%})")
           if finding.copied else BadLine(review.line, f"review of {review.paper_id} {reads.describe()}")
           for review, finding, reads in zip(reviews, findings, prose, strict=True)
           if finding.copied or not reads.prose]
    if bad:
        raise ImportRefused(bad[:MAX_KEPT], len(bad), source)


def import_reviews(store: Store, settings: Settings, name: str, data: bytes,
                   options: Mapping[str, Any] | None = None, *, source: str = "import file",
                   now: datetime | None = None, trust_declared: bool = False) -> ImportSummary:
    """Make the reviews of an import file the whole set of candidate ``name`` (kind ``imported``); the summary.

    Metadata: the file's ``_meta`` line, overridden by ``options`` (the same keys; None is absent).  Nothing is
    written unless every line is valid (:class:`ImportRefused`) and the name is free (:class:`CandidateError`).
    Then, in one transaction: the candidate row, new and changed reviews, and the removal of reviews (and their
    scores) of papers the file no longer has.  A review without ``generated_at`` is dated by its first import (it
    existed then), so importing the same file again writes nothing.

    Declared dates are not evidence: unless ``trust_declared`` (the operator vouches for the file: `grebench bench
    import --trust-cutoff`), the model's declared ``cutoff`` is kept only as information (``declared_cutoff`` in the
    candidate's params, the candidate has no cutoff) and every review is dated ``now``, when the server received it
    (a web upload passes its queue time): the reviews count only for papers whose reviews were not public then, and
    are shown in the contaminated band elsewhere.  Reviews that copy the paper's public reviews are refused
    (:func:`refuse_copies`), trusted or not.
    """
    now = now or utcnow()
    check_candidate_name(store, settings, name)
    overrides, reasons = check_meta({k: v for k, v in (options or {}).items() if v is not None}, "option")
    if reasons:
        raise CandidateError(f"candidate {name!r}: {'; '.join(reasons)}")
    papers = public_since(store)  # the earliest public reviews of each paper's work, any version
    parsed = read_import(data, papers, now=now, source=source)
    refuse_copies(store, parsed.reviews, source)
    meta: ModelMeta = {**parsed.meta, **overrides}
    if (cutoff := meta.get("cutoff")) and (released := meta.get("released")) and cutoff > released:
        raise CandidateError(f"candidate {name!r}: cutoff {cutoff} is after released {released}")
    if not trust_declared:
        declared = {k: meta.pop(k) for k in _DECLARED if meta.get(k)}
        meta["declared"] = {k: str(v) for k, v in declared.items()}
        parsed = replace(parsed, reviews=tuple(replace(r, generated_at=None, declared_at=r.generated_at)
                                               for r in parsed.reviews))
    candidate = _candidate_row(name, meta, now)
    old_candidate = next(iter(store.rows("SELECT * FROM candidates WHERE name = ?", [name])), None)
    old = {r["generation_id"]: r for r in store.rows(
        "SELECT generation_id, paper_id, generated_at, flags_json FROM generations WHERE candidate = ?", [name])}
    old_papers = {r["paper_id"] for r in old.values()}
    rows: list[GenerationRow] = []
    write: list[GenerationRow] = []
    added = replaced = 0
    for review in parsed.reviews:
        public_at = papers[review.paper_id]
        row = _generation(name, review, review.generated_at or now, public_at)
        before = old.get(row["generation_id"])
        if before is not None:
            dated_by = json.loads(before["flags_json"] or "{}").get("generated_at")
            if review.generated_at is None and dated_by == "import":
                row = _generation(name, review, before["generated_at"], public_at)  # first import's date
            elif review.generated_at is not None and dated_by == "file" \
                    and before["generated_at"] == review.generated_at:
                pass
            else:
                write.append(row)
                replaced += 1
        else:
            write.append(row)
            if review.paper_id in old_papers:
                replaced += 1
            else:
                added += 1
        rows.append(row)
    keep = {r["generation_id"] for r in rows}
    gone = sorted(set(old) - keep)
    removed = len(old_papers - {r.paper_id for r in parsed.reviews})
    candidate_changed = not _same_candidate(old_candidate, candidate)
    changed = bool(candidate_changed or write or gone)
    if changed:
        with store.transaction() as con:
            if candidate_changed:
                con.execute("DELETE FROM candidates WHERE name = ?", [name])
                con.execute(f"INSERT INTO candidates ({', '.join(candidate)}) VALUES "
                            f"({', '.join('?' * len(candidate))})", list(candidate.values()))
            stale = gone + [r["generation_id"] for r in write]
            if stale:
                con.execute("DELETE FROM generations WHERE generation_id IN (SELECT unnest(?::VARCHAR[]))", [stale])
            if gone:
                con.execute("DELETE FROM scores WHERE candidate = ? AND generation_id IN (SELECT unnest(?::VARCHAR[]))",
                            [name, gone])
            store.insert_rows("generations", COLUMNS, [[r[c] for c in COLUMNS] for r in write])
            kind = "candidate_added" if old_candidate is None else "note"
            con.execute("INSERT INTO board_changes VALUES (?, ?, ?, ?)",
                        [now, kind, name, f"imported reviews ({source}, sha256 {parsed.sha256[:12]}): {added} added, "
                         f"{replaced} replaced, {removed} removed, {len(rows)} in all"])
    return _summary(store, name, meta, parsed, rows, papers, source, changed=changed, added=added,
                    replaced=replaced, removed=removed)


def _summary(store: Store, name: str, meta: ModelMeta, parsed: ImportFile, rows: list[GenerationRow],
             papers: Mapping[str, datetime | None], source: str, *, changed: bool, added: int, replaced: int,
             removed: int) -> ImportSummary:
    """What an import did and how its reviews count (clean / sealed / contaminated), with warnings."""
    cutoff = meta.get("cutoff")
    sealed = sum(bool(r["sealed"]) for r in rows)
    clean = sum(bool(r["sealed"]) or is_clean(cutoff, papers[r["paper_id"]], IMPORTED_KIND) for r in rows)
    undated = sum(json.loads(r["flags_json"])["generated_at"] == "import" for r in rows)
    with_split = int(store.scalar("SELECT count(*) FROM baseline_splits WHERE paper_id IN "
                                  "(SELECT unnest(?::VARCHAR[]))", [[r["paper_id"] for r in rows]]) or 0)
    warnings = []
    if "declared" in meta:
        warnings.append("declared dates are not trusted (the cutoff and generated_at are kept as information): "
                        "reviews count only for papers whose reviews were not public when the file was received"
                        "; the operator may vouch for them with `grebench bench import --trust-cutoff`")
    elif cutoff is None and undated:
        warnings.append(f"{undated} review(s) have no generated_at and the model has no cutoff: they count only "
                        "where imported before the paper's reviews were public; elsewhere they are contaminated "
                        "(give --cutoff or generated_at)")
    if len(rows) - clean:
        warnings.append(f"{len(rows) - clean} of {len(rows)} review(s) are contaminated: left out of the board score")
    held = held_reasons(store, {r["paper_id"] for r in rows})
    for pid, reasons in sorted(held.items()):
        warnings.append(f"paper {pid}: not sealed until the operator decides its possible link "
                        f"(`grebench links --flags`): {'; '.join(reasons)}")
    if with_split < len(rows):
        warnings.append(f"{len(rows) - with_split} review(s) are for papers without a human-baseline split yet "
                        "(fewer than 3 official reviews, or `grebench bench` not run since ingest): not scored")
    return {"candidate": name, "kind": IMPORTED_KIND, "source": source, "sha256": parsed.sha256,
            "reviews": len(rows), "changed": changed, "added": added, "replaced": replaced, "removed": removed,
            "clean": clean, "sealed": sealed, "contaminated": len(rows) - clean, "held_unsealed": held,
            "papers_with_split": with_split, "cutoff": cutoff, "cutoff_trusted": "declared" not in meta,
            "declared": dict(meta.get("declared", {})), "model": meta.get("model"), "warnings": warnings,
            "status": "ok"}

"""The judge interface and the reference judges that need no LLM.

A judge answers one question: of two reviews of the same paper, shown as "one" and "two", which is better, and how
sure is it.  Reference judges are deterministic and labelled ``kind='reference'`` everywhere; they exist so that the
default run has a panel and the qualification exam can be seen working: ``position`` (always the first shown) and
``length`` (the longer review) are the biases the exam must catch, ``overlap`` and ``gem`` are honest.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from grebench.registry import Registry
from grebench.settings import Settings

PREFERENCES = ("one", "two", "tie")
_WORD = re.compile(r"[a-z][a-z0-9\-]+")
# A small list of function words and review boilerplate: "content words" are everything else of 3+ letters.
_STOPWORD_TEXT = """
a about above after again against all also am an and any are as at be because been before being below between both
but by can could did do does doing down during each few for from further had has have having he her here hers him
his how i if in into is it its itself just me more most my no nor not now of off on once only or other our ours out
over own same she should so some such than that the their theirs them then there these they this those through to
too under until up very was we were what when where which while who whom why will with would you your yours
however therefore thus since may might must shall one two three also well many much e.g i.e et al via using use used
paper authors author work approach method methods proposed propose proposes results result section figure table
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())


@dataclass(frozen=True)
class Verdict:
    """A judge's answer for one ordered pair: preference for the shown order, confidence in [0, 1], a reason."""

    preference: str
    confidence: float
    reason: str = ""

    def __post_init__(self) -> None:
        if self.preference not in PREFERENCES:
            raise ValueError(f"preference must be one of {PREFERENCES}, got {self.preference!r}")


@dataclass(frozen=True)
class PaperView:
    """What a judge may read about the paper."""

    paper_id: str
    title: str
    abstract: str = ""
    text: str = ""


@dataclass(frozen=True)
class ReviewView:
    """One review as a judge sees it, plus where it came from (for the gem judge and the family guard)."""

    text: str
    candidate: str | None = None          # None: a review that is no candidate's (exam material)
    generation_id: str | None = None
    source_review_id: str | None = None   # the human review it is (or is derived from), if any
    family: str | None = None
    metrics: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class VenueInputs:
    """What a judge may read of the venue-year it is judging, given to it for that venue-year
    (:meth:`Judge.for_venue`), never at construction: a panel builds its judges once per job and asks the same ones
    on every venue-year.  ``tfidf``: the TF-IDF model fitted on the venue-year's papers (title, abstract, text)."""

    venue_id: str
    tfidf: TfIdf


#: A judge's role in the ``judges`` table: a deterministic reference judge, or an LLM judge (every answer a model
#: call, so it is asked a bounded, seeded part of the pairs).
REFERENCE_JUDGE, LLM_JUDGE = "reference", "llm"


def is_reference(judge: Judge) -> bool:
    """Whether the judge is a deterministic reference judge (no model call)."""
    return judge.kind == REFERENCE_JUDGE


class Judge:
    """The base of every judge: it compares two reviews of one paper.  A judge subclasses it (the panel refuses a
    registered or configured judge that does not: :func:`checked_judge`), and the panel reads these attributes,
    never probing with ``getattr`` (issue 49); a subclass overrides what applies to it.

    ``kind``: its role in the judges table, :data:`REFERENCE_JUDGE` or :data:`LLM_JUDGE`.  ``model``: the model
    behind it (None: no model).  ``judge_kind``: the :data:`JUDGE_KINDS` entry that made it from a ``[[judges]]``
    table (None: a registered judge).  ``needs_gem``: the exam's texts are scored for it before it judges.
    ``calls_made`` / ``cached``: model calls it made and answers it took from the cache, for the run's summary.

    A panel builds its judges once per job (:class:`JudgeContext` holds nothing of one venue-year) and asks each one
    on every venue-year through :meth:`for_venue`.
    """

    name: str
    kind: str
    family: str | None
    description: str
    model: str | None
    judge_kind: str | None
    needs_gem: bool
    calls_made: int
    cached: int

    def __getattr__(self, attr: str) -> Any:
        """The default of a declared attribute the subclass does not set (looked up only when it is missing, so a
        dataclass subclass's own fields and their order are its own)."""
        try:
            return _JUDGE_DEFAULTS[attr]
        except KeyError:
            raise AttributeError(f"{type(self).__name__!r} judge has no attribute {attr!r}") from None

    def for_venue(self, venue: VenueInputs) -> Judge:
        """The judge the panel asks on one venue-year's pairs (exam, votes, debates).  A judge that answers alike on
        every venue-year is that judge itself (the default); one whose answers depend on the venue-year (``overlap``:
        the TF-IDF model of its papers) returns a judge bound to ``venue``, with its name and kind.  The panel reads
        ``calls_made`` and ``cached`` of the judge it built, not of what this returns: a judge that counts model
        calls keeps the default."""
        return self

    def compare(self, paper: PaperView, review_a: ReviewView, review_b: ReviewView) -> Verdict:
        """Which of the two reviews, shown in this order, is better."""
        raise NotImplementedError

    def compare_many(self, items: Sequence[tuple[PaperView, ReviewView, ReviewView]]
                     ) -> Sequence[Verdict | Exception]:
        """:meth:`compare` on each pair, a failure kept as its exception (one failing pair must not stop an exam);
        a judge that can batch (one model call for many pairs) overrides it."""
        answers: list[Verdict | Exception] = []
        for paper, a, b in items:
            try:
                answers.append(self.compare(paper, a, b))
            except Exception as exc:  # kept as the pair's answer
                answers.append(exc)
        return answers


_JUDGE_DEFAULTS: dict[str, object] = {"family": None, "description": "", "model": None, "judge_kind": None,
                                   "needs_gem": False, "calls_made": 0, "cached": 0}


def checked_judge(judge: object, origin: str) -> Judge:
    """``judge`` when it is a :class:`Judge` with a name and a kind; a :class:`TypeError` naming ``origin`` (the
    registration or table that made it) otherwise."""
    if not isinstance(judge, Judge):
        raise TypeError(f"{origin} made a {type(judge).__name__}, which does not subclass grebench.panel.Judge")
    if not getattr(judge, "name", "") or getattr(judge, "kind", None) not in (REFERENCE_JUDGE, LLM_JUDGE):
        raise TypeError(f"{origin}: a judge needs a name and a kind ({REFERENCE_JUDGE!r} or {LLM_JUDGE!r})")
    return judge


def venue_judge(judge: Judge, venue: VenueInputs) -> Judge:
    """``judge.for_venue(venue)``, refused with a :class:`TypeError` when it is not a :class:`Judge` of the same name
    and kind (the panel's tables name the judge it built)."""
    bound = checked_judge(judge.for_venue(venue), f"judge {judge.name!r}.for_venue")
    if (bound.name, bound.kind) != (judge.name, judge.kind):
        raise TypeError(f"judge {judge.name!r}.for_venue made judge {bound.name!r} of kind {bound.kind!r}: a judge "
                        f"bound to a venue keeps its name and kind")
    return bound


def content_words(text: str) -> list[str]:
    """Lower-cased words of 3+ characters that are not function words (shared by judges and machine metrics)."""
    return [w for w in _WORD.findall(text.lower()) if len(w) >= 3 and w not in STOPWORDS]


class TfIdf:
    """TF-IDF vectors with cosine similarity, fitted on a list of documents (numpy-free dict maths suffices here)."""

    def __init__(self, documents: Iterable[str]) -> None:
        df: Counter[str] = Counter()
        n = 0
        for doc in documents:
            df.update(set(content_words(doc)))
            n += 1
        self.n_docs = n
        self.idf = {w: math.log((1 + n) / (1 + c)) + 1.0 for w, c in df.items()}
        self._default_idf = math.log(1 + n) + 1.0

    def vector(self, text: str) -> dict[str, float]:
        """L2-normalised TF-IDF vector (sublinear term frequency)."""
        counts = Counter(content_words(text))
        vec = {w: (1.0 + math.log(c)) * self.idf.get(w, self._default_idf) for w, c in counts.items()}
        norm = math.sqrt(sum(v * v for v in vec.values()))
        return {w: v / norm for w, v in vec.items()} if norm else {}

    def similarities(self, documents: list[str]) -> np.ndarray:
        """Cosine matrix of the documents' :meth:`vector` s (one sparse product instead of n² dict loops)."""
        from scipy.sparse import csr_matrix

        vocab: dict[str, int] = {}
        indptr, indices, values = [0], [], []
        for doc in documents:
            for word, value in self.vector(doc).items():
                indices.append(vocab.setdefault(word, len(vocab)))
                values.append(value)
            indptr.append(len(indices))
        m = csr_matrix((np.asarray(values, dtype=np.float64), np.asarray(indices, dtype=np.int64), indptr),
                       shape=(len(documents), max(1, len(vocab))))
        return np.asarray((m @ m.T).toarray())

    @staticmethod
    def cosine(u: Mapping[str, float], v: Mapping[str, float]) -> float:
        """Cosine of two normalised vectors."""
        if len(u) > len(v):
            u, v = v, u
        return sum(x * v.get(w, 0.0) for w, x in u.items())


def _pick(score_a: float, score_b: float, confidence: float, reason: str) -> Verdict:
    if score_a == score_b:
        return Verdict("tie", 0.0, reason)
    return Verdict("one" if score_a > score_b else "two", max(0.0, min(1.0, confidence)), reason)


class PositionJudge(Judge):
    """Always prefers the review shown first, always equally sure: the position bias the exam must catch."""

    name, kind = "position", REFERENCE_JUDGE
    family: str | None = None
    description = "Reference judge (no LLM): always prefers the first review shown. Biased on purpose."

    def compare(self, paper: PaperView, review_a: ReviewView, review_b: ReviewView) -> Verdict:
        """'one', with a constant confidence."""
        return Verdict("one", 0.5, "the first review shown")


class LengthJudge(Judge):
    """Prefers the longer review; confidence = the relative length gap (verbosity bias made explicit)."""

    name, kind = "length", REFERENCE_JUDGE
    family: str | None = None
    description = "Reference judge (no LLM): prefers the longer review (by words). Biased on purpose."

    def compare(self, paper: PaperView, review_a: ReviewView, review_b: ReviewView) -> Verdict:
        """The review with more words; confidence (long - short) / long."""
        a, b = len(review_a.text.split()), len(review_b.text.split())
        gap = abs(a - b) / max(a, b, 1)
        return _pick(a, b, gap, f"{a} words vs {b} words")


class OverlapJudge(Judge):
    """Prefers the review closer to the paper's own text (TF-IDF cosine over content words).

    The paper's text is title + abstract + extracted PDF text when stored; cosine normalises length on both sides,
    so a longer review gains nothing by being long.  Confidence = the margin relative to the larger similarity.

    The TF-IDF model is the venue-year's (IDF fitted on its papers): the judge the panel builds has none, and
    :meth:`for_venue` gives a judge bound to the model of the venue-year it judges (with its own memos).
    """

    name, kind = "overlap", REFERENCE_JUDGE
    family: str | None = None
    description = ("Reference judge (no LLM): prefers the review whose content words are closer (TF-IDF cosine) to "
                   "the paper's title, abstract and text.")

    def __init__(self, tfidf: TfIdf | None = None) -> None:
        self.tfidf = tfidf
        self._paper_vectors: dict[str, dict[str, float]] = {}
        self._review_vectors: dict[str, dict[str, float]] = {}
        self._similarities: dict[tuple[str, str], float] = {}

    def for_venue(self, venue: VenueInputs) -> OverlapJudge:
        """A judge comparing with the venue-year's TF-IDF model."""
        return OverlapJudge(venue.tfidf)

    def similarity(self, paper: PaperView, review: ReviewView) -> float:
        """Cosine between the review and the paper (vectors and results memoised)."""
        key = (paper.paper_id, review.text)
        known = self._similarities.get(key)
        if known is None:
            known = self._similarities[key] = self._similarity(paper, review)
        return known

    def _similarity(self, paper: PaperView, review: ReviewView) -> float:
        if self.tfidf is None:
            raise RuntimeError("the overlap judge compares with a venue-year's TF-IDF model: ask for_venue(venue)")
        pv = self._paper_vectors.get(paper.paper_id)
        if pv is None:
            pv = self._paper_vectors[paper.paper_id] = self.tfidf.vector(
                "\n".join([paper.title, paper.abstract, paper.text]))
        rv = self._review_vectors.get(review.text)
        if rv is None:
            rv = self._review_vectors[review.text] = self.tfidf.vector(review.text)
        return TfIdf.cosine(pv, rv)

    def compare(self, paper: PaperView, review_a: ReviewView, review_b: ReviewView) -> Verdict:
        """Higher cosine wins."""
        a, b = self.similarity(paper, review_a), self.similarity(paper, review_b)
        return _pick(round(a, 12), round(b, 12), abs(a - b) / max(a, b, 1e-12),
                     f"cosine with the paper {a:.3f} vs {b:.3f}")


GemScores = Callable[[str, ReviewView], Mapping[str, float] | None]


class GemJudge(Judge):
    """Prefers the review with the higher GEM-S against the paper's references.

    ``scores(paper_id, review)`` returns the review's PMI per reference review id (stored ``scores`` rows, or values
    computed for exam texts that are no candidate's).  Both reviews are compared on the references they share,
    minus the reviews themselves (a reference is never scored against itself).  No common reference: a tie with
    confidence 0 (the judge abstains).  Confidence = 1 - exp(-|margin| / 5 nats).
    """

    name, kind = "gem", REFERENCE_JUDGE
    needs_gem = True  # the exam's texts are scored for it before it judges
    family: str | None = None
    description = ("Reference judge (no LLM): prefers the review with the higher GEM-S (GEM when no GEM-S) against "
                   "the paper's human references.")

    def __init__(self, scores: GemScores, scale_nats: float = 5.0) -> None:
        self.scores = scores
        self.scale = scale_nats

    def compare(self, paper: PaperView, review_a: ReviewView, review_b: ReviewView) -> Verdict:
        """Mean PMI over the common references decides."""
        sa = self.scores(paper.paper_id, review_a) or {}
        sb = self.scores(paper.paper_id, review_b) or {}
        own = {review_a.source_review_id, review_b.source_review_id}
        common = sorted((set(sa) & set(sb)) - own)
        if not common:
            return Verdict("tie", 0.0, "no GEM score for both reviews on a common reference")
        a = sum(sa[r] for r in common) / len(common)
        b = sum(sb[r] for r in common) / len(common)
        return _pick(round(a, 9), round(b, 9), 1.0 - math.exp(-abs(a - b) / self.scale),
                     f"GEM {a:.2f} vs {b:.2f} over {len(common)} reference(s)")


@dataclass(frozen=True)
class JudgeContext:
    """What a judge factory may use, once per job: settings, the shared LLM client, GEM scores, the job's local
    judges and the local servers.  Nothing of one venue-year: a judge reads that in :meth:`Judge.for_venue`."""

    settings: Settings
    client: Any
    gem: GemScores
    #: the job's local judges (catalogue names or checkpoint paths: the resolved run's ``setup.local_judges``)
    local_judges: tuple[str, ...]
    servers: Any = None  # local model servers shared by the run's local judges (``grebench.runtime.LocalServers``)


JudgeFactory = Callable[[JudgeContext], Judge]


class JudgeKind(Protocol):
    """A kind of configured judge (``[[judges]]`` tables): how one table becomes a judge."""

    name: str

    def parse(self, raw: dict[str, Any], where: str, context: JudgeContext) -> Judge:
        """Validate one table (``where`` names it in errors) into a judge."""
        ...


#: Judges on every panel (the reference judges need no LLM; plugins may add more).
JUDGES: Registry[JudgeFactory] = Registry("judge")


@dataclass(frozen=True)
class JudgeKindInfo:
    """The facts of a kind of configured judge.  ``debates``: its judges take part in debates (they have a
    ``debate`` method)."""

    name: str
    debates: bool = False


#: Kinds of configured ``[[judges]]`` tables (``llm`` is registered by :mod:`grebench.panel._llm_judge`); an entry's
#: facts are a :class:`JudgeKindInfo`.
JUDGE_KINDS: Registry[JudgeKind] = Registry("judge kind", builtins=("grebench.panel._llm_judge",
                                                                           "grebench.panel._local_judge"),
                                            facts=JudgeKindInfo)
JUDGES.add("position", lambda ctx: PositionJudge(), summary=PositionJudge.description)
JUDGES.add("length", lambda ctx: LengthJudge(), summary=LengthJudge.description)
JUDGES.add("overlap", lambda ctx: OverlapJudge(), summary=OverlapJudge.description)
JUDGES.add("gem", lambda ctx: GemJudge(ctx.gem), summary=GemJudge.description)
REFERENCE_JUDGES = ("position", "length", "overlap", "gem")


def can_debate(judge: Judge) -> bool:
    """Whether a judge takes part in debates: the kind that made it is registered with ``debates=True`` (meta of
    :data:`JUDGE_KINDS`; the judge names its kind in ``judge_kind``) and it has a ``debate`` method."""
    kind = judge.judge_kind
    return kind is not None and kind in JUDGE_KINDS and JUDGE_KINDS.get(kind).facts(JudgeKindInfo).debates


def needs_gem_scores(judges: Iterable[Judge]) -> bool:
    """Whether a judge reads GEM scores of the exam's texts (a judge says so with ``needs_gem = True``)."""
    return any(j.needs_gem for j in judges)

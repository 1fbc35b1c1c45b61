"""Copies of public reviews: how much of another review's own content a text carries.

A rule about information, not about any known text.  A review's *own content* is what only it says: the pairs of
nearby words it uses (any two word stems at most :data:`REF_SPAN` words apart, order ignored) that are not in the
paper (title, abstract, extracted text, linked earlier versions': quoting the paper is not copying), not in another
public review of the paper (what two reviewers both wrote is the paper's), and not common in reviews of *other*
papers (:class:`Background`: generic review language such as "the authors" or "novelty limited" is nobody's
content).  A text carries a pair when it holds both words within :data:`TEXT_SPAN` words, and a review word counts
only inside a *run* of carried pairs (:func:`_carried`): a copy keeps runs along its diagonal, two reviews naming
one term share an isolated pair.  The score is the largest of

* **coverage** — the largest share of one public review's own words that the text carries;
* **the text's side** — the share of the text's own words that sit in runs of the public reviews (a copy with
  words deleted, or a part of one, is all copy);
* **pooled / 2** — the coverages of all the paper's public reviews (versions of one review count once) added up:
  splicing or mixing several reviews adds up instead of splitting;

and 0 when fewer than :data:`MIN_COPIED_PAIRS` own pairs are shared (too little to tell a copy from two reviewers
making one point).

Why this survives edits that keep the information (measured per transformation and strength by
``benchmarks/copy_detection.py``, published in docs/security.md):

* inserted words (fillers at any rate up to one every word): a pair :data:`REF_SPAN` apart in the review stays
  within :data:`TEXT_SPAN` in the text, so coverage is unchanged;
* deleted words: what is left is all the review's (the text's side);
* reorderings (adjacent swaps, shuffled clauses or sentences): pairs are unordered and local;
* synonym and spelling substitution: a pair survives when neither word changed; stems fold inflections;
* case, punctuation, whitespace, zero-width and look-alike characters: text is folded by NFKC and
  Unicode's confusables table (Cyrillic, Greek, full-width look-alikes become the ASCII letters they look like),
  then :func:`anyascii.anyascii`, punctuation inside
  a word is dropped (``m.e.t-h_o d`` style games), and runs of single letters are joined back into one word.

Measured (``benchmarks/copy_detection.py``): 10 of the 2,391 real reviews of both bundled samples score at or above
:data:`COPY_THRESHOLD` against the other reviews of their paper (0.42 %; four are two pairs of near-identical
reviews); fillers at any rate, deletions up to 50 %, swaps, shuffles, mixes, splices, look-alikes and their
combinations are caught at 97.5–100 %; replacing or misspelling half of a review's words, 87–92 %.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources

import numpy as np
import snowballstemmer
from anyascii import anyascii

from grebench.bench._orderfree import LONG_PASSAGE, NONE, OrderFree, grams, order_free

#: Pairs of a public review: its words at most this far apart.
REF_SPAN = 3
#: Pairs of the checked text: wider, so that up to two words inserted into each gap keep the review's pairs.
TEXT_SPAN = 8
#: A pair used in the reviews of at least this many *other* papers is generic review language.
GENERIC_PAPERS = 2
#: A public review with fewer own pairs than this says too little of its own to be copied measurably.
MIN_OWN_PAIRS = 8
#: A text that shares fewer of the public reviews' own pairs than this (two sentences or so), or than half of the
#: longest review's own pairs when that is less (but never fewer than MIN_OWN_PAIRS), is not a copy: too little to
#: tell from two reviewers making the same point.
MIN_COPIED_PAIRS = 24
#: A run (see :func:`_carried`): carried pairs within RUN_REVIEW words in the review and RUN_TEXT words in the
#: text that cover at least RUN_WORDS review words.
RUN_REVIEW = 10
RUN_TEXT = 24
RUN_WORDS = 5
#: The detector's score at or above which a text is a copy (see the module docstring).
COPY_THRESHOLD = 0.2

# one mark of these between two letters (``m.e.t-h_o.d``, ``wo'rd``, ``w*o~r^d``) is a game or a compound; any
# other mark, or a run of them (``</a><b>``, ``x, y``), separates words
_KEEP_IN_WORD = re.compile(r"(?<=[a-z0-9])[.\-_'`*~^|](?=[a-z0-9])")
_TOKEN = re.compile(r"[a-z0-9]+")
_STEMMER = snowballstemmer.stemmer("english")

Pair = tuple[str, str]


@lru_cache(maxsize=1)
def _lookalikes() -> dict[int, str]:
    """Every non-ASCII character that Unicode's confusables list says looks like an ASCII letter or digit, mapped to
    it (Cyrillic ``р`` -> ``p``, not its sound ``r``), from the data that ships with ``confusable_homoglyphs``."""
    data = json.loads((resources.files("confusable_homoglyphs") / "confusables.json").read_text("utf-8"))
    table: dict[int, str] = {}
    for char, glyphs in data.items():
        if len(char) == 1 and ord(char) > 127:
            ascii_glyphs = [g["c"] for g in glyphs if len(g["c"]) == 1 and g["c"].isascii() and g["c"].isalnum()]
            if ascii_glyphs:  # of several (``І`` looks like ``I`` and ``l``), one of the same case
                same_case = [g for g in ascii_glyphs if g.isupper() == char.isupper()]
                table[ord(char)] = (same_case or ascii_glyphs)[0]
    return table


def fold(text: str) -> str:
    """The text as the detector reads it: NFKC, look-alikes by shape, then ASCII, lower case, a mark inside a word
    dropped."""
    ascii_text = anyascii(unicodedata.normalize("NFKC", text).translate(_lookalikes())).lower()
    return _KEEP_IN_WORD.sub("", ascii_text)


def words_of(text: str) -> list[str]:
    """The text's words as the detector reads them (:func:`fold`, runs of single letters joined): what evidence
    shows."""
    return _join_letters(_TOKEN.findall(fold(text)))


def _join_letters(words: list[str]) -> list[str]:
    """Runs of two or more single letters joined into one word (``m e t h o d`` -> ``method``)."""
    out: list[str] = []
    run: list[str] = []
    for word in [*words, ""]:
        if len(word) == 1 and word.isalpha():
            run.append(word)
            continue
        if len(run) >= 2:
            out.append("".join(run))
        else:
            out.extend(run)
        run = []
        if word:
            out.append(word)
    return out


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    return str(_STEMMER.stemWord(word))


def stems(text: str) -> list[str]:
    """The text's words (:func:`words_of`), stemmed; ``l`` read as ``i``, since look-alike tables map ``I`` and
    ``l`` to each other."""
    return [_stem(w.replace("l", "i")) for w in words_of(text)]


def pairs(words: Sequence[str], span: int) -> set[Pair]:
    """Unordered pairs of different words at most ``span`` apart."""
    out: set[Pair] = set()
    for i, a in enumerate(words):
        for b in words[i + 1:i + 1 + span]:
            if a != b:
                out.add((a, b) if a < b else (b, a))
    return out


@dataclass
class Background:
    """How many papers' reviews use each pair: what is generic review language rather than one review's content.

    Built from reviews grouped by paper (:meth:`add`); a paper's own reviews are subtracted when that paper is
    checked, so a pair counts as generic only when reviews of :data:`GENERIC_PAPERS` *other* papers use it.
    """

    papers: Counter[Pair] = field(default_factory=Counter)
    seen: set[str] = field(default_factory=set)
    #: How many papers' reviews use each word stem (the bag's rarity, :mod:`grebench.bench._orderfree`).
    words: Counter[str] = field(default_factory=Counter)
    #: Each added paper's passage hashes (:func:`grebench.bench._orderfree.grams`), counted on first use.
    gram_lists: list[np.ndarray] = field(default_factory=list)
    _common: dict[int, int] | None = None

    def add(self, key: str, texts: Iterable[str]) -> None:
        """Count the pairs, stems and passages of one paper's reviews (once per paper: a key seen before is
        skipped)."""
        if key in self.seen:
            return
        self.seen.add(key)
        found: set[Pair] = set()
        used: set[str] = set()
        passages: set[int] = set()
        for text in texts:
            words = stems(text)
            found |= pairs(words, REF_SPAN)
            used.update(words)
            passages.update(grams(words))
        self.papers.update(found)
        self.words.update(used)
        self.gram_lists.append(np.fromiter(passages, dtype=np.int64, count=len(passages)))
        self._common = None

    def copy(self) -> Background:
        """An independent copy (the bundled background is shared and extended per store)."""
        return Background(self.papers.copy(), set(self.seen), self.words.copy(), list(self.gram_lists))

    def common_grams(self) -> dict[int, int]:
        """Passage hashes used by the reviews of two papers or more, and by how many."""
        if self._common is None:
            every = np.concatenate(self.gram_lists) if self.gram_lists else np.zeros(0, np.int64)
            values, counts = np.unique(every, return_counts=True)
            keep = counts >= 2
            self._common = dict(zip(values[keep].tolist(), counts[keep].tolist(), strict=True))
        return self._common

    def generic(self, pair: Pair, own: set[Pair]) -> bool:
        """Whether ``pair`` is used by the reviews of enough other papers (``own``: the checked paper's pairs)."""
        return self.papers.get(pair, 0) - (pair in own) >= GENERIC_PAPERS


@lru_cache(maxsize=1)
def bundled_background() -> Background:
    """The background of the bundled samples' reviews (ICLR 2020 and 2026, about 700 papers), built once."""
    from grebench.ingest import BUNDLED, bundled_source
    from grebench.store import PaperRecord

    background = Background()
    for name in BUNDLED:
        for paper in bundled_source(name).fetch():
            if isinstance(paper, PaperRecord):  # a SourceFailure has no reviews
                background.add(f"{paper.venue_id}/{paper.paper_id}", [r.text for r in paper.reviews])
    return background


@dataclass(frozen=True)
class CopyEvidence:
    """What the detector found in one text: its score and why.

    ``score`` is the largest of the runs' score (coverage, the text's side, pooled / 2) and the order-free evidence
    (:class:`~grebench.bench._orderfree.OrderFree`) scaled so that its own threshold falls on :data:`COPY_THRESHOLD`:
    one number, one threshold, whichever evidence reached it."""

    score: float
    coverage: float
    pooled: float
    reference: int | None
    copied_pairs: int
    passages: tuple[str, ...] = ()
    order_free: OrderFree = NONE
    elsewhere: str = ""  # the other paper(s) whose reviews it copies, found through the sketch index

    @property
    def copied(self) -> bool:
        """Whether the score reaches :data:`COPY_THRESHOLD`."""
        return self.score >= COPY_THRESHOLD

    def describe(self) -> str:
        """One line for a refusal or a hold: the score, its parts and a copied passage."""
        where = "" if self.reference is None else f" (most from public review #{self.reference + 1})"
        shown = f'; e.g. "{self.passages[0]}"' if self.passages else ""
        free = self.order_free
        extra = ""
        if free.bag:
            whose = ("all public reviews pooled" if free.bag_reference is None
                     else f"public review #{free.bag_reference + 1}")
            extra += f", in any order {free.bag:.0%} of the rare words of {whose} ({free.bag_shared} words)"
        if free.verbatim:
            extra += f", {free.verbatim} words in verbatim passages of {free.verbatim_reviews} review(s)"
        if free.long_passages:
            extra += (f", {free.long_passages} in passages of {LONG_PASSAGE} words or more (the longest "
                      f"{free.longest_passage})")
        if self.elsewhere:
            where += f" of paper {self.elsewhere}"
        return (f"carries {self.score:.0%} of a review's own content (coverage {self.coverage:.0%} of one review"
                f"{where}, pooled {self.pooled:.0%}, {self.copied_pairs} word pairs{extra}){shown}")


NOTHING = CopyEvidence(0.0, 0.0, 0.0, None, 0)


def _passages(words: list[str], shown: list[str], hits: set[Pair], limit: int = 2,
              width: int = 12) -> tuple[str, ...]:
    """Up to ``limit`` stretches of the text densest in copied pairs (``words``: its stems; ``shown``: the same
    words as read, for a person)."""
    marks = [0] * len(words)
    for i, a in enumerate(words):
        for j in range(i + 1, min(len(words), i + 1 + TEXT_SPAN)):
            b = words[j]
            if ((a, b) if a < b else (b, a)) in hits:
                marks[i] = marks[j] = 1
    out: list[str] = []
    start = 0
    while len(out) < limit and start < len(words):
        best = max(range(start, max(start + 1, len(words) - width + 1)), key=lambda s: sum(marks[s:s + width]))
        if sum(marks[best:best + width]) < width // 2:
            break
        out.append(" ".join(shown[best:best + width]))
        start = best + width
    return tuple(out)


def _positions(words: Sequence[str], span: int) -> dict[Pair, list[int]]:
    """Where each pair of different words at most ``span`` apart starts in ``words``."""
    out: dict[Pair, list[int]] = {}
    for i, a in enumerate(words):
        for b in words[i + 1:i + 1 + span]:
            if a != b:
                out.setdefault((a, b) if a < b else (b, a), []).append(i)
    return out


def _carried(words: list[str], own: set[Pair], held: dict[Pair, list[int]]) -> tuple[int, int, set[Pair]]:
    """Of a review's word positions that take part in one of its own pairs: how many, how many of them the text
    carries *in a run*, and the pairs carried.

    A carried pair is a point (its position in the review, its position in the text).  A review word counts as
    carried when the points within :data:`RUN_REVIEW` words of it in the review and :data:`RUN_TEXT` words of it in
    the text cover at least :data:`RUN_WORDS` review words: a copy, however edited, keeps such runs along its
    diagonal; two reviews that name the same term share one isolated pair.
    """
    part: set[int] = set()
    points: list[tuple[int, int, int]] = []  # (review position, text position, the other review position)
    hit: set[Pair] = set()
    for i, a in enumerate(words):
        for j in range(i + 1, min(len(words), i + 1 + REF_SPAN)):
            b = words[j]
            pair = (a, b) if a < b else (b, a)
            if a == b or pair not in own:
                continue
            part.update((i, j))
            for p in held.get(pair, ())[:4]:
                points.append((i, p, j))
                hit.add(pair)
    points.sort()
    carried: set[int] = set()
    lo = 0
    for i, p, _ in points:
        while points[lo][0] < i - RUN_REVIEW:
            lo += 1
        near: set[int] = set()
        for i2, p2, j2 in points[lo:]:
            if i2 > i + RUN_REVIEW:
                break
            if abs(p2 - p) <= RUN_TEXT:
                near.update((i2, j2))
        if len(near) >= RUN_WORDS:
            carried.update(near)
    return len(part), len(carried & part), hit


@dataclass
class _Review:
    """One public review: its versions (as stems), the union of their pairs, and the index of its first version."""

    index: int
    versions: list[list[str]]
    pairs: set[Pair]


def _group_versions(texts: list[list[str]]) -> list[_Review]:
    """Versions of one review (texts sharing half their pairs) grouped: a review counts once, whatever its edits."""
    out: list[_Review] = []
    for i, words in enumerate(texts):
        found = pairs(words, REF_SPAN)
        for review in out:
            if len(review.pairs & found) >= 0.5 * min(len(review.pairs), len(found) or 1):
                review.versions.append(words)
                review.pairs |= found
                break
        else:
            out.append(_Review(i, [words], found))
    return out


def copy_evidence(text: str, public: Iterable[str], paper: str = "",
                  background: Background | None = None) -> CopyEvidence:
    """How much of the ``public`` reviews' own content ``text`` carries (``paper``: what anyone may quote)."""
    public = [p for p in public if p]
    words = stems(text)
    if not public or len(words) < 2:
        return NOTHING
    background = bundled_background() if background is None else background
    paper_pairs = pairs(stems(paper), TEXT_SPAN) if paper else set()
    reviews = _group_versions([stems(p) for p in public])
    every: set[Pair] = set().union(*(r.pairs for r in reviews))
    held = _positions(words, TEXT_SPAN)
    best, reference, union, pooled, largest = 0.0, None, set(), 0.0, 0
    for k, review in enumerate(reviews):
        others = set().union(*(r.pairs for j, r in enumerate(reviews) if j != k))
        own = {p for p in review.pairs - others - paper_pairs if not background.generic(p, every)}
        if len(own) < MIN_OWN_PAIRS:
            continue
        largest = max(largest, len(own))
        share = 0.0
        for version in review.versions:
            total, kept, hit = _carried(version, own, held)
            union |= hit
            share = max(share, kept / total if total else 0.0)
        pooled += share
        if share > best:
            best, reference = share, review.index
    # the text's side: how much of what the text says on its own (not the paper, not what two reviewers both said,
    # not generic) it holds in runs of the public reviews: a copy with words deleted, or a part of one, is all of it
    said_twice = {p for p in every if sum(p in r.pairs for r in reviews) >= 2}
    text_own = {p for p in pairs(words, REF_SPAN) - paper_pairs - said_twice if not background.generic(p, every)}
    sources: dict[Pair, list[int]] = {}
    for k, review in enumerate(reviews):  # reviews far apart, so that no run spans two of them
        for pair, starts in _positions(review.versions[-1], TEXT_SPAN).items():
            sources.setdefault(pair, []).extend(k * 1_000_000 + s for s in starts)
    total, kept, hit = _carried(words, text_own, sources) if len(text_own) >= MIN_OWN_PAIRS else (0, 0, set())
    own_share = kept / total if total else 0.0
    union |= hit
    # too little shared to tell a copy from two reviewers making one point (see MIN_COPIED_PAIRS)
    enough = max(MIN_OWN_PAIRS, min(MIN_COPIED_PAIRS, largest / 2))
    score = max(best, own_share, pooled / 2) if len(union) >= enough else 0.0
    free = order_free(words, [r.versions for r in reviews], stems(paper) if paper else [],
                      background.words, len(background.seen), background.common_grams())
    score = max(score, COPY_THRESHOLD * free.strength)
    return CopyEvidence(round(score, 4), round(best, 4), round(pooled, 4), reference, len(union),
                        _passages(words, words_of(text), union) if score >= COPY_THRESHOLD else (), free)


def copy_share(text: str, public: Iterable[str], paper: str = "") -> float:
    """The detector's score of ``text`` against the ``public`` reviews (:func:`copy_evidence`)."""
    return copy_evidence(text, public, paper).score

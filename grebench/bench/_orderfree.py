"""Evidence of a copy that word order cannot hide, and passages copied whole.

The pair-and-run detector (:mod:`grebench.bench._copies`) reads a copy along its diagonal: it survives fillers,
deletions, swaps and substitutions, but not a text whose words were moved far apart (written out in interleaved rows,
shuffled, or spread among filler).  Such a text still carries the review's *bag* of words, and a review's words that
are rare in reviews of other papers and absent from the paper itself are what its reviewer alone said.  Two
evidences here, both about information, not about any text:

* **the bag** — a public review's *own rare words* are its word stems (three letters or more, not a number) used in
  the reviews of at most :data:`RARE_SHARE` of the other papers (:class:`~grebench.bench._copies.Background`), not in
  the paper (title, abstract, extracted text) and not in another public review of the paper (what two reviewers both
  wrote is the paper's).  Each is weighted by its rarity (``log(N / df)``).  The bag score is the largest of: the
  weighted share of one review's own rare words the text holds (reviews with at least :data:`MIN_BAG_WORDS` of them),
  and the same share over all the paper's reviews pooled (every review's rare words, those two reviewers share
  included: a copy of all of them carries all of them).  It needs :data:`MIN_BAG_SHARED` shared words.  Order does not
  enter, so rows, shuffles and spreading change nothing; dropping words lowers the share only as much as the
  information dropped.
* **verbatim passages** — text words inside a run of :data:`SPAN` consecutive word stems that a public review also has,
  that the paper does not have and that reviews of :data:`~grebench.bench._copies.GENERIC_PAPERS` other papers do not
  use ("the paper is well written and easy to follow" is everyone's).  A partial copy placed after unrelated text
  (an honest-looking review of another paper, then a few sentences of each public review) is diluted for every share,
  but its sentences are passages.

Thresholds were set on pairs of honest reviews of the same paper (every review of both bundled samples against the
other reviews of its paper, which share about a third of their points): the bag score's largest honest value is
0.55 (pooled 0.46), :data:`BAG_THRESHOLD` is 0.7; verbatim passages cover at most 24 words of 99.5 % of honest
reviews and at most 42 of all but the four near-identical ones (two pairs of reviews sharing most of their text);
no honest review holds 30 words of passages from three other reviews.  :data:`SPAN_WORDS` is 48, or
:data:`SPAN_WORDS_SPREAD` (30) from :data:`SPAN_REVIEWS` (3) different reviews: a sentence of each.

A copied sentence is a *long* passage: the copied words sit in runs of shared stems, where what two honest
reviewers share is short (a term, a phrase of the paper's body that the abstract does not have).  So the words in
passages over :data:`LONG_PASSAGE` (10) words or more count on their own, a passage running on across up to
:data:`LONG_GAP` (3) words that are not shared (a word inserted every few words does not cut a copied sentence):
on the same honest pairs (but the ten reviews the rules above already flag, near-identical ones among them) they
reach 27 words, and the longest passage 24, with or without the gaps; :data:`LONG_PASSAGE_WORDS` is 32 and
:data:`LONGEST_PASSAGE` 28, a margin of a few words over the honest maxima, so that one copied sentence of 28
words, or two of 16, is a copy however much text surrounds it.  Measured by ``benchmarks/copy_detection.py``
(docs/security.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

#: A stem used in the reviews of more than this share of other papers is common, nobody's own.
RARE_SHARE = 0.05
#: A review with fewer own rare words than this is not judged on its own by its bag (too few to tell).
MIN_BAG_WORDS = 12
#: A text sharing fewer own rare words than this with the public reviews holds no bag of theirs.
MIN_BAG_SHARED = 10
#: The bag score at or above which a text carries a review's (or all reviews') own words whatever their order.
BAG_THRESHOLD = 0.7
#: A verbatim passage: this many consecutive word stems shared with a public review.
SPAN = 8
#: Text words in verbatim passages at or above which a text is a copy ...
SPAN_WORDS = 48
#: ... or at or above this many when they come from at least SPAN_REVIEWS different reviews (a sentence of each).
SPAN_WORDS_SPREAD = 30
SPAN_REVIEWS = 3
#: A long passage: shared stems over this many words or more (runs of :data:`SPAN`-stem passages, at most
#: :data:`LONG_GAP` words apart: a word or three inserted every few words do not cut it).
LONG_PASSAGE = 10
LONG_GAP = 3
#: Text words in long passages at or above which a text is a copy ...
LONG_PASSAGE_WORDS = 32
#: ... or this many in one passage.
LONGEST_PASSAGE = 28


@dataclass(frozen=True)
class OrderFree:
    """The order-free evidence of one text: its bag score and the review it is closest to, how many own rare words
    it shares, the words in verbatim passages (and from how many reviews), those in passages over
    :data:`LONG_PASSAGE` words or more and the most in one passage."""

    bag: float = 0.0
    bag_reference: int | None = None
    bag_shared: int = 0
    verbatim: int = 0
    verbatim_reviews: int = 0
    long_passages: int = 0
    longest_passage: int = 0

    @property
    def strength(self) -> float:
        """How far the evidence goes toward a copy: 1.0 at either threshold, more above."""
        spans = self.verbatim / SPAN_WORDS
        if self.verbatim_reviews >= SPAN_REVIEWS:
            spans = max(spans, self.verbatim / SPAN_WORDS_SPREAD)
        long = max(self.long_passages / LONG_PASSAGE_WORDS, self.longest_passage / LONGEST_PASSAGE)
        return max(self.bag / BAG_THRESHOLD, spans, long)


NONE = OrderFree()


def grams(words: Sequence[str], n: int = SPAN) -> list[int]:
    """Hashes of the runs of ``n`` consecutive words (this process's hash: only compared within it)."""
    return [hash(tuple(words[i:i + n])) for i in range(len(words) - n + 1)]


def rare_words(words: Sequence[str], df: dict[str, int], own: set[str], papers: int, paper: set[str]) -> set[str]:
    """The stems of ``words`` that are rare in other papers' reviews (``own``: the checked paper's review stems,
    subtracted from the counts) and not in the paper."""
    limit = RARE_SHARE * max(papers, 1)
    return {w for w in words if len(w) >= 3 and not w.isdigit() and w not in paper
            and df.get(w, 0) - (w in own) <= limit}


def order_free(words: list[str], reviews: list[list[list[str]]], paper: list[str], df: dict[str, int],
               papers: int, common_grams: dict[int, int]) -> OrderFree:
    """The order-free evidence of the text ``words`` (stems) against the public ``reviews`` (each: its versions'
    stems), ``paper`` (the stems anyone may quote); ``df``/``papers``: how many papers' reviews use each stem, of
    how many; ``common_grams``: how many papers' reviews hold each :func:`grams` hash used by two or more."""
    if not reviews or not words:
        return NONE
    own_stems = {w for review in reviews for version in review for w in version}
    paper_set = set(paper)
    text = set(words)

    def weight(word: str) -> float:
        return math.log((papers + 1) / (df.get(word, 0) - (word in own_stems) + 1))

    bags = [rare_words([w for version in review for w in version], df, own_stems, papers, paper_set)
            for review in reviews]
    best, reference, shared = 0.0, None, 0
    pooled: set[str] = set().union(*bags)
    for k, found in enumerate(bags):
        own = found - set().union(*(b for j, b in enumerate(bags) if j != k))
        hit = own & text
        if len(own) < MIN_BAG_WORDS or len(hit) < MIN_BAG_SHARED:
            continue
        share = sum(map(weight, hit)) / sum(map(weight, own))
        if share > best:
            best, reference, shared = share, k, len(hit)
    hit = pooled & text
    if len(hit) >= MIN_BAG_SHARED:
        share = sum(map(weight, hit)) / sum(map(weight, pooled))
        if share > best:
            best, reference, shared = share, None, len(hit)
    covered, sources = _verbatim(words, reviews, set(grams(paper)), common_grams)
    runs = _runs(covered)
    return OrderFree(round(best, 4), reference, shared, len(covered), sources,
                     sum(held for held, extent in runs if extent >= LONG_PASSAGE),
                     max((held for held, _ in runs), default=0))


def _runs(positions: set[int]) -> list[tuple[int, int]]:
    """The passages of ``positions``: runs in which at most :data:`LONG_GAP` positions are missing between two
    held ones, each as (positions held, extent from its first to its last)."""
    out: list[tuple[int, int]] = []  # (held, extent)
    last = None
    for i in sorted(positions):
        if last is not None and i - last <= LONG_GAP + 1:
            held, extent = out[-1]
            out[-1] = (held + 1, extent + i - last)
        else:
            out.append((1, 1))
        last = i
    return out


def _verbatim(words: list[str], reviews: list[list[list[str]]], paper: set[int],
              common: dict[int, int]) -> tuple[set[int], int]:
    """The positions of the text words inside passages of :data:`SPAN` stems shared with a review (not the
    paper's, not generic), and from how many reviews."""
    from grebench.bench._copies import GENERIC_PAPERS

    text = grams(words)
    covered: set[int] = set()
    sources = 0
    own = {g for review in reviews for version in review for g in grams(version)}
    for review in reviews:
        held = {g for version in review for g in grams(version)}
        hit: set[int] = set()
        for i, g in enumerate(text):
            if g in held and g not in paper and common.get(g, 0) - (g in own) < GENERIC_PAPERS:
                hit.update(range(i, i + SPAN))
        sources += len(hit) >= SPAN
        covered |= hit
    return covered, sources

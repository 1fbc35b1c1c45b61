"""Prose required: a review must read as text.

A copy can hide its word order (words written out in interleaved rows, shuffled, spread among filler), and the
information it carries still scores under GEM-S.  Reviews are prose, and prose is *predictable from word order*:
in English the previous word tells a lot about the next ("of the", "the authors", "in the paper").  The test is the
**word-order gain**: the mean log-probability per token of the text under a bigram model of review language, minus
its mean log-probability under the unigram model (the same counts, order ignored), in nats per token.  Rare or
technical words cost the same in both and cancel, so a terse or technical review is not penalised for its
vocabulary; only order counts.  A shuffled or transposed text gains nothing from order (≤ 0.11 nats on every
such text of ``benchmarks/copy_detection.py``); human reviews gain 0.31-2.0 (median 1.25; each scored with its own
counts left out of the model, so it is as new to the model as a candidate's review).

The model is fitted on the reviews of the bundled samples (both, about 2,400 reviews) with Witten-Bell
interpolation; tokens are the detector's folded words (:func:`grebench.bench._copies.fold`: look-alike letters and
zero-width characters do not make prose out of salad, nor salad out of prose) and punctuation.  A text is refused
when its gain is below :func:`threshold` for its length: :data:`MIN_GAIN` for a long text, lower for a short one (a
mean over few tokens varies more); a text of fewer than :data:`MIN_TOKENS`
tokens is not judged (it carries too little to matter).  The evaluation LM can stand in for the word model
(``prose_estimator``: :mod:`grebench.submissions._prose`), compared with the human reviews' distribution under it.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from grebench.bench._copies import fold

#: Words (letters or digits) and the punctuation that structures sentences.
_TOKEN = re.compile(r"[a-z]+|[0-9]+|[.,;:!?()]")
START = "<s>"
#: A text with fewer tokens than this is not judged.
MIN_TOKENS = 12
#: The least word-order gain (nats per token) of a long text that reads as text.  Human reviews: 0.1st percentile
#: 0.47, minimum 0.31 (2,391 reviews, each left out of the model); shuffled, transposed or spread copies in
#: ``benchmarks/copy_detection.py``: at most 0.11.
MIN_GAIN = 0.2
#: A short text's mean varies more: the bar is ``min(MIN_GAIN, SHORT_TOP - SHORT_SLACK / sqrt(tokens))``, 0.1 below
#: the 0.1st percentile of human review passages of that length (windows of 12-80 tokens of every bundled review,
#: which follow 0.8 - 6.5 / sqrt(tokens)).
SHORT_TOP = 0.7
SHORT_SLACK = 6.5


def tokens(text: str) -> list[str]:
    """The text's tokens as the word model reads them (folded words and punctuation), after a start token."""
    return [START, *_TOKEN.findall(fold(text))]


@dataclass
class WordOrderModel:
    """Unigram and bigram counts of review language (Witten-Bell interpolated); see the module docstring."""

    uni: Counter[str] = field(default_factory=Counter)
    bi: Counter[tuple[str, str]] = field(default_factory=Counter)
    ctx: Counter[str] = field(default_factory=Counter)
    followers: Counter[str] = field(default_factory=Counter)

    def add(self, texts: Iterable[str]) -> None:
        """Count these texts."""
        for text in texts:
            toks = tokens(text)
            self.uni.update(toks[1:])
            for pair in itertools.pairwise(toks):
                if self.bi[pair] == 0:
                    self.followers[pair[0]] += 1
                self.bi[pair] += 1
                self.ctx[pair[0]] += 1

    def gain(self, toks: Sequence[str], counted: Sequence[str] | None = None) -> float:
        """Mean log-probability gain per token of order (bigram over unigram) for ``toks`` (:func:`tokens`);
        ``counted``: the tokens of a text the model counted, whose counts are subtracted first (calibration: a human
        review scored as new to the model)."""
        own = counted or []
        own_uni: Counter[str] = Counter(own[1:])
        own_bi: Counter[tuple[str, str]] = Counter(itertools.pairwise(own))
        own_ctx: Counter[str] = Counter(own[:-1])
        own_followers: Counter[str] = Counter(a for (a, b), n in own_bi.items() if self.bi[(a, b)] - n <= 0)
        total = sum(self.uni.values()) - max(0, len(own) - 1)
        vocabulary = len(self.uni) + 1
        gained = 0.0
        for a, b in itertools.pairwise(toks):
            p_uni = (max(0, self.uni[b] - own_uni[b]) + 0.5) / (total + 0.5 * vocabulary)
            seen = max(0, self.ctx[a] - own_ctx[a])
            kinds = max(0, self.followers[a] - own_followers[a])
            pair = max(0, self.bi[(a, b)] - own_bi[(a, b)])
            p_bi = (pair + kinds * p_uni) / (seen + kinds) if seen > 0 and kinds > 0 else p_uni
            gained += math.log(p_bi) - math.log(p_uni)
        return gained / max(1, len(toks) - 1)


@lru_cache(maxsize=1)
def bundled_word_order() -> WordOrderModel:
    """The word model of the bundled samples' reviews (ICLR 2020 and 2026), built once."""
    from grebench.ingest import BUNDLED, bundled_source

    model = WordOrderModel()
    for name in BUNDLED:
        for paper in bundled_source(name).fetch():
            model.add(r.text for r in getattr(paper, "reviews", ()))
    return model


def threshold(count: int) -> float:
    """The least gain a text of ``count`` tokens must reach to read as text."""
    return min(MIN_GAIN, SHORT_TOP - SHORT_SLACK / math.sqrt(max(count, 1)))


@dataclass(frozen=True)
class ProseEvidence:
    """The word-order test of one text: its gain, its length in tokens and the bar for that length."""

    gain: float
    count: int
    bar: float
    measure: str = "word-order gain under the word model of human reviews"

    @property
    def prose(self) -> bool:
        """Whether the text reads as text (or is too short to judge)."""
        return self.count < MIN_TOKENS or self.gain >= self.bar

    def describe(self) -> str:
        """``does not read as text: word-order gain -0.65 nats per token over 412 tokens (human reviews: at least
        0.15 at this length)``."""
        return (f"does not read as text: {self.measure} {self.gain:.2f} nats per token over {self.count} tokens "
                f"(human reviews: at least {self.bar:.2f} at this length)")


def prose_evidence(text: str, model: WordOrderModel | None = None) -> ProseEvidence:
    """The word-order test of ``text`` (:class:`ProseEvidence`) under ``model`` (the bundled one by default)."""
    toks = tokens(text)
    count = len(toks) - 1
    if count < MIN_TOKENS:
        return ProseEvidence(0.0, count, threshold(count))
    return ProseEvidence(round((model or bundled_word_order()).gain(toks), 4), count, round(threshold(count), 4))

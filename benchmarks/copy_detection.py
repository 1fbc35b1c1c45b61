"""How well the copy detector catches disguised copies of public reviews, and how often it flags honest ones.

Run with the product's own install::

    .venv/bin/python benchmarks/copy_detection.py [--papers N] [--seed S] [--markdown]

For every paper of the bundled ICLR 2020 and ICLR 2026 samples (or a seeded ``--papers N`` of each), the paper's
public reviews are disguised by each transformation below, at each strength, and checked against *all* public
reviews of that paper (title and abstract as the paper's own text) with :func:`grebench.bench.copy_evidence`, the
detector that imports, uploads, submitted endpoints and approvals use.  The false-positive rate is every real review
of both samples checked against the *other* reviews of its paper.  Transformations are seeded per paper; fillers and
substitutes are drawn from the vocabulary of all ~700 papers' reviews, so they are as varied as the samples.

Strengths marked ``beyond`` destroy most of the review's words (at 70 % substitution a reader gets three words in
ten); they are printed to show where the lexical detector stops, not as targets.
"""

from __future__ import annotations

import argparse
import random
import re
import time
from collections.abc import Callable

from grebench.bench import COPY_THRESHOLD, copy_evidence
from grebench.bench._copies import bundled_background
from grebench.ingest import BUNDLED, bundled_source

Transform = Callable[[list[str], random.Random, list[str]], str]
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_CLAUSE = re.compile(r"(?<=[,;:.!?])\s+|\n+")
_LOOKALIKE = str.maketrans({"a": "а", "e": "е", "o": "о", "p": "р", "c": "с", "x": "х", "y": "у", "i": "і"})
_SYNONYMS = {
    "paper": "manuscript", "method": "approach", "propose": "introduce", "proposed": "introduced",
    "results": "findings", "experiments": "evaluations", "novel": "new", "limited": "restricted", "show": "demonstrate",
    "shows": "demonstrates", "important": "significant", "however": "nevertheless", "clear": "evident",
    "unclear": "ambiguous", "improve": "enhance", "improves": "enhances", "performance": "accuracy",
    "authors": "writers", "model": "network", "models": "networks", "use": "employ", "uses": "employs",
    "strong": "solid", "weak": "poor", "compare": "contrast", "comparison": "contrast", "missing": "absent",
    "lack": "absence", "lacks": "misses", "interesting": "intriguing", "well": "nicely", "good": "fine",
    "large": "big", "small": "tiny", "many": "numerous", "also": "additionally", "provide": "offer",
    "provides": "offers", "analysis": "study", "evaluation": "assessment", "significant": "substantial",
}


def _words(text: str) -> list[str]:
    return text.split()


def filler(every: int) -> Transform:
    """A word from another paper's reviews after every ``every`` words."""
    def run(reviews: list[str], rng: random.Random, vocab: list[str]) -> str:
        out: list[str] = []
        for i, word in enumerate(_words(reviews[0]), 1):
            out.append(word)
            if i % every == 0:
                out.append(rng.choice(vocab))
        return " ".join(out)
    return run


def deletion(rate: float) -> Transform:
    """Each word dropped with probability ``rate``."""
    return lambda reviews, rng, _: " ".join(w for w in _words(reviews[0]) if rng.random() >= rate)


def substitution(rate: float, content_only: bool) -> Transform:
    """Each word (or each content word of four letters or more) replaced with probability ``rate`` by a word from
    another paper's reviews: a synonym or misspelling the detector cannot know, the worst case of either."""
    def run(reviews: list[str], rng: random.Random, vocab: list[str]) -> str:
        return " ".join(rng.choice(vocab) if (not content_only or len(w) >= 4) and rng.random() < rate else w
                        for w in _words(reviews[0]))
    return run


def synonyms(rate: float) -> Transform:
    """Common review words replaced by a synonym with probability ``rate`` (a thesaurus of review language)."""
    def run(reviews: list[str], rng: random.Random, _: list[str]) -> str:
        return " ".join(_SYNONYMS.get(w.lower(), w) if rng.random() < rate else w for w in _words(reviews[0]))
    return run


def typos(rate: float) -> Transform:
    """Each word of three letters or more misspelt with probability ``rate`` (swap, drop, double or change)."""
    def misspell(word: str, rng: random.Random) -> str:
        i = rng.randrange(len(word) - 1)
        kind = rng.randrange(4)
        if kind == 0:
            return word[:i] + word[i + 1] + word[i] + word[i + 2:]
        if kind == 1:
            return word[:i] + word[i + 1:]
        if kind == 2:
            return word[:i] + word[i] + word[i:]
        return word[:i] + rng.choice("abcdefghijklmnopqrstuvwxyz") + word[i + 1:]
    return lambda reviews, rng, _: " ".join(misspell(w, rng) if len(w) >= 3 and rng.random() < rate else w
                                            for w in _words(reviews[0]))


def swaps(reviews: list[str], rng: random.Random, _: list[str]) -> str:
    """Every pair of adjacent words swapped."""
    words = _words(reviews[0])
    for i in range(0, len(words) - 1, 2):
        words[i], words[i + 1] = words[i + 1], words[i]
    return " ".join(words)


def clause_shuffle(reviews: list[str], rng: random.Random, _: list[str]) -> str:
    """Clauses (split at punctuation) in a random order."""
    parts = [p for p in _CLAUSE.split(reviews[0]) if p.strip()]
    rng.shuffle(parts)
    return " ".join(parts)


def lookalikes(reviews: list[str], rng: random.Random, _: list[str]) -> str:
    """Half the letters turned into Cyrillic look-alikes, random case, zero-width spaces, dots inside words, and
    every tenth word spelled out letter by letter."""
    out = []
    for word in _words(reviews[0]):
        if rng.random() < 0.1:
            word = " ".join(word)
        elif rng.random() < 0.2 and len(word) > 3:
            word = word[:2] + "." + word[2:]
        word = "".join((ch.translate(_LOOKALIKE) if rng.random() < 0.5 else ch) for ch in word)
        word = "".join(ch.upper() if rng.random() < 0.3 else ch for ch in word)
        out.append(word.replace(word[:1], word[:1] + "\u200b", 1) if rng.random() < 0.3 else word)
    return " ".join(out)


def mix(count: int) -> Transform:
    """Sentences of ``count`` reviews of the paper interleaved (each contributes every ``count``-th sentence)."""
    def run(reviews: list[str], rng: random.Random, _: list[str]) -> str:
        parts = [[s for s in _SENTENCE.split(r) if s.strip()] for r in reviews[:count]]
        return " ".join(p[i] for i in range(max(len(p) for p in parts)) for k, p in enumerate(parts)
                        if i < len(p) and i % count == k % count)
    return run


def concatenated(reviews: list[str], rng: random.Random, vocab: list[str]) -> str:
    """All public reviews of the paper, one after another."""
    return "\n\n".join(reviews)


def partial(share: float) -> Transform:
    """The first ``share`` of the review's sentences, nothing else."""
    def run(reviews: list[str], rng: random.Random, _: list[str]) -> str:
        parts = [s for s in _SENTENCE.split(reviews[0]) if s.strip()]
        return " ".join(parts[:max(1, round(share * len(parts)))])
    return run


def chain(*steps: Transform) -> Transform:
    """Transformations applied one after another (the first sees the reviews, the next its output first)."""
    def run(reviews: list[str], rng: random.Random, vocab: list[str]) -> str:
        text = steps[0](reviews, rng, vocab)
        for step in steps[1:]:
            text = step([text, *reviews[1:]], rng, vocab)
        return text
    return run


#: (name, strength, transformation, a target of the detector).
CASES: list[tuple[str, str, Transform, bool]] = [
    ("verbatim", "-", partial(1.0), True),
    *[("filler word", f"every {k} words", filler(k), True) for k in (1, 2, 3, 4, 5)],
    *[("words deleted", f"{p:.0%}", deletion(p), True) for p in (0.1, 0.2, 0.3, 0.4, 0.5)],
    ("adjacent words swapped", "all pairs", swaps, True),
    ("clauses shuffled", "all", clause_shuffle, True),
    *[("synonyms (thesaurus)", f"{p:.0%} of listed words", synonyms(p), True) for p in (0.5, 1.0)],
    *[("content words substituted", f"{p:.0%}", substitution(p, True), True) for p in (0.1, 0.2, 0.3, 0.4, 0.5)],
    *[("any words substituted", f"{p:.0%}", substitution(p, False), True) for p in (0.1, 0.3, 0.5)],
    *[("misspellings", f"{p:.0%} of words", typos(p), True) for p in (0.1, 0.3, 0.5)],
    ("look-alikes, case, zero-width, dots, spelt-out", "-", lookalikes, True),
    ("two reviews mixed", "-", mix(2), True),
    ("three reviews mixed", "-", mix(3), True),
    ("all reviews concatenated", "-", concatenated, True),
    ("first part of a review", "60%", partial(0.6), True),
    ("first part of a review", "40%", partial(0.4), True),
    ("filler + two reviews mixed", "every 3", chain(mix(2), filler(3)), True),
    ("filler + all reviews", "every 3", chain(concatenated, filler(3)), True),
    ("filler + swaps + 30% substituted", "every 2", chain(filler(2), swaps, substitution(0.3, True)), True),
    ("mixed + shuffled + look-alikes", "two reviews", chain(mix(2), clause_shuffle, lookalikes), True),
    ("deleted + misspelt + filler", "20% / 20% / every 3", chain(deletion(0.2), typos(0.2), filler(3)), True),
    ("content words substituted", "70% (beyond)", substitution(0.7, True), False),
    ("words deleted", "70% (beyond)", deletion(0.7), False),
    ("first part of a review", "20% (beyond)", partial(0.2), False),
]


def load(papers: int | None, seed: int) -> list[tuple[str, str, list[str]]]:
    """(label, paper text, reviews) of both bundled samples (a seeded ``papers`` of each, or all)."""
    out = []
    for name in BUNDLED:
        records = [p for p in bundled_source(name).fetch() if hasattr(p, "reviews") and len(p.reviews) >= 2]
        if papers is not None:
            records = random.Random(seed).sample(records, min(papers, len(records)))
        out += [(f"{name}/{p.paper_id}", "\n".join(t for t in (p.title, p.abstract) if t), [r.text for r in p.reviews])
                for p in records]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--papers", type=int, default=None,
                        help="transform a seeded sample of N papers of each sample (the false-positive rate is always "
                             "measured on every review)")
    parser.add_argument("--seed", type=int, default=20261126)
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown (docs/security.md)")
    args = parser.parse_args()
    started = time.monotonic()
    background = bundled_background()
    everything = load(None, args.seed)
    data = load(args.papers, args.seed)
    vocab = sorted({w for _, _, reviews in everything for r in reviews for w in r.split() if w.isalpha()})

    # the false-positive rate is always measured on every review of both samples
    honest = [copy_evidence(text, reviews[:i] + reviews[i + 1:], paper, background).score
              for _, paper, reviews in everything for i, text in enumerate(reviews)]
    flagged = sum(s >= COPY_THRESHOLD for s in honest)
    rows = []
    for name, strength, transform, target in CASES:
        caught = 0
        scores = []
        for label, paper, reviews in data:
            rng = random.Random(f"{args.seed}/{label}/{name}/{strength}")
            other = rng.sample(vocab, 400)
            copy = transform(list(reviews), rng, other)
            score = copy_evidence(copy, reviews, paper, background).score
            scores.append(score)
            caught += score >= COPY_THRESHOLD
        scores.sort()
        rows.append((name, strength, caught, len(data), scores[len(scores) // 20], target))
    honest.sort()
    elapsed = time.monotonic() - started
    summary = (f"honest reviews flagged: {flagged}/{len(honest)} ({flagged / len(honest):.2%}); score median "
               f"{honest[len(honest) // 2]:.3f}, p99 {honest[int(0.99 * len(honest))]:.3f}, p99.5 "
               f"{honest[int(0.995 * len(honest))]:.3f}, max {honest[-1]:.3f}; threshold {COPY_THRESHOLD}; "
               f"transformations on {len(data)} papers; {elapsed:.0f} s")
    if args.markdown:
        print("| transformation | strength | caught | rate | 5th percentile of score |")
        print("|---|---|---|---|---|")
    for name, strength, caught, total, p5, target in rows:
        if args.markdown:
            note = "" if target else " (not a target)"
            print(f"| {name} | {strength} | {caught}/{total} | {caught / total:.1%}{note} | {p5:.2f} |")
        else:
            mark = "" if target else "  (beyond: not a target)"
            print(f"{name:<45} {strength:<22} {caught:>4}/{total:<4} {caught / total:7.1%}  p5 {p5:.2f}{mark}")
    print(("\n" + summary[0].upper() + summary[1:] + ".") if args.markdown else summary)

if __name__ == "__main__":
    main()

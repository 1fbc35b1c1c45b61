"""The generic review vocabulary: the words that any review of any paper uses, measured on real reviews.

A judgment line built only from these words (and function words) says what a review of an arbitrary paper could say
("the paper is well written", "more baselines would help", "research in this area keeps moving"): it carries no
information about *this* paper, and a reviewer — or a gamer — can add any number of them.  The ``rules``
preprocessor drops such lines from candidates and references alike (rules-v5).  The rule is about information, not
about any known text: the list is the set of content words that occur in the judgment lines of at least
:data:`GENERIC_DF` of the papers' human reviews in a corpus of real reviews (the bundled ICLR 2020 sample: 400
papers, 1,223 reviews), computed by :func:`build_generic_vocabulary` and shipped as
``data/generic_vocabulary.txt`` so that the lines of a review never depend on what else is in a store.  A test
recomputes it from the bundled data.  Measured effect: docs/scoring.md.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from importlib import resources

#: Share of papers whose reviews use a word for it to count as generic review vocabulary (0.10 and 0.20 kept most
#: generic lines; measured in docs/scoring.md).
GENERIC_DF = 0.05
_WORD = re.compile(r"[a-z][a-z\-]+")
_VERB_PREFIX = re.compile(r"^the reviewer (appreciates|criticizes|questions|suggests)( that)?\s*")
_FUNCTION_WORD_TEXT = """
a about above after again against all also am an and any are as at be because been before being below between
both but by can could did do does doing down during each few for from further had has have having he her here
hers him his how i if in into is it its itself just me more most my no nor not now of off on once only or other
our ours out over own same she should so some such than that the their theirs them then there these they this
those through to too under until up very was we were what when where which while who whom why will with would
you your yours however therefore thus since may might must shall one two three well many much via
"""
_FUNCTION_WORDS = frozenset(_FUNCTION_WORD_TEXT.split())


def normalise(word: str) -> str:
    """A crude singular: enough to merge "baselines"/"baseline" and "studies"/"study" (no stemmer dependency)."""
    word = word.strip("-")
    if word.endswith("ies") and len(word) > 5:
        return word[:-3] + "y"
    if word.endswith("s") and not word.endswith("ss") and len(word) > 4:
        return word[:-1]
    return word


def line_words(line: str) -> set[str]:
    """The normalised content words of a judgment line (its "The reviewer <verb>" prefix excluded)."""
    body = _VERB_PREFIX.sub("", line.lower())
    return {normalise(w) for w in _WORD.findall(body) if len(w) >= 3 and w not in _FUNCTION_WORDS}


def build_generic_vocabulary(lines_by_paper: Mapping[str, Iterable[str]], df: float = GENERIC_DF) -> list[str]:
    """Content words used in the judgment lines of at least ``df`` of the papers, sorted."""
    counts: Counter[str] = Counter()
    for lines in lines_by_paper.values():
        words: set[str] = set()
        for line in lines:
            words |= line_words(line)
        counts.update(words)
    n = max(1, len(lines_by_paper))
    return sorted(w for w, c in counts.items() if c / n >= df)


def bundled_lines_by_paper(to_lines: Callable[[str], Sequence[str]]) -> dict[str, list[str]]:
    """Judgment lines of every human review of the bundled sample, per paper (the vocabulary's corpus)."""
    import json

    text = resources.files("grebench.ingest").joinpath("data/iclr2020_reviews.jsonl").read_text(encoding="utf-8")
    out: dict[str, list[str]] = {}
    for raw in text.split("\n"):  # not splitlines(): reviews contain U+2028
        if raw.strip():
            paper = json.loads(raw)
            out[paper["id"]] = [line for r in paper.get("reviews", [])
                                for line in to_lines(r.get("content", {}).get("review") or "")]
    return out


@lru_cache(maxsize=1)
def generic_vocabulary() -> frozenset[str]:
    """The shipped generic vocabulary."""
    text = resources.files("grebench.scoring").joinpath("data/generic_vocabulary.txt").read_text(encoding="utf-8")
    return frozenset(line.strip() for line in text.split("\n") if line.strip() and not line.startswith("#"))


def vocabulary_sha8() -> str:
    """Short hash of the shipped vocabulary (part of the rules preprocessor's id)."""
    return hashlib.sha256(" ".join(sorted(generic_vocabulary())).encode()).hexdigest()[:8]


def is_content_free(line: str) -> bool:
    """True when every content word of the line is generic review vocabulary (or it has none)."""
    return not (line_words(line) - generic_vocabulary())


def main() -> None:
    """Regenerate ``data/generic_vocabulary.txt`` from the bundled sample (lines before the generic-vocabulary drop)."""
    from pathlib import Path

    from grebench.scoring._rules import rules_judgment_lines

    corpus = bundled_lines_by_paper(lambda t: rules_judgment_lines(t, drop_content_free=False))
    words = build_generic_vocabulary(corpus)
    path = Path(__file__).parent / "data" / "generic_vocabulary.txt"
    path.write_text(f"{HEADER.format(df=GENERIC_DF, n=len(words))}\n" + "\n".join(words) + "\n", encoding="utf-8")
    print(f"{path}: {len(words)} words")


HEADER = ("# Generic review vocabulary (grebench.scoring._vocabulary): content words in the rules judgment lines\n"
          "# (rules-v6 before this list's own drop, drop_content_free=False)\n"
          "# of at least {df:.0%} of the papers' human reviews in the bundled ICLR 2020 sample (400 papers);\n"
          "# {n} words. Regenerate: python -m grebench.scoring._vocabulary")


if __name__ == "__main__":
    main()

"""Cheap, objective measurements of a review (Co-Eval), stored in ``machine_metrics`` and optionally shown to judges.

* ``words``: whitespace-separated words.
* ``section_coverage``: share of the four expected parts (summary, strengths, weaknesses, questions) the review has,
  found as tagged sections (``<strengths>``), headings (``Pros:``, ``## Weaknesses``) or, for questions, a ``?``.
* ``specificity``: share of sentences naming at least one paper-specific term (a content word of the title or
  abstract that is not common across papers).
* ``abstract_overlap``: recall of the abstract's content words in the review (how much of the abstract it restates).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache

from grebench.panel._judges import _WORD, content_words

PARTS = {
    "summary": r"summary|overview|paper summary|contributions?",
    "strengths": r"strengths?|pros|positives?|reasons? to accept|appreciat\w*",
    "weaknesses": r"weakness(?:es)?|cons|negatives?|concerns?|limitations?|reasons? to reject|criticis\w*",
    "questions": r"questions?|clarifications?",
}
_SENTENCE = re.compile(r"(?<=[.?!])\s+|\n+")


def _headings(text: str) -> list[str]:
    try:
        from grebench.bench import split_sections

        return [h for h, _ in split_sections(text) if h]
    except ImportError:  # the bench stage is optional for this measurement
        return [line for line in text.splitlines() if len(line.split()) <= 8 and line.strip().endswith(":")]


def section_coverage(text: str) -> float:
    """Share of summary/strengths/weaknesses/questions present."""
    lowered = text.lower()
    headings = " | ".join(h.lower() for h in _headings(text))
    found = 0
    for part, pattern in PARTS.items():
        tag = re.search(rf"<{part}>", lowered) is not None
        heading = re.search(rf"\b(?:{pattern})\b", headings) is not None
        asks = part == "questions" and "?" in text
        found += bool(tag or heading or asks)
    return found / len(PARTS)


@lru_cache(maxsize=4096)
def _content_set(text: str) -> frozenset[str]:
    return frozenset(content_words(text))


def specific_terms(title: str, abstract: str, common: Iterable[str] = ()) -> set[str]:
    """Content words of the title and abstract, minus words common across the venue's papers."""
    return set(_content_set(f"{title}\n{abstract}")) - set(common)


def specificity(text: str, terms: set[str] | frozenset[str]) -> float:
    """Share of sentences containing at least one paper-specific term."""
    sentences = [s for s in _SENTENCE.split(text) if s.strip()]
    if not sentences or not terms:
        return 0.0
    # terms are content words already, so the raw word matches of a sentence can be intersected directly
    return sum(1 for s in sentences if not terms.isdisjoint(_WORD.findall(s.lower()))) / len(sentences)


def abstract_overlap(text: str, abstract: str) -> float:
    """Recall of the abstract's content-word types in the review."""
    wanted = _content_set(abstract)
    return len(wanted.intersection(_WORD.findall(text.lower()))) / len(wanted) if wanted else 0.0


def measure(text: str, title: str, abstract: str, common: Iterable[str] = ()) -> dict[str, float]:
    """All four measurements of one review of one paper."""
    common = common if isinstance(common, (set, frozenset)) else set(common)
    terms = _content_set(f"{title}\n{abstract}") - common
    return {"words": len(text.split()), "section_coverage": round(section_coverage(text), 4),
            "specificity": round(specificity(text, terms), 4),
            "abstract_overlap": round(abstract_overlap(text, abstract), 4)}


def common_words(abstracts: Mapping[str, str], share: float = 0.05) -> set[str]:
    """Content words appearing in more than ``share`` of the papers' titles+abstracts (not paper-specific)."""
    counts: dict[str, int] = {}
    for text in abstracts.values():
        for w in set(content_words(text)):
            counts[w] = counts.get(w, 0) + 1
    limit = max(2, share * len(abstracts))
    return {w for w, c in counts.items() if c > limit}

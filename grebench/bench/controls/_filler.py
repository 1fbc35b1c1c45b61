"""Content-free sentences from combinatorial pools: the varied "meaningless elongation" (methods.md §4).

No registrations here: both the paper's controls (``_paper``) and the gaming controls (``_gaming``) use it, and the
registry keeps the paper's controls first.
"""

from __future__ import annotations

import random

from grebench.bench._sections import join_sections, join_sentences, split_sections, split_sentences

GAMING_VERSION = "control-v2"

_OPENERS = ("", "Overall, ", "In general, ", "Broadly speaking, ", "Taken together, ", "On the whole, ",
            "As a general remark, ", "Stepping back, ", "More generally, ", "For context, ", "To be transparent, ")
_META_SUBJECTS = ("this part of the assessment", "the discussion in this section", "what is written here",
                  "the text of this part", "this set of observations", "the list of points in this part",
                  "this portion of the report", "the material in this section", "my write-up of this aspect")
_META_PREDICATES = ("reflects how I read the submission", "is meant to give the authors a complete picture",
                    "tries to be as balanced as possible", "should be read together with the rest of the text",
                    "covers the aspects I looked at most carefully", "follows the order in which I read the work",
                    "is written in the spirit of constructive feedback", "aims to be useful for the discussion",
                    "sums up the considerations behind my view", "is offered to help the authors and the chairs")
_FIELD_SUBJECTS = ("research in this area", "work on questions of this kind", "the community around this topic",
                   "the literature on related problems", "progress on problems like this one",
                   "the study of such methods", "this line of research", "the field as a whole")
_FIELD_PREDICATES = ("keeps moving quickly", "has grown a lot over the last few years",
                     "attracts attention from many groups", "raises questions that take time to settle",
                     "is discussed at most major venues", "builds on a long history of ideas",
                     "depends on shared benchmarks and practices", "changes as new tools become available")
_CLOSERS = (".", ", as is customary.", ", as far as I can tell.", ", I would say.", " in any case.",
            ", which is worth keeping in mind.", " at this point.")


def filler_sentence(rng: random.Random) -> str:
    """One content-free sentence: meta-commentary or a generic remark about the field (thousands of variants)."""
    if rng.random() < 0.5:
        subject, predicate = rng.choice(_META_SUBJECTS), rng.choice(_META_PREDICATES)
    else:
        subject, predicate = rng.choice(_FIELD_SUBJECTS), rng.choice(_FIELD_PREDICATES)
    opener = rng.choice(_OPENERS)
    text = f"{opener}{subject} {predicate}{rng.choice(_CLOSERS)}"
    return text[0].upper() + text[1:]


def varied_elongation(text: str, rng: random.Random) -> str:
    """3-6 content-free sentences inserted at random places in every section; nothing of the review removed."""
    out = []
    for heading, body in split_sections(text):
        sentences = split_sentences(body)
        line = max((n for n, _ in sentences), default=0)
        for _ in range(rng.randint(3, 6)):
            at = rng.randint(0, len(sentences))
            number = sentences[at - 1][0] if at else (sentences[0][0] if sentences else line)
            sentences.insert(at, (number, filler_sentence(rng)))
        out.append((heading, join_sentences(sentences)))
    return join_sections(out)

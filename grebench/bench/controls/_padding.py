"""Padding controls: a review made longer with sentences that carry no information about the paper (issue 35).

A gaming candidate pads a real review with varied, plausible sentences; the project's ``elongation`` control (meta
commentary) is one style of it, and a metric can be neutral on one style and still pay for another.  These four
generators cover the styles a padder would write, each inserted at random places in every section, about half as
many sentences again as the section has (at least two per section):

* ``padding-generic`` — review-sounding remarks that fit any submission ("the manuscript follows the usual
  structure of a conference paper");
* ``padding-topic`` — sentences about the paper's topic, built from phrases of its own title and abstract, that
  state no claim about the paper ("questions about <phrase> come up often in this area");
* ``padding-restatement`` — the review's own sentences again, reworded and introduced as a restatement;
* ``padding-hedge`` — hedges about the reviewer's confidence and what might have been missed.

Every sentence comes from seeded combinatorial pools (seed: the run seed, the control's name and the paper): the same
variety for every paper, thousands of variants per style, and no fixed sentence that a rule could recognise.  They
are not in the default run (``default=False``): ``grebench bench --candidate padding-topic ...`` writes them, and
``grebench validate`` reports them like every control.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from grebench.bench._sections import join_sections, join_sentences, split_sections, split_sentences
from grebench.bench.controls._base import NOT_REWARDED, ControlInput, ControlSkip, register_control
from grebench.bench.controls._gaming import abstract_phrases, reword

PADDING_VERSION = "padding-v1"

_GENERIC_OPENERS = ("", "Overall, ", "In terms of presentation, ", "From a reader's point of view, ", "Generally, ",
                    "As far as the format goes, ", "At a high level, ", "For what it is worth, ", "Also, ")
_GENERIC_SUBJECTS = ("the manuscript", "the submission", "the paper", "this work", "the write-up", "the main text",
                     "the document", "the draft", "this submission")
_GENERIC_PREDICATES = (
    "follows the usual structure of a conference paper", "is organised into the sections one would expect",
    "contains an introduction, a method section and experiments", "includes a discussion of related work",
    "uses figures and tables to present its material", "ends with a conclusion section",
    "refers to prior work throughout", "is written for a machine learning audience",
    "describes its setting before its contributions", "has an appendix with additional material",
    "reports experiments in the second half", "introduces its notation early on",
    "lists its contributions in the introduction", "is of a typical length for the venue")
_GENERIC_CLOSERS = (".", ", as expected.", ", like most submissions.", " in the usual way.", ", which is standard.")

_TOPIC_TEMPLATES = (
    "Questions about {p} come up often in this area.", "Work on {p} has a history in the community.",
    "The paper is concerned with {p}.", "{P} is among the topics the paper touches on.",
    "Several groups have looked at {p} over the years.", "The setting involves {p}.",
    "Readers interested in {p} may look at this submission.", "The discussion revolves around {p}.",
    "{P} appears in several parts of the text.", "The submission situates itself relative to {p}.",
    "There is a broader conversation about {p} in the field.", "The manuscript uses the term {p} repeatedly.",
    "One theme of the paper is {p}.", "{P} and related notions are part of the paper's vocabulary.")

_RESTATE_LEADS = ("To restate, ", "In other words, ", "Put differently, ", "As noted, ", "Again, ", "To repeat, ",
                  "Said another way, ", "As mentioned, ", "Once more: ", "To summarise this point, ")

_HEDGE_SUBJECTS = ("I", "This reviewer", "The present reviewer")
_HEDGE_PREDICATES = (
    "may have missed details that would change parts of this assessment",
    "could be wrong about some of the points above", "is not fully certain about every point raised here",
    "would be happy to revise this view after the discussion", "might have overlooked parts of the appendix",
    "read the paper carefully but cannot rule out misunderstandings",
    "is open to being corrected by the authors", "would defer to the other reviewers on some aspects",
    "holds some of these opinions with moderate confidence", "may not have checked every derivation in detail")
_HEDGE_CLOSERS = (".", ", of course.", ", to be fair.", " at this stage.", ", as with any review.")
_HEDGE_OPENERS = ("", "That said, ", "To be clear, ", "In fairness, ", "Admittedly, ", "Of course, ")


def _cap(text: str) -> str:
    return text[0].upper() + text[1:] if text else text


def generic_sentence(rng: random.Random) -> str:
    """A review-sounding remark that fits any submission."""
    return _cap(f"{rng.choice(_GENERIC_OPENERS)}{rng.choice(_GENERIC_SUBJECTS)} {rng.choice(_GENERIC_PREDICATES)}"
                f"{rng.choice(_GENERIC_CLOSERS)}")


def hedge_sentence(rng: random.Random) -> str:
    """A hedge about the reviewer's confidence."""
    opener = rng.choice(_HEDGE_OPENERS)
    subject = rng.choice(_HEDGE_SUBJECTS)
    if opener and subject != "I":
        subject = subject[0].lower() + subject[1:]
    return _cap(f"{opener}{subject} {rng.choice(_HEDGE_PREDICATES)}{rng.choice(_HEDGE_CLOSERS)}")


def topic_sentence(phrases: list[str], rng: random.Random) -> str:
    """A sentence that names one of the paper's own phrases and states nothing about the paper."""
    phrase = rng.choice(phrases)
    return rng.choice(_TOPIC_TEMPLATES).format(p=phrase, P=_cap(phrase))


def pad_sections(text: str, make: Callable[[list[str]], str], rng: random.Random) -> str:
    """Insert about half as many sentences again as each section has (at least 2), at random places; ``make`` gets
    the section's own sentences so far and returns one padding sentence.  Nothing of the review is removed."""
    out = []
    for heading, body in split_sections(text):
        sentences = split_sentences(body)
        own = [s for _, s in sentences]
        line = max((n for n, _ in sentences), default=0)
        for _ in range(max(2, round(0.5 * len(sentences)))):
            at = rng.randint(0, len(sentences))
            number = sentences[at - 1][0] if at else (sentences[0][0] if sentences else line)
            sentences.insert(at, (number, make(own)))
        out.append((heading, join_sentences(sentences)))
    return join_sections(out)


def restated_sentence(own: list[str], rng: random.Random) -> str:
    """One of the section's own sentences, reworded, introduced as a restatement."""
    if not own:
        return hedge_sentence(rng)
    body = reword(rng.choice(own).strip(), rng)
    return rng.choice(_RESTATE_LEADS) + body[0].lower() + body[1:] if body else hedge_sentence(rng)


def _topic_maker(inp: ControlInput, rng: random.Random) -> Callable[[list[str]], str]:
    found = [p for p in abstract_phrases(f"{inp.paper.title}. {inp.paper.abstract or ''}") if len(p) > 3]
    phrases = [p for p in found if " " in p] or found  # word pairs and triples read as topics; single words less so
    if not phrases:
        raise ControlSkip("paper has no title or abstract phrases")
    return lambda own: topic_sentence(phrases, rng)


#: name -> (what pads the review, per paper: (input, seeded generator) -> the maker of one padding sentence)
_STYLES: dict[str, tuple[str, Callable[[ControlInput, random.Random], Callable[[list[str]], str]]]] = {
    "padding-generic": ("review-sounding remarks that fit any submission (seeded pools)",
                        lambda inp, rng: lambda own: generic_sentence(rng)),
    "padding-topic": ("claim-free sentences that name phrases of the paper's own title and abstract", _topic_maker),
    "padding-restatement": ("its own sentences again, reworded and introduced as restatements",
                            lambda inp, rng: lambda own: restated_sentence(own, rng)),
    "padding-hedge": ("hedges about the reviewer's confidence", lambda inp, rng: lambda own: hedge_sentence(rng)),
}


def _padding_builder(name: str) -> Callable[[ControlInput], str]:
    def build(inp: ControlInput) -> str:
        rng = inp.rng(name)
        return pad_sections(inp.require_human(), _STYLES[name][1](inp, rng), rng)
    return build


for _name, (_what, _) in _STYLES.items():
    register_control(_name, kind="manipulation", expected=NOT_REWARDED, source="human", version=PADDING_VERSION,
                     default=False, description=f"The human candidate review padded with {_what}, half as many "
                     "sentences again per section.")(_padding_builder(_name))

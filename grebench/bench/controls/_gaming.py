"""Manipulations a gamer would try, and a varied meaningless elongation: controls that no rule can recognise by text.

Every text here is assembled from seeded pools and templates (seed: the run seed, the control's name and the
paper), so no fixed sentence or phrase identifies a control: a preprocessing rule that dropped one would have to be
a rule about information (no judgment, no paper content, a repeat), which is what the metric should have anyway.
The pools are deliberately broad; validation (``grebench validate``) is also run on manipulated reviews kept outside
the repository.

* ``elongation`` — 3 to 6 content-free sentences per section, some meta-commentary, some generic remarks about the
  field, inserted at random places (the paper's "meaningless elongation", methods.md §4).
* ``keyword-stuffing`` — the review plus a line of 10-15 phrases cut from the paper's abstract.
* ``keyword-stuffing-title`` — the review plus a line of title words and common review terms.
* ``sentence-shuffle`` — the review's sentences in a random order across its sections (headings stay).
* ``repetition`` — the review, then a second copy in other words (synonyms, dropped and reordered sentences).
* ``verdict-inversion`` — strengths and weaknesses swapped, evaluative words and negations toggled.
* ``empty`` — no review at all.
"""

from __future__ import annotations

import random
import re

from grebench.bench._sections import join_sections, join_sentences, split_sections, split_sentences
from grebench.bench.controls._base import (
    NOT_REWARDED,
    PENALISED,
    PENALISED_OR_NEUTRAL,
    ControlInput,
    ControlSkip,
    register_control,
)
from grebench.bench.controls._filler import GAMING_VERSION

# -- keyword stuffing ---------------------------------------------------------------------------------------------
_STOP_WORDS = (
    "a an the and or of to in on for with by from as at is are was were be been being this that these "
    "those we our us it its their they them which who whom whose what when where how than then thus also "
    "such can may might will would should could into onto over under between about across after before "
    "during via using based new show shows shown propose proposes proposed present presents paper work "
    "approach method methods results result"
)
_STOP = frozenset(_STOP_WORDS.split(" "))
_KEYWORD_LEADS = ("Keywords:", "Key terms:", "Relevant topics:", "Topics:", "Index terms:", "Related concepts:",
                  "Tags:", "Subject areas:", "Key phrases:", "Main concepts:")
_REVIEW_TERMS = ("novelty", "clarity", "reproducibility", "baselines", "ablation study", "significance",
                 "experiments", "theoretical analysis", "soundness", "related work", "generalization", "scalability",
                 "motivation", "presentation", "limitations", "evaluation protocol", "hyperparameters",
                 "empirical results", "convergence", "benchmark datasets", "computational cost", "robustness")


def abstract_phrases(abstract: str) -> list[str]:
    """Distinct 1-3 word phrases of content words from the abstract, in order of appearance."""
    words = re.findall(r"[A-Za-z][A-Za-z0-9\-]*", abstract)
    phrases: list[str] = []
    run: list[str] = []
    for word in [*words, "."]:
        if word.lower() in _STOP or word == ".":
            for size in (3, 2, 1):
                for i in range(0, max(0, len(run) - size + 1)):
                    phrases.append(" ".join(run[i:i + size]))
            run = []
        else:
            run.append(word.lower())
    return list(dict.fromkeys(p for p in phrases if len(p) > 3))


def _keyword_line(terms: list[str], rng: random.Random) -> str:
    sep = rng.choice((", ", "; ", " · ", ", "))
    return f"{rng.choice(_KEYWORD_LEADS)} {sep.join(terms)}"


def _append(text: str, addition: str, rng: random.Random) -> str:
    return f"{addition}\n\n{text}" if rng.random() < 0.25 else f"{text.rstrip()}\n\n{addition}"


# -- repetition in other words ------------------------------------------------------------------------------------
_SYNONYMS: dict[str, tuple[str, ...]] = {
    "paper": ("submission", "manuscript", "work"), "method": ("approach", "technique"),
    "approach": ("method", "technique"), "results": ("findings", "outcomes"), "result": ("finding", "outcome"),
    "experiments": ("empirical evaluation", "experimental section"), "shows": ("demonstrates", "indicates"),
    "show": ("demonstrate", "indicate"), "important": ("significant", "relevant"), "clear": ("easy to follow",),
    "novel": ("new", "original"), "however": ("but", "still"), "limited": ("restricted", "narrow"),
    "improve": ("enhance", "strengthen"), "improves": ("enhances", "strengthens"), "propose": ("put forward",),
    "proposes": ("puts forward",), "evaluate": ("assess",), "authors": ("writers", "submitters"),
    "interesting": ("intriguing", "worthwhile"), "good": ("decent", "solid"), "large": ("big", "substantial"),
    "small": ("modest", "minor"), "problem": ("issue", "question"), "use": ("employ", "apply"),
    "uses": ("employs", "applies"), "model": ("architecture", "network"), "well": ("nicely",),
}
_REPEAT_LEADS = ("To reiterate the above:", "In other words:", "Restating the main points:", "Once more, in brief:",
                 "Put differently:", "Summary of my points:", "")


def reword(sentence: str, rng: random.Random) -> str:
    """The sentence with seeded synonym substitutions (case of the first letter kept)."""
    def swap(m: re.Match[str]) -> str:
        word = m.group(0)
        options = _SYNONYMS.get(word.lower())
        if not options or rng.random() < 0.3:
            return word
        new = rng.choice(options)
        return new[0].upper() + new[1:] if word[0].isupper() else new
    return re.sub(r"[A-Za-z]+", swap, sentence)


def reworded_copy(text: str, rng: random.Random) -> str:
    """The review, then a second copy in other words: sentences reworded, ~20% dropped, order shuffled a little."""
    copy: list[str] = []
    for _, body in split_sections(text):
        for _, sentence in split_sentences(body):
            if rng.random() < 0.2:
                continue
            copy.append(reword(sentence, rng))
    for i in range(len(copy) - 1):
        if rng.random() < 0.3:
            copy[i], copy[i + 1] = copy[i + 1], copy[i]
    lead = rng.choice(_REPEAT_LEADS)
    return f"{text.rstrip()}\n\n" + (f"{lead}\n" if lead else "") + " ".join(copy)


# -- sentence shuffle ---------------------------------------------------------------------------------------------
def shuffle_sentences(text: str, rng: random.Random) -> str:
    """Every sentence moved to a random place across the review; headings and section sizes stay."""
    sections = [(heading, split_sentences(body)) for heading, body in split_sections(text)]
    pool = [s for _, sentences in sections for _, s in sentences]
    rng.shuffle(pool)
    out, i = [], 0
    for heading, sentences in sections:
        n = len(sentences)
        out.append((heading, join_sentences([(0, s) for s in pool[i:i + n]])))
        i += n
    return join_sections(out)


# -- verdict inversion --------------------------------------------------------------------------------------------
_FLIPS = {
    "clear": "unclear", "unclear": "clear", "strong": "weak", "weak": "strong", "good": "poor", "poor": "good",
    "convincing": "unconvincing", "unconvincing": "convincing", "significant": "insignificant",
    "insignificant": "significant", "novel": "derivative", "well": "poorly", "poorly": "well",
    "interesting": "uninteresting", "sufficient": "insufficient", "insufficient": "sufficient",
    "thorough": "superficial", "superficial": "thorough", "limited": "extensive", "extensive": "limited",
    "easy": "hard", "hard": "easy", "lacks": "has", "missing": "present", "correct": "incorrect",
    "incorrect": "correct", "helpful": "unhelpful", "important": "unimportant", "solid": "shaky",
    "impressive": "unimpressive", "better": "worse", "worse": "better", "outperforms": "underperforms",
}
_NEGATION = re.compile(r"\b(is|are|was|were|does|do|can|could|should|would|has|have)( not|n't)?\b", re.IGNORECASE)
_STRENGTH = re.compile(r"strength|pros\b|positive|reasons? to accept|merit", re.IGNORECASE)
_WEAKNESS = re.compile(r"weakness|cons\b|negative|concern|reasons? to reject|limitation|drawback", re.IGNORECASE)


def invert_sentence(sentence: str) -> str:
    """Evaluative words swapped for their opposites, or else the first auxiliary's negation toggled."""
    flipped = re.sub(r"[A-Za-z]+", lambda m: _match_case(m.group(0), _FLIPS.get(m.group(0).lower())), sentence)
    if flipped != sentence:
        return flipped
    m = _NEGATION.search(sentence)
    if m is None:
        return sentence
    toggled = m.group(1) if m.group(2) else f"{m.group(1)} not"
    return sentence[:m.start()] + toggled + sentence[m.end():]


def _match_case(word: str, new: str | None) -> str:
    if new is None:
        return word
    return new[0].upper() + new[1:] if word[0].isupper() else new


def invert_verdicts(text: str) -> str:
    """Strengths and weaknesses sections swap bodies; every sentence's evaluation is toggled."""
    sections = split_sections(text)
    strong = [i for i, (h, _) in enumerate(sections) if _STRENGTH.search(h) and not _WEAKNESS.search(h)]
    weak = [i for i, (h, _) in enumerate(sections) if _WEAKNESS.search(h) and not _STRENGTH.search(h)]
    bodies = [body for _, body in sections]
    if strong and weak:
        bodies[strong[0]], bodies[weak[0]] = bodies[weak[0]], bodies[strong[0]]
    out = []
    for (heading, _), body in zip(sections, bodies, strict=True):
        out.append((heading, join_sentences([(n, invert_sentence(s)) for n, s in split_sentences(body)])))
    return join_sections(out)


# -- registrations ------------------------------------------------------------------------------------------------
@register_control("keyword-stuffing", kind="manipulation", expected=NOT_REWARDED, source="human", core=True,
                  needs_abstract=True, version=GAMING_VERSION, exam_role="pertinence",
                  description="The human candidate review plus a line of 10-15 phrases cut from the paper's abstract "
                  "(seeded choice, lead-in and separator).")
def _keyword_stuffing(inp: ControlInput) -> str:
    phrases = abstract_phrases(inp.paper.abstract or "")
    if len(phrases) < 5:
        raise ControlSkip("abstract too short for keyword stuffing")
    rng = inp.rng("keyword-stuffing")
    terms = rng.sample(phrases, min(len(phrases), rng.randint(10, 15)))
    return _append(inp.require_human(), _keyword_line(terms, rng), rng)


@register_control("keyword-stuffing-title", kind="manipulation", expected=NOT_REWARDED, source="human",
                  stands_in_for="keyword-stuffing", version=GAMING_VERSION,
                  description="The human candidate review plus a line of title words and common review terms.")
def _keyword_stuffing_title(inp: ControlInput) -> str:
    rng = inp.rng("keyword-stuffing-title")
    title = [w.lower() for w in re.findall(r"[A-Za-z][A-Za-z\-]+", inp.paper.title or "") if w.lower() not in _STOP]
    terms = list(dict.fromkeys(title)) + rng.sample(_REVIEW_TERMS, rng.randint(5, 9))
    rng.shuffle(terms)
    return _append(inp.require_human(), _keyword_line(terms, rng), rng)


@register_control("sentence-shuffle", kind="manipulation", expected=PENALISED_OR_NEUTRAL, source="human",
                  version=GAMING_VERSION, description="The human candidate review's sentences in a random order "
                  "across its sections.")
def _sentence_shuffle(inp: ControlInput) -> str:
    return shuffle_sentences(inp.require_human(), inp.rng("sentence-shuffle"))


@register_control("repetition", kind="manipulation", expected=NOT_REWARDED, source="human", version=GAMING_VERSION,
                  description="The human candidate review followed by a second copy in other words.")
def _repetition(inp: ControlInput) -> str:
    return reworded_copy(inp.require_human(), inp.rng("repetition"))


@register_control("verdict-inversion", kind="manipulation", expected=PENALISED_OR_NEUTRAL, source="human",
                  version=GAMING_VERSION, description="The human candidate review with strengths and weaknesses "
                  "swapped and its evaluations negated.")
def _verdict_inversion(inp: ControlInput) -> str:
    return invert_verdicts(inp.require_human())


@register_control("empty", kind="degradation", expected=PENALISED, version=GAMING_VERSION,
                  description="No review at all (an empty text).")
def _empty(inp: ControlInput) -> str:
    return ""

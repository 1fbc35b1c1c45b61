"""The deterministic `rules` preprocessor: judgment lines without an LLM.

It is a labelled fallback, not a substitute for the LLM rewrite: scores made with it are only comparable with other
scores made with it.  Each sentence of a review becomes at most one line.  The verb comes from the section the
sentence sits in (Strengths → appreciates, Weaknesses → criticizes, Questions → questions, Minor comments →
suggests) and, outside such sections, from cue words.  Only the reviewer's own judgments become lines (methods.md
§2: judgments, no content of the paper): sentences that describe or restate the paper (summary sections, reported
speech such as "according to the paper" or "the authors claim that", quotations of the authors' own words) and
meta-commentary about the review itself ("In this part of the review I …") are dropped.  Paper-specific details a
rule can see (math, numbers, citations, parentheses, URLs) are removed.  A line made only of generic review vocabulary
(:mod:`grebench.scoring._vocabulary`) carries no information about the paper and is dropped (rules-v5).  A summary
section with a heading may run on for paragraphs (the Summary field of a review form): after its first paragraph,
up to the next heading, only a sentence with a visible judgment cue becomes a line (rules-v6).  Markup tags around
sections (``<strengths>`` … ``</strengths>``) are headings and paragraph breaks, never text (rules-v7).  Rules and their
measured effect on the metric's validation: docs/scoring.md.
"""

from __future__ import annotations

import re
from functools import lru_cache

from grebench.scoring._vocabulary import is_content_free

RULES_ID = "rules-v7"
#: A markup tag around a section (``<strengths>`` … ``</strengths>``: the review prompt asks LLM candidates for them,
#: and imported reviews keep them): an opening tag is read as that section's heading on a line of its own, a closing
#: tag as a paragraph break.  Before rules-v7 the tags were text: ``<strengths>`` was no heading, so a candidate's
#: strengths took the verb of whatever came before, and ``</summary>`` ended judgment lines as "/summary." (issue 50).
#: Only a tag that names a section a heading would (``classify_heading``) counts; any other markup tag (``<br>``,
#: ``<i>``) is read as a space, and text such as ``p < n and m > 0`` is no tag (no blank after ``<``).
_TAG_RE = re.compile(r"<(/?)([A-Za-z][A-Za-z_-]{0,30})\s*/?>")
MAX_WORDS = 30
MIN_WORDS = 3
# Uncued sentences outside any section: in peer reviews these are mostly detailed critique (documented choice,
# re-checked against dropping them for rules-v2 in docs/scoring.md).  None would drop them.
DEFAULT_VERB: str | None = "criticizes"
# Sections where the review may be describing the paper rather than judging it: an unheaded opening summary, and the
# paragraphs after the first of a headed summary.  An uncued sentence there is no judgment.
_SUMMARY_LIKE = ("opening-summary", "after-summary")

# Headings of the OpenReview review forms 2018-2025 (v1 and v2 field names, ICLR/NeurIPS/ICML/TMLR/COLM) as well as
# free-form ones.  "neutral": a judgment section without a fixed polarity (cue words decide each sentence).
_SECTION_KINDS: tuple[tuple[str, str], ...] = (
    (r"references?|bibliography|(flag for )?ethics (review|concerns?)( flag)?|details of ethics concerns"
     r"|code of conduct|first time reviewer|(reviewer )?(expertise|familiarity)", "skip"),
    (r"summary of (the|your) (review|recommendation|assessment)|(overall )?(review|assessment|evaluation|verdict)"
     r"|main review|(summary of )?strengths? (and|&) weakness(es)?|clarity,? quality,? novelty,? and reproducibility"
     r"|(technical|empirical) novelty and significance|correctness|soundness|presentation|contribution"
     r"|rating|(overall )?recommendation|confidence|claims and evidence|audience|justification( for (your )?score)?"
     r"|broader impact( concerns)?|(un)?addressed limitations|limitations and societal impact", "neutral"),
    (r"(paper |review )?summary|synopsis|overview|contributions?|main contributions|paper (overview|description)"
     r"|what (this|the) paper (does|claims)|claims?|abstract|summary of (the )?(paper|submission|contributions?)"
     r"|summary (and|&) contributions|paper summary and contributions", "describe"),
    (r"(cons|weakness(es)?|negatives?|concerns?|limitations?|drawbacks?|(major )?issues|criticisms?)"
     r"( (and|/|&) questions)?|cons questions", "criticizes"),
    (r"pros|strengths?|positives?|merits|positive (aspects|points)|what i liked|pro|con", "pros_or_cons"),
    (r"(some |other |specific |additional )?(questions?|clarifications?)( (for|to) the authors)?", "questions"),
    (r"requested changes|suggestions?( for improvement)?|improvements?"
     r"|(some |other )?minor( (comments|issues|points|remarks|typos))?|typos?|nits?|(some )?typos"
     r"|additional (feedback|comments)|feedback|minor concerns", "suggests"),
)
_SECTION_RES = [(re.compile(rf"^(?:{pattern})$"), kind) for pattern, kind in _SECTION_KINDS]
_HEADING_LINE_RE = re.compile(r"^[\s#*>_\-\d.()\[\]]*([A-Za-z][A-Za-z /&,'-]{1,50}?)[\s*_#]*[:.\-]?[\s*_#]*$")
_INLINE_HEADING_RE = re.compile(r"^[\s#*>_\-\d.()]*([A-Za-z][A-Za-z /&'-]{1,30}?)[\s*_]*:[\s*_]*(\S.*)$")

_ABBREVIATIONS = ("e.g.", "i.e.", "et al.", "etc.", "Fig.", "fig.", "Eq.", "eq.", "Sec.", "sec.", "vs.", "cf.",
                  "Tab.", "resp.", "approx.", "w.r.t.", "Thm.", "Appx.")
# A hard-wrapped line (no sentence end, next line starts lower-case) continues the same sentence.
_SOFT_WRAP_RE = re.compile(r"(?<=[^\s.!?:])[ \t]*\n(?=[ \t]*[a-z])")
_SENTENCE_END_RE = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[A-Z0-9])")

_DESCRIPTIVE_RE = re.compile(
    r"^(?:(?:in|to do this|to this end|specifically|in particular|then|next|here)[^,]{0,30},\s*)?"
    r"(in this (paper|work|submission)|this (paper|work|submission|manuscript|article|study)|the (paper|work|"
    r"submission|manuscript|authors?|proposed (method|approach|model))|(the )?authors?|they|we|it)\b[^.]{0,40}?\b("
    r"propose|present|introduce|study|studie|investigate|consider|describe|develop|show|use|focus|tackle|address|"
    r"provide|extend|apply|formulate|suggest|claim|evaluate|demonstrate|build|design|explore|perform|conduct|"
    r"compare|analy[sz]e|train|define|derive|report|leverage|employ)",
    re.IGNORECASE,
)
_POSITIVE = re.compile(
    r"\b(novel|well[- ]written|interesting|clear(ly)?|strong|convincing|nice(ly)?|good|great|impressive|elegant|"
    r"solid|important|significant(ly)? (contribution|improvement)|well[- ]motivated|thorough|insightful|like|enjoyed|"
    r"valuable|useful|compelling|promising|excellent|appreciate)\b",
    0,
)
_NEGATIVE = re.compile(
    r"\b(unclear|not|no|lack(s|ing)?|missing|limited|weak(ness)?|fails?|however|but|unfortunately|hard to|"
    r"difficult|confusing|insufficient|incremental|concern(ed|s)?|problematic|doubt(ful)?|poor(ly)?|"
    r"unconvincing|overclaim|questionable|wrong|incorrect|errors?|misleading|trivial|cannot|can't|isn't|"
    r"doesn't|don't|aren't|won't)\b",
    0,
)
_SUGGEST = re.compile(
    r"\b(should|would be|i suggest|suggest(ion)?|recommend|could|it would|would like|consider(ing)?|"
    r"encourage|please|might want|needs? to|ought)\b",
    0,
)
_REJECT = re.compile(r"\b(reject(ed|ion)?|below the bar|not ready)\b")
_ACCEPT = re.compile(r"\b(accept\w*|above the bar)\b")
# The reviewer's own voice: in a summary section only such sentences (or a recommendation) can carry a judgment.
_FIRST_PERSON = re.compile(r"\b(i|my|me|i'm|i've|i'd)\b|\brecommend")
# Reported speech: the sentence restates what the paper or its authors say, not what the reviewer judges.
_REPORTED_RE = re.compile(
    r"\baccording to (the|this|their) (paper|authors?|abstract|submission|manuscript|work)\b|\baccording to them\b"
    r"|\b(as )?(stated|claimed|described|summari[sz]ed|reported|written|put) (in|by) (the|its|their) "
    r"(paper|authors?|abstract|submission|manuscript|work)\b"
    r"|\b(paper|authors?|work|submission)('s|s'|') (own )?(claims?|contributions?)\b"
    r"|\b(the )?authors? (claim|state|argue|write|say|assert|mention|report)(s|ed)?\b|\bis summari[sz]ed by\b",
    re.IGNORECASE,
)
_REPORTED_KEYS = ("according", "stated", "claimed", "described", "summari", "reported", "written", "put ", "claim",
                  "contribution", "author")
# After reported speech, the reviewer's judgment (if any) follows a contrast: "The authors claim X, but Y".
_CONTRAST_RE = re.compile(r"(?:[,;:]|\s[-–])\s*(?:but|however|yet|though|although|whereas)\b[\s,]*", re.IGNORECASE)
# A quotation of the authors' own words after a colon ("…: We show that …") is the paper's text, not a judgment.
_QUOTED_AUTHORS_RE = re.compile(r"\s*:\s*[\"“‘']?\s*(we|our|in this (paper|work))\b.*$", re.IGNORECASE | re.DOTALL)
# Meta-commentary: sentences about the review itself ("In this part of the review I set out …", "Below I list …").
_META_RE = re.compile(
    r"\b(this|my|the|our) (review|report)\b(?! (process|paper|article|of))"
    r"|\bmy (assessment|evaluation|comments|remarks|points|summary|understanding|reading)\b"
    r"|\b(points?|comments?|remarks?|concerns?|questions?|issues?|summary) (here|below|above|listed|that follow)\b"
    r"|\b(as follows|the following (points|comments|remarks|concerns|questions|issues))\b|\bthe following\W*$"
    r"|^(below|here|in (the following|what follows)|next|in this (part|section)),? (i|we)\b"
    r"|^(to (re)?state|to summari[sz]e|to sum up|in (one|a single) (line|sentence|word))\b"
    r"|\bi (will |would like to |shall |want to |now )?(list|set out|outline|summari[sz]e|restate|enumerate"
    r"|go through|elaborate on)\b",
    re.IGNORECASE,
)

# (pattern, replacement, substrings of which one must occur for the pattern to apply; () = always)
_CLEANERS: tuple[tuple[re.Pattern[str], str, tuple[str, ...]], ...] = (
    (re.compile(r"https?://\S+|www\.\S+"), " ", ("http", "www.")),
    (re.compile(r"\$\$.*?\$\$|\$[^$]*\$|\\\(.*?\\\)|\\\[.*?\\\]", re.DOTALL), " ", ("$", "\\")),
    (re.compile(r"\\[a-zA-Z]+(\{[^}]*\})*"), " ", ("\\",)),
    (re.compile(r"\[[^\]]*\]"), " ", ("[",)),
    (re.compile(r"\([^()]*\)"), " ", ("(",)),
    (re.compile(r"\([^()]*\)"), " ", ("(",)),
    (re.compile(r"\b[A-Za-z]*\d[\w.,%/-]*"), " ", ()),
    (re.compile(r"[\"“”‘`*_#|~^{}<>=+]|(?<!\w)[’']|[’'](?!\w)"), " ", ()),
    (re.compile(r"^(also|moreover|furthermore|additionally|further|besides|overall|first(ly)?|second(ly)?|"
                r"third(ly)?|finally|lastly|in addition|in general|in summary|to summarize|that said)\b[,:]?\s*",
                re.IGNORECASE), "", ()),
    (re.compile(r"^(i|we) (think|believe|feel|find|found|am (not )?(sure|convinced) (that|whether))\s+(that\s+)?",
                re.IGNORECASE), "", ()),
    (re.compile(r"^in my (opinion|view),?\s*", re.IGNORECASE), "", ()),
    (re.compile(r"\s+([,.;:!?])"), r"\1", ()),
    (re.compile(r"([,;:])(?:\s*[,;:])+"), r"\1", ()),
    (re.compile(r"\s{2,}"), " ", ()),
)
_REVIEW_PARTS_RE = re.compile(r"\b(concerns?|comments?|questions?|points?|issues?|suggestions?|remarks?|"
                              r"weakness(es)?|strengths?|criticisms?)\b")
_META_KEYS = ("review", "report", "my ", " here", "below", "above", "listed", "follow", " next", "this part",
              "this section", "restate", "to state", "summar", "sum up", "in one", "single", " list", "set out",
              "outline", "enumerate", "go through", "elaborate")


def classify_heading(name: str) -> str | None:
    """The section kind of a heading name (`appreciates`, `criticizes`, `describe`, ...), or None if unknown."""
    key = re.sub(r"[^a-z /&']", "", name.lower()).strip()
    key = re.sub(r"\s+", " ", key)
    for pattern, kind in _SECTION_RES:
        if pattern.match(key):
            if kind == "pros_or_cons":
                return "criticizes" if key.startswith("con") else "appreciates"
            return kind
    return None


def _heading(line: str) -> tuple[str | None, str]:
    """(section kind or 'neutral' when the line is a heading, rest of the line after an inline heading)."""
    stripped = line.strip()
    whole = _HEADING_LINE_RE.match(stripped)
    if whole and (stripped.endswith(":") or stripped.startswith(("#", "*")) or len(stripped.split()) <= 4):
        kind = classify_heading(whole.group(1))
        if kind is not None:
            return kind, ""
        if stripped.endswith(":") and len(stripped.split()) <= 5:
            return "neutral", ""
    inline = _INLINE_HEADING_RE.match(stripped)
    if inline:
        kind = classify_heading(inline.group(1))
        if kind is not None:
            return kind, inline.group(2)
    return None, stripped


def split_sentences(text: str) -> list[str]:
    """Sentences of one paragraph or line, ending at . ? ! (common abbreviations do not end a sentence)."""
    protected = text
    for abbr in _ABBREVIATIONS:
        protected = protected.replace(abbr, abbr.replace(".", "\x00"))
    return [s.replace("\x00", ".").strip() for s in _SENTENCE_END_RE.split(protected) if s.strip()]


def clean_sentence(sentence: str) -> str:
    """The sentence with math, numbers, citations, parentheses and connectors removed, capped in length."""
    text = sentence.strip()
    for pattern, repl, needs in _CLEANERS:
        if not needs or any(k in text for k in needs):
            text = pattern.sub(repl, text).strip()
    text = re.sub(r"^[\s\-–•:;,.)]+", "", text).rstrip(" ,;:-–")
    words = text.split()
    if len(words) > MAX_WORDS:
        text = " ".join(words[:MAX_WORDS]).rstrip(",;:")
    text = text.rstrip(".!?;, ")
    if text and not text[:2].isupper():
        text = text[0].lower() + text[1:]
    return text


def _cues(lowered: str) -> tuple[bool, bool, bool]:
    return (_POSITIVE.search(lowered) is not None, _NEGATIVE.search(lowered) is not None,
            _SUGGEST.search(lowered) is not None)


def _maybe(keys: tuple[str, ...], pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    """``pattern.search(text)``, skipped when no keyword it needs occurs (plain substring tests are much cheaper)."""
    lowered = " " + text.lower()
    for key in keys:
        if key in lowered:
            return pattern.search(text)
    return None


def is_meta(sentence: str) -> bool:
    """True for meta-commentary about the review itself that carries no judgment cue ("Below I list my concerns.").

    Words naming parts of a review (concerns, questions, suggestions, …) are not cues inside such a sentence.
    """
    if not _maybe(_META_KEYS, _META_RE, sentence):
        return False
    rest = _REVIEW_PARTS_RE.sub(" ", sentence.lower())
    return not (any(_cues(rest)) or sentence.rstrip().endswith("?"))


def introduces_quote(sentence: str) -> bool:
    """Reported speech that opens a quotation ("The claims, as stated in the abstract, are: …", "… as follows.")."""
    reported = _maybe(_REPORTED_KEYS, _REPORTED_RE, sentence)
    if reported is None:
        return False
    after = sentence[reported.end():]
    return ":" in after or re.search(r"\bas follows\b", after, re.IGNORECASE) is not None


def judgment_part(sentence: str, meta_checked: bool = False) -> tuple[str, bool] | None:
    """The part of a sentence that can carry the reviewer's judgment, and whether it follows a contrast.

    Quotations of the authors after a colon are cut; a meta prefix before a colon ("Below are my concerns: …") is
    cut; reported speech keeps only what follows a contrast ("The authors claim X, but Y" → Y) and is otherwise
    dropped (None); meta-commentary without a judgment cue is dropped (``meta_checked``: the caller already
    dropped the whole sentence if it was).
    """
    text = _QUOTED_AUTHORS_RE.sub("", sentence).strip()
    head, colon, tail = text.partition(":")
    if colon and tail.strip() and _maybe(_META_KEYS, _META_RE, head):
        text = tail.strip()
    contrasted = False
    reported = _maybe(_REPORTED_KEYS, _REPORTED_RE, text)
    if reported:
        contrast = _CONTRAST_RE.search(text, reported.end())
        if contrast is None:
            return None
        text, contrasted = text[contrast.end():].strip(), True
    if not text or ((text != sentence or not meta_checked) and is_meta(text)):
        return None
    return text, contrasted


def choose_verb(sentence: str, section: str | None, contrasted: bool = False) -> str | None:
    """The judgment verb for one sentence, or None when the sentence carries no judgment a rule can see.

    ``contrasted``: the sentence is what follows a contrast after reported speech (a criticism unless cued).
    """
    is_question = sentence.rstrip().endswith("?")
    if section in {"appreciates", "criticizes", "questions", "suggests"}:
        return "questions" if section == "appreciates" and is_question else section
    lowered = sentence.lower()
    positive, negative, suggest = _cues(lowered)
    negative = negative or contrasted
    evaluative = positive or negative or suggest or is_question
    if section == "describe" and not (evaluative and _FIRST_PERSON.search(lowered)):
        return None  # a summary section describes the paper; only the reviewer's own voice is a judgment there
    if (section in _SUMMARY_LIKE or _DESCRIPTIVE_RE.match(sentence)) and not evaluative:
        return None  # where the review may still be describing the paper, a judgment needs a visible cue
    if is_question:
        return "questions"
    if _REJECT.search(lowered):
        return "criticizes"
    if not negative and _ACCEPT.search(lowered):
        return "appreciates"
    if suggest:
        return "suggests"
    if negative:
        return "criticizes"
    if positive:
        return "appreciates"
    return DEFAULT_VERB


def _tag(match: re.Match[str]) -> str:
    """A section's opening tag as its heading on a line of its own, its closing tag as a paragraph break, any other
    tag as a space (rules-v7)."""
    name = match.group(2).replace("_", " ").replace("-", " ")
    if classify_heading(name) is None:
        return " "
    return "\n\n" if match.group(1) else f"\n\n{name}:\n"


def rules_judgment_lines(text: str, drop_content_free: bool = True) -> list[str]:
    """Rewrite one review into judgment lines, deterministically (same text → same lines).

    ``drop_content_free=False`` keeps lines made only of generic review vocabulary (rules-v4: how the vocabulary
    itself is measured).
    """
    lines: list[str] = []
    section: str | None = None
    seen_content = False
    section_content = False  # the current section has had a paragraph of content
    seen_paragraphs: set[str] = set()  # a passage repeated verbatim adds no judgment (and is not a new summary)
    text = _SOFT_WRAP_RE.sub(" ", text.replace("\r", "").replace("’", "'"))
    text = _TAG_RE.sub(_tag, text)
    for raw_line in text.split("\n"):
        if not raw_line.strip():
            if section == "opening-summary" and section_content:
                section = None  # an unheaded summary is one paragraph; what follows is the review proper
            elif section == "describe" and section_content:
                # a headed summary may run on for paragraphs (the Summary field of a review form): until the next
                # heading, a sentence is a judgment only with a visible cue (rules-v6)
                section = "after-summary"
            continue
        if set(raw_line.strip()) <= set("#*=-_~ "):
            continue
        kind, rest = _heading(raw_line)
        if kind is None:
            key = " ".join(raw_line.split()).lower()
            if key in seen_paragraphs:
                continue
            seen_paragraphs.add(key)
        sentences = [x for x in split_sentences(rest) if not is_meta(x)] if rest else []
        if kind is not None:
            section, section_content = (None if kind == "neutral" else kind), False
        elif section is None and not seen_content and sentences and _DESCRIPTIVE_RE.match(sentences[0]):
            # a review without headings usually opens with a summary paragraph: treat it as one
            section = "opening-summary"
        seen_content = seen_content or bool(sentences)  # meta-commentary is not the review's content
        section_content = section_content or bool(sentences)
        if section == "skip":
            continue
        for sentence in sentences:
            if introduces_quote(sentence):
                break  # "The authors' claims are: …" — the rest of the paragraph is the paper's text
            line = _sentence_line(sentence, section)
            if line is not None and line not in lines and not (drop_content_free and is_content_free(line)):
                lines.append(line)
    return lines


@lru_cache(maxsize=200_000)  # transformed reviews (controls) share most sentences with the human reviews
def _sentence_line(sentence: str, section: str | None) -> str | None:
    part = judgment_part(sentence, meta_checked=True)
    if part is None:
        return None
    verb = choose_verb(part[0], section, part[1])
    if verb is None:
        return None
    clause = clean_sentence(part[0])
    if len(clause.split()) < MIN_WORDS:
        return None
    joiner = " " if verb == "questions" else " that "
    return f"The reviewer {verb}{joiner}{clause}."

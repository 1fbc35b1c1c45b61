"""The deterministic `rules` preprocessor: judgment lines without an LLM.

It is a labelled fallback, not a substitute for the LLM rewrite: scores made with it are only comparable with other
scores made with it.  Each sentence of a review becomes at most one line.  The verb comes from the section the
sentence sits in (Strengths → appreciates, Weaknesses → criticizes, Questions → questions, Minor comments →
suggests) and, outside such sections, from cue words.  Sentences that only describe the paper are dropped, and
paper-specific details a rule can see (math, numbers, citations, parentheses, URLs) are removed.
"""

from __future__ import annotations

import re

RULES_ID = "rules-v1"
MAX_WORDS = 30
MIN_WORDS = 3
# Uncued sentences outside any section: in peer reviews these are mostly detailed critique (documented choice).
DEFAULT_VERB = "criticizes"

_SECTION_KINDS: tuple[tuple[str, str], ...] = (
    (r"references?|bibliography", "skip"),
    (r"(paper |review )?summary|synopsis|overview|contributions?|main contributions|paper (overview|description)"
     r"|what (this|the) paper (does|claims)|claims?|abstract", "describe"),
    (r"(cons|weakness(es)?|negatives?|concerns?|limitations?|drawbacks?|(major )?issues|criticisms?)"
     r"( (and|/|&) questions)?|cons questions", "criticizes"),
    (r"pros|strengths?|positives?|merits|positive (aspects|points)|what i liked|pro|con", "pros_or_cons"),
    (r"(some |other |specific |additional )?(questions?|clarifications?)( (for|to) the authors)?", "questions"),
    (r"suggestions?( for improvement)?|improvements?|(some |other )?minor( (comments|issues|points|remarks|typos))?"
     r"|typos?|nits?|(some )?typos|additional (feedback|comments)|feedback|minor concerns", "suggests"),
)
_SECTION_RES = [(re.compile(rf"^(?:{pattern})$"), kind) for pattern, kind in _SECTION_KINDS]
_HEADING_LINE_RE = re.compile(r"^[\s#*>_\-\d.()\[\]]*([A-Za-z][A-Za-z /&,'-]{1,50}?)[\s*_#]*[:.\-]?[\s*_#]*$")
_INLINE_HEADING_RE = re.compile(r"^[\s#*>_\-\d.()]*([A-Za-z][A-Za-z /&'-]{1,30}?)[\s*_]*:[\s*_]*(\S.*)$")

_ABBREVIATIONS = ("e.g.", "i.e.", "et al.", "etc.", "Fig.", "fig.", "Eq.", "eq.", "Sec.", "sec.", "vs.", "cf.",
                  "Tab.", "resp.", "approx.", "w.r.t.", "Thm.", "Appx.")
_SENTENCE_END_RE = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[A-Z0-9])")

_DESCRIPTIVE_RE = re.compile(
    r"^(?:(?:in|to do this|to this end|specifically|in particular|then|next|here)[^,]{0,30},\s*)?(in this (paper|work|submission)|this (paper|work|submission|manuscript|article|study)|the (paper|work|"
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

_CLEANERS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"https?://\S+|www\.\S+"), " "),
    (re.compile(r"\$\$.*?\$\$|\$[^$]*\$|\\\(.*?\\\)|\\\[.*?\\\]", re.DOTALL), " "),
    (re.compile(r"\\[a-zA-Z]+(\{[^}]*\})*"), " "),
    (re.compile(r"\[[^\]]*\]"), " "),
    (re.compile(r"\([^()]*\)"), " "),
    (re.compile(r"\([^()]*\)"), " "),
    (re.compile(r"\b[A-Za-z]*\d[\w.,%/-]*"), " "),
    (re.compile(r"[\"“”‘`*_#|~^{}<>=+]|(?<!\w)[’']|[’'](?!\w)"), " "),
    (re.compile(r"^(also|moreover|furthermore|additionally|further|besides|overall|first(ly)?|second(ly)?|"
                r"third(ly)?|finally|lastly|in addition|in general|in summary|to summarize|that said)\b[,:]?\s*",
                re.IGNORECASE), ""),
    (re.compile(r"^(i|we) (think|believe|feel|find|found|am (not )?(sure|convinced) (that|whether))\s+(that\s+)?",
                re.IGNORECASE), ""),
    (re.compile(r"^in my (opinion|view),?\s*", re.IGNORECASE), ""),
    (re.compile(r"\s+([,.;:!?])"), r"\1"),
    (re.compile(r"([,;:])(?:\s*[,;:])+"), r"\1"),
    (re.compile(r"\s{2,}"), " "),
)


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
    for pattern, repl in _CLEANERS:
        text = pattern.sub(repl, text).strip()
    text = re.sub(r"^[\s\-–•:;,.)]+", "", text).rstrip(" ,;:-–")
    words = text.split()
    if len(words) > MAX_WORDS:
        text = " ".join(words[:MAX_WORDS]).rstrip(",;:")
    text = text.rstrip(".!?;, ")
    if text and not text[:2].isupper():
        text = text[0].lower() + text[1:]
    return text


def choose_verb(sentence: str, section: str | None) -> str | None:
    """The judgment verb for one sentence, or None when the sentence only describes the paper."""
    is_question = sentence.rstrip().endswith("?")
    if section in {"appreciates", "criticizes", "questions", "suggests"}:
        return "questions" if section == "appreciates" and is_question else section
    lowered = sentence.lower()
    positive = _POSITIVE.search(lowered) is not None
    negative = _NEGATIVE.search(lowered) is not None
    suggest = _SUGGEST.search(lowered) is not None
    if section in ("describe", "opening-summary"):
        if not (positive or negative):
            return None
    elif _DESCRIPTIVE_RE.match(sentence) and not (positive or negative or suggest or is_question):
        return None
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


def rules_judgment_lines(text: str) -> list[str]:
    """Rewrite one review into judgment lines, deterministically (same text → same lines)."""
    lines: list[str] = []
    section: str | None = None
    seen_content = False
    for raw_line in text.replace("\r", "").replace("’", "'").split("\n"):
        if not raw_line.strip():
            if section == "opening-summary":
                section = None
            continue
        if set(raw_line.strip()) <= set("#*=-_~ "):
            continue
        kind, rest = _heading(raw_line)
        if kind is not None:
            section = None if kind == "neutral" else kind
        elif not seen_content and _DESCRIPTIVE_RE.match(rest):
            # a review without headings usually opens with a summary paragraph: treat it as one
            section = "opening-summary"
        seen_content = seen_content or bool(rest)
        if section == "skip" or not rest:
            continue
        for sentence in split_sentences(rest):
            verb = choose_verb(sentence, section)
            if verb is None:
                continue
            clause = clean_sentence(sentence)
            if len(clause.split()) < MIN_WORDS:
                continue
            joiner = " " if verb == "questions" else " that "
            line = f"The reviewer {verb}{joiner}{clause}."
            if line not in lines:
                lines.append(line)
    return lines

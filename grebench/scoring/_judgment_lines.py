"""Judgment lines: the one format every preprocessor must produce, and repair of near-misses.

A judgment line starts with exactly one of four phrases and carries one evaluation.  LLM preprocessors often
wrap good lines in bullets, numbering, quotes or markdown, or join two judgments with "and The reviewer ...";
those are repaired.  Anything else is refused with a reason, so a bad rewrite never reaches the score silently.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

PHRASES = (
    "The reviewer appreciates",
    "The reviewer criticizes",
    "The reviewer questions",
    "The reviewer suggests",
)
VERBS = ("appreciates", "criticizes", "questions", "suggests")

_VERB_ALIASES = {"criticises": "criticizes"}
_VERB_RE = r"(appreciates|criticizes|criticises|questions|suggests)"
_START_RE = re.compile(rf"^the\s+reviewer\s+{_VERB_RE}\b", re.IGNORECASE)
# a second judgment glued onto a line: "..., and The reviewer suggests ..." / "...; the reviewer questions ..."
_JOIN_RE = re.compile(rf"\s*(?:[;,.]\s*(?:and\s+)?|\s+and\s+)(?=the\s+reviewer\s+{_VERB_RE}\b)", re.IGNORECASE)
_DECORATION_RE = re.compile(r"^(?:[-*•+>·]\s*|#{1,6}\s*|\(?\d{1,3}[.):]\s*|\(?[a-z][.)]\s+)+")
_QUOTES = "\"'“”‘’`"


@dataclass
class ParsedJudgments:
    """Outcome of validating one preprocessor output: the accepted lines, or why the output was refused."""

    lines: list[str] = field(default_factory=list)
    repaired: int = 0
    error: str | None = None

    @property
    def ok(self) -> bool:
        """True when the output can be used for scoring."""
        return self.error is None


def is_judgment_line(line: str) -> bool:
    """Whether a line already has the exact canonical form (used by tests and by importers)."""
    return any(line.startswith(p + " ") for p in PHRASES) and not _JOIN_RE.search(line[len("The reviewer x"):])


def _strip_decoration(line: str) -> str:
    text = line.strip()
    for _ in range(3):
        before = text
        text = text.replace("**", "").replace("__", "").strip()
        text = _DECORATION_RE.sub("", text).strip()
        text = text.strip(_QUOTES).strip()
        if text == before:
            break
    return text


def _canonical(line: str) -> str | None:
    match = _START_RE.match(line)
    if match is None:
        return None
    verb = match.group(1).lower()
    verb = _VERB_ALIASES.get(verb, verb)
    rest = line[match.end():].strip()
    if not rest:
        return None
    return f"The reviewer {verb} {rest}"


def _looks_like_preamble(line: str) -> bool:
    """Framing an LLM adds around its answer ("Here are the judgments:", a heading) carries no judgment."""
    return line.endswith(":") or len(line.split()) <= 3


def parse_judgment_output(text: str) -> ParsedJudgments:
    """Validate and repair a preprocessor's output into canonical judgment lines."""
    result = ParsedJudgments()
    for raw in text.splitlines():
        if not raw.strip() or set(raw.strip()) <= set("-*=#_`"):
            continue
        cleaned = _strip_decoration(raw)
        for piece in _split_joined(cleaned):
            canonical = _canonical(_strip_decoration(piece))
            if canonical is None:
                if _looks_like_preamble(piece.strip()):
                    result.repaired += 1
                    continue
                result.error = f"line does not start with a judgment phrase: {piece.strip()[:120]!r}"
                result.lines = []
                return result
            if canonical != raw.strip():
                result.repaired += 1
            result.lines.append(canonical)
    if not result.lines:
        result.error = "no judgment lines in the output"
    return result


def _split_joined(line: str) -> list[str]:
    bounds = [(m.start(), m.end()) for m in _JOIN_RE.finditer(line)]
    if not bounds:
        return [line]
    pieces = []
    prev = 0
    for start, end in bounds:
        if start > prev:
            pieces.append(line[prev:start])
        prev = end
    pieces.append(line[prev:])
    return [p.strip(" ,;") for p in pieces if p.strip(" ,;")]

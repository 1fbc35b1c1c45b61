"""Split a free-form human review into its own sections and its sections into sentences.

Shared by the controls (sentence deletion, elongation) and usable by any stage
that needs a review's structure.  Rules, kept deliberately simple and fixed:

* A **heading** is a short line (at most 8 words) that is a markdown heading
  (``# ...``), a bold line (``**Pros**``), a known section word (summary,
  strengths, weaknesses, pros, cons, questions, ...) or any short line ending
  in ``:`` (``Reasons for score:``).  Text before the first heading is a
  section with the heading ``""``; a review without headings is one section.
* A **sentence** ends at ``.``, ``?`` or ``!`` followed by a space or the end
  of the line, or at a line break (methods.md §4).
"""

from __future__ import annotations

import re

KNOWN_HEADINGS = re.compile(
    r"^(summary|summary of (the )?(paper|review|contributions?)|paper summary|overview|review|"
    r"strengths?|weakness(es)?|pros|cons|pros and cons|strengths and weaknesses|questions?|"
    r"questions? (for|to) (the )?authors|comments|minor( comments| issues| points)?|major( comments| issues)?|"
    r"detailed comments|suggestions|recommendation|decision|reasons? for (the )?score|conclusion|"
    r"limitations|clarity|originality|significance|quality|novelty|typos)$", re.IGNORECASE)
_DECORATION = re.compile(r"^[\s#*_=~\-]*$")
_SENTENCE_END = re.compile(r"(?<=[.?!])\s+|(?<=[.?!][\"')\]])\s+")


def _heading_label(line: str) -> str | None:
    """The heading's text if ``line`` is a heading, else None."""
    stripped = line.strip()
    if not stripped or len(stripped) > 80 or _DECORATION.match(stripped):
        return None
    is_markdown = stripped.startswith("#")
    core = stripped.lstrip("#").strip()
    bold = re.fullmatch(r"(\*\*|__)(.+?)(\*\*|__):?", core)
    if bold:
        core = bold.group(2).strip()
    core_no_colon = core.rstrip(":").strip()
    words = core_no_colon.split()
    if not words or len(words) > 8 or re.search(r"[.?!]\s", core_no_colon):
        return None
    if is_markdown or bold or core.endswith(":") or KNOWN_HEADINGS.match(core_no_colon):
        return stripped
    return None


def split_sections(text: str) -> list[tuple[str, str]]:
    """The review's sections as ``[(heading line, body)]``; bodies keep their line breaks."""
    sections: list[tuple[str, list[str]]] = [("", [])]
    for line in text.splitlines():
        label = _heading_label(line)
        if label is not None:
            sections.append((label, []))
        else:
            sections[-1][1].append(line)
    out = [(heading, "\n".join(lines).strip("\n")) for heading, lines in sections]
    return [(h, b) for h, b in out if h or b.strip()]


def join_sections(sections: list[tuple[str, str]]) -> str:
    """Inverse of :func:`split_sections` up to blank lines: heading line, then body, sections apart."""
    blocks = []
    for heading, body in sections:
        blocks.append(f"{heading}\n{body}".strip("\n") if heading else body)
    return "\n\n".join(b for b in blocks if b.strip())


def split_sentences(body: str) -> list[tuple[int, str]]:
    """Sentences of a section body as ``(line number, sentence)``; blank lines carry none."""
    out = []
    for number, line in enumerate(body.splitlines()):
        if not line.strip():
            continue
        for piece in _SENTENCE_END.split(line.strip()):
            if piece.strip():
                out.append((number, piece.strip()))
    return out


def join_sentences(sentences: list[tuple[int, str]]) -> str:
    """Sentences back into text: same line joined with a space, new line where the source had one."""
    text = ""
    last: int | None = None
    for number, sentence in sentences:
        if last is None:
            text = sentence
        elif number == last:
            text += " " + sentence
        else:  # one line break, or a blank line where the source skipped lines (paragraphs stay apart)
            text += "\n" * min(2, number - last) + sentence
        last = number
    return text

"""Parse a model's review into its tagged sections, tolerating sloppy output."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from grebench.bench._sections import split_sections

SECTION_NAMES = ("summary", "strengths", "weaknesses", "questions")
_HEADING_KEYS = {
    "summary": ("summary", "overview"),
    "strengths": ("strength", "reasons to accept", "pros", "accept"),
    "weaknesses": ("weakness", "reasons to reject", "cons", "reject", "concerns"),
    "questions": ("question",),
}


@dataclass
class ParsedReview:
    """Sections found (name -> text), whether all four were found, and how."""

    sections: dict[str, str] = field(default_factory=dict)
    parse_ok: bool = False
    method: str = "none"  # tags | headings | none

    @property
    def missing(self) -> list[str]:
        """Sections the output did not contain."""
        return [name for name in SECTION_NAMES if not self.sections.get(name, "").strip()]


def _by_tags(text: str) -> dict[str, str]:
    found: dict[str, str] = {}
    others = "|".join(SECTION_NAMES)
    for name in SECTION_NAMES:
        # A missing closing tag ends the section at the next opening tag or at the end of the text.
        match = re.search(rf"<{name}>(.*?)(?:</{name}>|(?=<(?:{others})>)|\Z)", text, re.IGNORECASE | re.DOTALL)
        if match and match.group(1).strip():
            found[name] = match.group(1).strip()
    return found


def _by_headings(text: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for heading, body in split_sections(text):
        label = re.sub(r"[#*_:]", " ", heading).strip().lower()
        for name, keys in _HEADING_KEYS.items():
            if name not in found and body.strip() and any(k in label for k in keys):
                found[name] = body.strip()
                break
    return found


def parse_review(text: str) -> ParsedReview:
    """Tagged sections first, markdown/plain headings as a fallback; ``parse_ok`` needs all four."""
    tagged = _by_tags(text)
    if tagged:
        parsed = ParsedReview(tagged, method="tags")
    else:
        headed = _by_headings(text)
        parsed = ParsedReview(headed, method="headings" if headed else "none")
    parsed.parse_ok = not parsed.missing
    return parsed

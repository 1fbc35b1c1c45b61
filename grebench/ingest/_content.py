"""Turn a review's content object (OpenReview v1 or v2 shape) into text and sections."""

from __future__ import annotations

import re
from typing import Any

# Fields that carry the reviewer's own words, in the order a reader expects them.
TEXT_FIELDS = (
    "summary", "summary_of_the_paper", "paper_summary", "summary_and_contributions", "summary_of_contributions",
    "main_review", "review", "strength_and_weaknesses", "strengths_and_weaknesses", "strengths", "weaknesses",
    "claims_and_evidence", "audience", "questions", "questions_for_authors", "requested_changes", "limitations",
    "limitations_and_societal_impact", "broader_impact_concerns", "additional_feedback",
    "clarity,_quality,_novelty_and_reproducibility", "summary_of_the_review", "comment", "metareview",
    "additional_comments_on_reviewer_discussion", "justification_for_why_not_higher_score",
    "justification_for_why_not_lower_score",
)
RATING_FIELDS = ("rating", "recommendation", "final_rating", "overall_assessment")
CONFIDENCE_FIELDS = ("confidence",)


def field_value(content: dict[str, Any], name: str) -> Any:
    """A content field, unwrapped from API v2's ``{"value": ...}`` form."""
    value = content.get(name)
    if isinstance(value, dict) and "value" in value:
        return value["value"]
    return value


def heading(name: str) -> str:
    """Readable heading for a content field name."""
    return re.sub(r"[_\s]+", " ", name).strip(" ,").capitalize()


def review_text(content: dict[str, Any]) -> tuple[str, list[tuple[str, str]]]:
    """The review as one text plus its sections ``[(heading, text)]``.

    Raises ValueError when the content holds no reviewer text at all.
    """
    sections: list[tuple[str, str]] = []
    for name in TEXT_FIELDS:
        value = field_value(content, name)
        if isinstance(value, str) and value.strip():
            sections.append((heading(name), value.strip()))
    if not sections:
        raise ValueError("review content has no text field (expected one of: " + ", ".join(TEXT_FIELDS[:6]) + ", ...)")
    if len(sections) == 1:
        return sections[0][1], sections
    return "\n\n".join(f"{h}:\n{t}" for h, t in sections), sections


def first_str(content: dict[str, Any], names: tuple[str, ...]) -> str | None:
    """The first of ``names`` present as a scalar, as a string."""
    for name in names:
        value = field_value(content, name)
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return str(value)
    return None


def venue_year(venue_id: str) -> int | None:
    """The year in a venue id such as ``ICLR.cc/2020/Conference``."""
    match = re.search(r"(?<!\d)(19|20)\d\d(?!\d)", venue_id)
    return int(match.group(0)) if match else None

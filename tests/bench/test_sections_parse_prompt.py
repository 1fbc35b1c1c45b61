"""Section splitting, output parsing and the context-fitting rule."""

from __future__ import annotations

from grebench.bench import parse_review, split_sections, split_sentences
from grebench.bench._prompt import PaperInput, fit_to_context, review_messages
from grebench.llm import count_tokens

REVIEW = """Summary:
The paper does X. It works well!

**Strengths**
1. Clear. Really clear?
2. Fast.

## Weaknesses
Small data.
"""


def test_split_sections_finds_headings_and_keeps_bodies() -> None:
    sections = split_sections(REVIEW)
    assert [h for h, _ in sections] == ["Summary:", "**Strengths**", "## Weaknesses"]
    assert sections[1][1] == "1. Clear. Really clear?\n2. Fast."
    assert split_sections("No headings here. Just text.") == [("", "No headings here. Just text.")]


def test_split_sentences_ends_at_punctuation_and_line_breaks() -> None:
    assert [s for _, s in split_sentences("A b. C d? E!\nF g\n\nH 0.5 i.")] == ["A b.", "C d?", "E!", "F g", "H 0.5 i."]


def test_parse_tags_missing_close_and_headings_fallback() -> None:
    tagged = parse_review("<summary>S</summary><strengths>1. a<weaknesses>1. b</weaknesses><questions>q")
    assert tagged.parse_ok and tagged.method == "tags" and tagged.sections["strengths"] == "1. a"
    assert tagged.sections["questions"] == "q"
    md = parse_review("## Summary\nS\n## Strengths\n1. a\n## Weaknesses\n1. b\n## Questions\n- q")
    assert md.parse_ok and md.method == "headings" and md.sections["weaknesses"] == "1. b"
    free = parse_review("I liked it. Accept.")
    assert not free.parse_ok and free.method == "none" and free.missing == ["summary", "strengths", "weaknesses",
                                                                             "questions"]


def test_fit_to_context_cuts_references_first_then_the_end() -> None:
    body = "word " * 2000
    text = body + "\nReferences\n" + "Smith et al. 2019. " * 200
    cut, flags = fit_to_context(text, count_tokens(body) + 50)
    assert flags["cut_at_references"] and flags["paper_truncated"] and "Smith" not in cut
    cut2, flags2 = fit_to_context(text, 100)
    assert flags2["paper_truncated"] and count_tokens(cut2) <= 100 and cut2.startswith("word")
    same, flags3 = fit_to_context("short", 100)
    assert same == "short" and not flags3["paper_truncated"]


def test_review_messages_use_full_text_when_available_and_fit_the_budget() -> None:
    paper = PaperInput("p", "T", "An abstract.", "Intro. " * 20_000)
    params = {"max_tokens": 1000, "context_tokens": 8000}
    messages, flags = review_messages(paper, params)
    assert flags["paper_input"] == "full_text" and flags["paper_truncated"]
    assert count_tokens(messages[0][1]) <= 8000 - 1000
    assert "<strengths>" in messages[0][1] and "Intro." in messages[0][1]
    _, flags_abs = review_messages(PaperInput("p", "T", "An abstract.", None), params)
    assert flags_abs["paper_input"] == "title_abstract" and not flags_abs["paper_truncated"]

"""The versioned review prompt and the rule that fits a paper into a model's context.

Fitting rule (tokens counted offline, see :func:`grebench.llm.count_tokens`):
``budget = context_tokens - max_tokens - prompt overhead - margin`` with
``margin = 256 + 2% of context_tokens`` (tokenizers differ between models).
A paper over budget is first cut at its references heading (the last line
reading "References" or "Bibliography"); if still too long, its end is cut.
The flags record which input was used and whether it was cut.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

REVIEW_PROMPT_VERSION = "review-v2"  # v2: the paper is fenced with an unforgeable boundary, one pass
_REFERENCES = re.compile(r"(?im)^[ \t]*(?:\d+\.?[ \t]*)?(references|bibliography)[ \t]*:?[ \t]*$")


def review_template(version: str = REVIEW_PROMPT_VERSION) -> str:
    """The prompt text of a version, from ``grebench/bench/prompts/``."""
    name = version.replace("-", "_") + ".txt"
    return resources.files("grebench.bench").joinpath("prompts", name).read_text(encoding="utf-8")


@dataclass(frozen=True)
class PaperInput:
    """What a candidate sees of a paper."""

    paper_id: str
    title: str
    abstract: str | None
    full_text: str | None  # paper_texts.text when its extraction is ok


def paper_content(paper: PaperInput, abstract_only: bool = False) -> tuple[str, str]:
    """The paper as text and which input it is: ``full_text`` or ``title_abstract``."""
    if paper.full_text and paper.full_text.strip() and not abstract_only:
        return paper.full_text, "full_text"
    return f"Title: {paper.title}\n\nAbstract: {paper.abstract or '(no abstract available)'}", "title_abstract"


def fit_to_context(text: str, budget_tokens: int) -> tuple[str, dict[str, Any]]:
    """Cut ``text`` to ``budget_tokens``: at the references first, then from the end."""
    from grebench.llm import count_tokens, tokenizer_name, truncate_to_tokens

    tokens = count_tokens(text)
    flags: dict[str, Any] = {"paper_tokens": tokens, "tokenizer": tokenizer_name(), "paper_truncated": False,
                             "cut_at_references": False}
    if tokens <= budget_tokens:
        return text, flags
    matches = list(_REFERENCES.finditer(text))
    if matches and matches[-1].start() > len(text) // 3:
        text = text[: matches[-1].start()].rstrip()
        flags["cut_at_references"] = True
        tokens = count_tokens(text)
    if tokens > budget_tokens:
        text = truncate_to_tokens(text, max(budget_tokens, 0))
    flags["paper_truncated"] = True
    flags["paper_tokens_kept"] = count_tokens(text)
    return text, flags


def review_messages(paper: PaperInput, params: dict[str, Any], abstract_only: bool = False,
                    version: str = REVIEW_PROMPT_VERSION) -> tuple[tuple[tuple[str, str], ...], dict[str, Any]]:
    """Chat messages asking for a review of ``paper``, and flags describing the input."""
    from grebench.llm import count_tokens, fill

    template = review_template(version)
    content, source = paper_content(paper, abstract_only)
    overhead = count_tokens(fill(template, {"PAPER": ""}, ["PAPER"])[0])
    context = int(params["context_tokens"])
    budget = context - int(params["max_tokens"]) - overhead - (256 + context // 50)
    fitted, flags = fit_to_context(content, budget)
    flags["paper_input"] = source
    return (("user", fill(template, {"PAPER": fitted}, ["PAPER"])[0]),), flags

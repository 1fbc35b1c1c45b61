"""Review texts on a page: the product's own prompt delimiters stripped, markdown rendered safely.

A review is untrusted text (a candidate's output, a submitted file).  Two things reach a page from it:

- **prompt delimiters**: every untrusted value in a prompt is fenced between ``<<<NAME BOUNDARY>>>`` and
  ``<<<END NAME BOUNDARY>>>`` lines (:mod:`grebench.llm._fence`; the reading note names the form ``<<<NAME …>>>``).
  A model that echoes its prompt (a small local model continuing the fenced paper, or one that quotes the paper
  back) writes those lines into its review.  They are the product's own markers, never review content: every
  ``<<<NAME>>>``, ``<<<NAME BOUNDARY>>>`` and ``<<<END NAME …>>>`` is removed wherever a review is shown (the
  stored text stays as generated: it is what was scored);
- **markdown**: reviews are written in markdown (``**bold**``, `` `code` ``, lists).  They are rendered with
  markdown-it-py in CommonMark mode with raw HTML off (so ``<script>`` is shown as text, escaped) and its default
  link check (no ``javascript:``/``data:`` links).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from markupsafe import Markup

#: The product's prompt delimiters (grebench.llm._fence): ``<<<`` [``END ``] NAME [`` `` 16 hex digits or a
#: placeholder word] ``>>>``, with the rest of a line that holds nothing else.
PROMPT_MARKER = re.compile(r"<<<(?:END )?[A-Z][A-Z0-9_]*(?: (?:[0-9a-f]{16}|[A-Za-z0-9_…. -]{1,40}))?>>>[ \t]*\n?")


def strip_prompt_markers(text: str | None) -> str:
    """``text`` without the product's own prompt delimiters (see the module's doc)."""
    return PROMPT_MARKER.sub("", text or "")


@lru_cache(maxsize=1)
def _renderer() -> Any:
    from markdown_it import MarkdownIt

    # CommonMark, raw HTML off (escaped as text); tables and strikethrough as reviews use them
    return MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable(
        ["table", "strikethrough"])


def review_html(text: str | None) -> Markup:
    """A review as safe HTML: prompt delimiters stripped, markdown rendered with raw HTML escaped."""
    return Markup(_renderer().render(strip_prompt_markers(text)))  # markdown-it escapes raw HTML (html off)


def inline_html(text: str | None) -> Markup:
    """One line of the product's own words that may carry markdown (a board finding's `` `generic` ``) as safe
    inline HTML: no paragraph around it, raw HTML escaped."""
    return Markup(_renderer().renderInline(text or ""))


__all__ = ["PROMPT_MARKER", "inline_html", "review_html", "strip_prompt_markers"]

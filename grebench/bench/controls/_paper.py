"""The GEM paper's controls (methods.md §4), plus the constant review and the other paper's review.

Deterministic ones need no LLM: sentence deletion, meaningless elongation, abstract restatement, a constant generic
review, and the human review of a different paper.  The LLM-made ones (deletion & completion, rephrase,
abstract-only) are prompts sent to ``control_model``.
"""

from __future__ import annotations

import random
from importlib import resources

from grebench.bench._prompt import REVIEW_PROMPT_VERSION, review_messages
from grebench.bench._sections import join_sections, join_sentences, split_sections, split_sentences
from grebench.bench.controls._base import (
    NOT_REWARDED,
    PENALISED,
    ControlInput,
    ControlSkip,
    Messages,
    register_control,
    register_llm_control,
)
from grebench.bench.controls._filler import GAMING_VERSION, varied_elongation
from grebench.llm import fill

CONTROL_VERSION = "control-v1"


def _prompt_file(name: str) -> str:
    return resources.files("grebench.bench").joinpath("prompts", name).read_text(encoding="utf-8").strip()


# The generic control (identical for every paper) and the LLM-made controls' prompts live in prompts/.
GENERIC_REVIEW = _prompt_file("generic_review_v1.txt")
REPHRASE_PROMPT = _prompt_file("rephrase_v2.txt")  # v2: the review is fenced (grebench.llm.fill), one pass
COMPLETION_PROMPT = _prompt_file("deletion_completion_v2.txt")


def sentence_deletion(text: str) -> str:
    """Keep sentences 1, 3, 5, ... of every section; drop the even-numbered ones."""
    out = []
    for heading, body in split_sections(text):
        kept = [s for i, s in enumerate(split_sentences(body)) if i % 2 == 0]
        out.append((heading, join_sentences(kept)))
    return join_sections(out)


def deletion_with_gaps(text: str, marker: str = "[MISSING]") -> str:
    """Sentence deletion with each removed sentence replaced by ``marker`` (input of deletion & completion)."""
    out = []
    for heading, body in split_sections(text):
        sentences = [(n, s if i % 2 == 0 else marker) for i, (n, s) in enumerate(split_sentences(body))]
        out.append((heading, join_sentences(sentences)))
    return join_sections(out)


def abstract_restatement(title: str, abstract: str) -> str:
    """A review-shaped text that only restates the abstract (deterministic stand-in for abstract-only)."""
    sentences = [s for _, s in split_sentences(" ".join(abstract.split()))]
    half = max(1, len(sentences) // 2)
    lines = ["Summary:", f"The paper \"{title.strip()}\" is summarised by its authors as follows. "
             + " ".join(sentences[:half]), "", "Strengths:"]
    lines += [f"{i}. According to the paper: {s}" for i, s in enumerate(sentences[half:] or sentences[:1], 1)]
    lines += ["", "Weaknesses:", "1. The paper's claims, as stated in its abstract, are: " + " ".join(sentences[:2]),
              "", "Questions:", "- Do the results support the summary above: " + sentences[-1]]
    return "\n".join(lines)


def derangement(paper_ids: list[str], seed: int) -> dict[str, str]:
    """Map every paper to a different paper (seeded shuffle, then each takes the next one's place)."""
    if len(paper_ids) < 2:
        return {}
    order = sorted(paper_ids)
    random.Random(f"{seed}:other-paper").shuffle(order)
    return {order[i]: order[(i + 1) % len(order)] for i in range(len(order))}


# -- registrations -------------------------------------------------------------------------------------------------
@register_control("sentence-deletion", kind="degradation", expected=PENALISED, source="human", paper_d=-0.409,
                  core=True,
                  description="The human candidate review with every second sentence of each section removed.")
def _sentence_deletion(inp: ControlInput) -> str:
    return sentence_deletion(inp.require_human())


@register_control("elongation", kind="manipulation", expected=NOT_REWARDED, source="human", paper_d=-0.070, core=True,
                  version=GAMING_VERSION, description="The human candidate review with 3-6 varied content-free "
                  "sentences (seeded pools) inserted at random places in each section.")
def _elongation(inp: ControlInput) -> str:
    return varied_elongation(inp.require_human(), inp.rng("elongation"))


@register_control("abstract-restatement", kind="degradation", expected=PENALISED, exam_role="pertinence", core=True,
                  needs_abstract=True, description="A review that only restates the paper's abstract.")
def _abstract_restatement(inp: ControlInput) -> str:
    if not (inp.paper.abstract or "").strip():
        raise ControlSkip("paper has no abstract")
    return abstract_restatement(inp.paper.title, inp.paper.abstract or "")


@register_control("generic", kind="degradation", expected=PENALISED, exam_role="easy", floor="a generic review",
                  description="One constant, plausible, content-free review, the same for every paper.")
def _generic(inp: ControlInput) -> str:
    return GENERIC_REVIEW


@register_control("other-paper", kind="degradation", expected=PENALISED, source="other", exam_role="easy", core=True,
                  floor="a review of another paper",
                  description="The human candidate review of a different paper (seeded derangement).")
def _other_paper(inp: ControlInput) -> str:
    if inp.other is None:
        raise ControlSkip("needs at least two eligible papers")
    return inp.other


@register_llm_control("deletion-completion", kind="degradation", expected=PENALISED, source="human",
                      version="deletion-completion-v2", paper_d=-0.206,
                      description="Sentence deletion with the removed sentences refilled by an LLM in the same style.")
def _deletion_completion(inp: ControlInput) -> Messages:
    return (("user", fill(COMPLETION_PROMPT, {"REVIEW": deletion_with_gaps(inp.human or "")}, ["REVIEW"])[0]),)


@register_llm_control("rephrase", kind="manipulation", expected=NOT_REWARDED, source="human", version="rephrase-v2",
                      paper_d=-0.114, description="The human candidate review rephrased by an LLM, keeping every "
                      "judgment.")
def _rephrase(inp: ControlInput) -> Messages:
    return (("user", fill(REPHRASE_PROMPT, {"REVIEW": inp.human or ""}, ["REVIEW"])[0]),)


@register_llm_control("abstract-only", kind="degradation", expected=PENALISED,
                      version=f"abstract-only-{REVIEW_PROMPT_VERSION}", paper_d=-0.566, needs_abstract=True,
                      description="A review written by an LLM from the title and abstract alone.")
def _abstract_only(inp: ControlInput) -> Messages:
    return review_messages(inp.paper, {"context_tokens": 1 << 20, "max_tokens": 1}, abstract_only=True)[0]

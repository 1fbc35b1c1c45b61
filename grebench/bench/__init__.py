"""The bench stage: candidates (LLMs, the human baseline, controls) write reviews of each paper.

Importing this package does not import litellm; LLM calls go through
:mod:`grebench.llm` only when an LLM candidate runs.
"""

from grebench.bench._baseline import Split, choose_split, make_splits
from grebench.bench._contamination import clean_pairs, is_clean, is_sealed
from grebench.bench._parse import ParsedReview, parse_review
from grebench.bench._prompt import REVIEW_PROMPT_VERSION, review_messages
from grebench.bench._registry import Candidate, CandidateError, load_candidates, sync_candidates
from grebench.bench._run import run_bench
from grebench.bench._sections import split_sections, split_sentences

__all__ = ["REVIEW_PROMPT_VERSION", "Candidate", "CandidateError", "ParsedReview", "Split", "choose_split",
           "clean_pairs", "is_clean", "is_sealed", "load_candidates", "make_splits", "parse_review",
           "review_messages", "run_bench", "split_sections", "split_sentences", "sync_candidates"]

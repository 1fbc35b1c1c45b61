"""Scoring stage: judgment lines, GEM / GEM-S through an estimator, bootstrap aggregation, the leaderboard.

Public API (importing it never imports torch or litellm):

* :func:`run_scoring` — score every stored generation against its references, with caching.
* :func:`leaderboard` — the ranked rows of one (metric, estimator, preprocessor) table.
* :func:`bootstrap_ci`, :func:`paired_difference`, :func:`rank_intervals` — the bootstrap over papers.
* :func:`rules_judgment_lines`, :func:`parse_judgment_output`, :func:`resolve_preprocessor` — preprocessing.
"""

from grebench.scoring._aggregate import bootstrap_ci, paired_difference, rank_intervals
from grebench.scoring._engine import DEFAULT_METRICS, METRICS, ScoringError, request_key, run_scoring
from grebench.scoring._judgment_lines import PHRASES, parse_judgment_output
from grebench.scoring._leaderboard import available_tables, leaderboard, per_paper_scores
from grebench.scoring._preprocess import PREPROCESS_PROMPT_VERSION, preprocess_texts, resolve_preprocessor
from grebench.scoring._rules import RULES_ID, rules_judgment_lines

__all__ = [
    "DEFAULT_METRICS",
    "METRICS",
    "PHRASES",
    "PREPROCESS_PROMPT_VERSION",
    "RULES_ID",
    "ScoringError",
    "available_tables",
    "bootstrap_ci",
    "leaderboard",
    "paired_difference",
    "parse_judgment_output",
    "per_paper_scores",
    "preprocess_texts",
    "rank_intervals",
    "request_key",
    "resolve_preprocessor",
    "rules_judgment_lines",
    "run_scoring",
]

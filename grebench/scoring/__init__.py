"""Scoring stage: judgment lines, GEM / GEM-S through an estimator, bootstrap aggregation, the leaderboard.

Public API (importing it never imports torch or litellm):

* :func:`run_scoring` — score every stored generation against its references, with caching;
  :class:`EstimatorHandle` — a job's estimator, decided once and built on first use (the resolved run holds it).
* :func:`score_texts` — score any texts against their papers' references with a stored setup (the panel's gem judge);
  :func:`stored_pmis` — the stored ones by text; :func:`gem_judge_metric` — the metric the gem judge reads;
  :func:`unconditional_logprobs` — a text's log-likelihood under the evaluation LM alone (the prose test's LM path);
  :class:`CachedLogprobs` — an estimator behind the log-prob cache, for checks that build their own requests.
* :func:`paper_attribution`, :func:`attribution_summary` — what each judgment line adds to a score (leave one out).
* :func:`compute_boards` / :func:`stored_boards` — the leaderboards, computed once and stored; readers read them.
* :func:`information_flags` — the information view of a copy (one reference explained far beyond any human review);
  :func:`information_shift` — the same summed over a submission (its per-paper ratios against honest reviewers');
  :func:`sealed_gap` — a submission's information where the reviews were public when it wrote against its own where
  they were sealed (what copying adds, whatever its wording);
  :class:`LMCopyCheck` — copy evidence from the evaluation LM, line by line, calibrated on honest pairs;
  :class:`NearCopyCheck` — the same against the public reviews of a review's nearest *other* papers (an unlinked
  disguised resubmission's earlier version).
* :class:`LMAbstractReader` — the evaluation LM's view of two papers' abstracts, read by
  linking (issue 62: possible resubmissions by what the abstracts say, whatever their words).
* :func:`validation_rows` — the metric's validation (Cohen's d of every control vs the human review).
* :func:`board_findings` — what a board can tell, in words (rows against the floor controls, controls above the
  human baseline); :func:`compare_pair`, :func:`board_paper_scores` — two contestants of a board side by side.
* :func:`leaderboard` — the ranked rows of one (metric, estimator, preprocessor) table; :func:`ranked_board` — the
  rows with the board's style-controlled view (:class:`StyleControl`, :func:`style_features`, :func:`style_controlled`).
* :func:`bootstrap_ci`, :func:`paired_difference`, :func:`rank_intervals` — the bootstrap over papers;
  :func:`paired_test`, :func:`format_p` — the one paired test (sign-flip, the paper as the unit) and how a p is shown.
* :func:`provenance` — what produced the stored boards (code version, evaluation LM, prompts, decoding, sample,
  panel), one dict for leaderboard.json, the pages, the snapshot manifest and the app; :func:`code_version`.
* :func:`rules_judgment_lines`, :func:`parse_judgment_output`, :func:`resolve_preprocessor` — preprocessing
  (the one builder of a :class:`Preprocessor`: scoring takes the built object).
"""

from grebench.scoring._abstracts import LMAbstractReader
from grebench.scoring._aggregate import (
    ALPHA,
    PairedTest,
    bootstrap_ci,
    format_p,
    paired_difference,
    paired_test,
    papers_to_decide,
    rank_intervals,
    smallest_p,
)
from grebench.scoring._attribution import (
    ATTRIBUTION_CHOICES,
    ATTRIBUTION_THRESHOLD,
    attribution_summary,
    line_class,
    paper_attribution,
)
from grebench.scoring._boards import (
    BOARD_VERSION,
    BOARDS,
    SCOPES,
    SampleFacts,
    StoredBoard,
    board_id,
    board_lineage,
    boards_fingerprint,
    compute_boards,
    headline_board,
    headline_first,
    sample_facts,
    stored_boards,
    superseded_estimators,
    venue_scope,
)
from grebench.scoring._compare import TOP_PAPERS, Comparison, PaperDifference, board_paper_scores, compare_pair
from grebench.scoring._engine import Attribution, ScoringError, request_key, run_scoring
from grebench.scoring._judgment_lines import PHRASES, parse_judgment_output
from grebench.scoring._labels import store_labels
from grebench.scoring._leaderboard import (
    CONTAMINATED,
    CONTAMINATED_NOTE,
    INCOMPLETE,
    INCOMPLETE_NOTE,
    REFERENCE_WORD,
    BoardRow,
    FloorTest,
    LeaderboardRow,
    StoredRow,
    available_tables,
    board_findings,
    board_floors,
    is_baseline_row,
    is_contaminated_row,
    is_incomplete_row,
    leaderboard,
    per_paper_scores,
    rank_bounds,
    rank_range,
    rank_word,
    ranked_board,
    style_controlled,
)
from grebench.scoring._lmcopy import LMCopyCheck, LMCopyEvidence, PaperReviews, conformal_bar, line_gain
from grebench.scoring._metrics import (
    METRICS,
    RAW_PREPROCESSOR,
    Metric,
    SynopsisInputs,
    abstract_free_metric,
    default_metrics,
    headline_metric,
    metric,
    metric_preprocessor,
)
from grebench.scoring._nearcopy import NearCopyCheck, NearCopyEvidence
from grebench.scoring._outliers import (
    GAP_ALPHA,
    GAP_FACTOR,
    GAP_MIN_PAPERS,
    HUMAN_FACTOR,
    SHIFT_ALPHA,
    SHIFT_FACTOR,
    GapTest,
    InformationFlag,
    ShiftTest,
    gap_test,
    information_flags,
    information_shift,
    sealed_gap,
    shift_test,
)
from grebench.scoring._preprocess import (
    PREPROCESS_PROMPT_VERSION,
    PREPROCESSORS,
    Preprocessor,
    preprocess_texts,
    preprocessor_entry,
    resolve_preprocessor,
)
from grebench.scoring._provenance import REBUILD_COMMAND, code_version, estimator_facts, provenance
from grebench.scoring._request import GEM_PROMPT_VERSION, LogprobRequest, LogprobResult
from grebench.scoring._rules import RULES_ID, rules_judgment_lines
from grebench.scoring._setup import ScoredSetup
from grebench.scoring._style import FEATURES as STYLE_FEATURES
from grebench.scoring._style import StyleCoefficient, StyleControl, StyleScore, style_features
from grebench.scoring._texts import (
    CachedLogprobs,
    TextPmis,
    TextScores,
    gem_judge_metric,
    score_texts,
    stored_pmis,
    unconditional_logprobs,
)
from grebench.scoring._validate import (
    TOO_FEW,
    VALIDATION_INPUTS,
    EstimatorAgreement,
    ValidationRow,
    cohens_d,
    estimator_agreement,
    meets_expectation,
    store_report,
    transformations,
    validation_fingerprint,
    validation_rows,
    verdict,
)
from grebench.scoring.estimators import EstimatorHandle

__all__ = [
    "ALPHA",
    "ATTRIBUTION_CHOICES",
    "ATTRIBUTION_THRESHOLD",
    "BOARDS",
    "BOARD_VERSION",
    "CONTAMINATED",
    "CONTAMINATED_NOTE",
    "GAP_ALPHA",
    "GAP_FACTOR",
    "GAP_MIN_PAPERS",
    "GEM_PROMPT_VERSION",
    "HUMAN_FACTOR",
    "INCOMPLETE",
    "INCOMPLETE_NOTE",
    "METRICS",
    "PHRASES",
    "PREPROCESSORS",
    "PREPROCESS_PROMPT_VERSION",
    "RAW_PREPROCESSOR",
    "REBUILD_COMMAND",
    "REFERENCE_WORD",
    "RULES_ID",
    "SCOPES",
    "SHIFT_ALPHA",
    "SHIFT_FACTOR",
    "STYLE_FEATURES",
    "TOO_FEW",
    "TOP_PAPERS",
    "VALIDATION_INPUTS",
    "Attribution",
    "BoardRow",
    "CachedLogprobs",
    "Comparison",
    "EstimatorAgreement",
    "EstimatorHandle",
    "FloorTest",
    "GapTest",
    "InformationFlag",
    "LMAbstractReader",
    "LMCopyCheck",
    "LMCopyEvidence",
    "LeaderboardRow",
    "LogprobRequest",
    "LogprobResult",
    "Metric",
    "NearCopyCheck",
    "NearCopyEvidence",
    "PairedTest",
    "PaperDifference",
    "PaperReviews",
    "Preprocessor",
    "SampleFacts",
    "ScoredSetup",
    "ScoringError",
    "ShiftTest",
    "StoredBoard",
    "StoredRow",
    "StyleCoefficient",
    "StyleControl",
    "StyleScore",
    "SynopsisInputs",
    "TextPmis",
    "TextScores",
    "ValidationRow",
    "abstract_free_metric",
    "attribution_summary",
    "available_tables",
    "board_findings",
    "board_floors",
    "board_id",
    "board_lineage",
    "board_paper_scores",
    "boards_fingerprint",
    "bootstrap_ci",
    "code_version",
    "cohens_d",
    "compare_pair",
    "compute_boards",
    "conformal_bar",
    "default_metrics",
    "estimator_agreement",
    "estimator_facts",
    "format_p",
    "gap_test",
    "gem_judge_metric",
    "headline_board",
    "headline_first",
    "headline_metric",
    "information_flags",
    "information_shift",
    "is_baseline_row",
    "is_contaminated_row",
    "is_incomplete_row",
    "leaderboard",
    "line_class",
    "line_gain",
    "meets_expectation",
    "metric",
    "metric_preprocessor",
    "paired_difference",
    "paired_test",
    "paper_attribution",
    "papers_to_decide",
    "parse_judgment_output",
    "per_paper_scores",
    "preprocess_texts",
    "preprocessor_entry",
    "provenance",
    "rank_bounds",
    "rank_intervals",
    "rank_range",
    "rank_word",
    "ranked_board",
    "request_key",
    "resolve_preprocessor",
    "rules_judgment_lines",
    "run_scoring",
    "sample_facts",
    "score_texts",
    "sealed_gap",
    "shift_test",
    "smallest_p",
    "store_labels",
    "store_report",
    "stored_boards",
    "stored_pmis",
    "style_controlled",
    "style_features",
    "superseded_estimators",
    "transformations",
    "unconditional_logprobs",
    "validation_fingerprint",
    "validation_rows",
    "venue_scope",
    "verdict",
]

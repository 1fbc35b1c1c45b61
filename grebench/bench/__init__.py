"""The bench stage: candidates (LLMs, the human baseline, controls) write reviews of each paper.

Public API (importing it does not import litellm; LLM calls go through :mod:`grebench.llm` only when an LLM
candidate runs):

* :func:`run_bench` — every missing review of the eligible papers; :func:`generate_for` — LLM reviews of chosen
  papers (sealed generations before the reviews are public, submitted models).
* :data:`CANDIDATE_KINDS`, :func:`load_candidates` — configured candidates; :data:`CONTROLS` — the controls.
* :func:`import_reviews` — reviews written elsewhere as a candidate of kind ``imported`` (``grebench bench import``);
  :func:`read_import` checks a file without writing (:class:`ImportRefused` lists the bad lines).
* contamination rules (:func:`is_clean`, :func:`is_sealed`), the human-baseline splits, review parsing.
* the copy detector: :func:`copy_findings` / :func:`copied_shares` (texts against the store's public reviews of their
  papers, with evidence; used by every import, upload, submission and approval), :func:`copies_elsewhere` (its
  search of other papers' reviews through the sketch index), :func:`copy_evidence`,
  :func:`copy_share`, :data:`COPY_THRESHOLD`; the prose test (:func:`prose_findings`, :func:`prose_evidence`: a
  review must read as text).
"""

from grebench.bench._baseline import MIN_REVIEWS, Split, choose_split, make_splits
from grebench.bench._contamination import clean_pairs, is_clean, is_sealed, is_vouched
from grebench.bench._copies import COPY_THRESHOLD, CopyEvidence, copy_evidence, copy_share
from grebench.bench._import import (
    IMPORT_VERSION,
    MAX_FILE_BYTES,
    MAX_REVIEW_BYTES,
    BadLine,
    ImportedReview,
    ImportFile,
    ImportRefusal,
    ImportRefused,
    ImportSummary,
    ModelMeta,
    check_candidate_name,
    check_meta,
    copied_shares,
    copies_elsewhere,
    copy_findings,
    import_reviews,
    is_reserved_name,
    paper_own_texts,
    prose_findings,
    public_review_texts,
    read_import,
    reserved_names,
)
from grebench.bench._parse import ParsedReview, parse_review
from grebench.bench._prompt import REVIEW_PROMPT_VERSION, PaperInput, review_messages
from grebench.bench._prose import MIN_TOKENS as PROSE_MIN_TOKENS
from grebench.bench._prose import ProseEvidence, WordOrderModel, bundled_word_order, prose_evidence
from grebench.bench._registry import (
    BASELINE,
    CANDIDATE_KINDS,
    CONTESTANT,
    CONTROL_KIND,
    DEFAULT_MAX_TOKENS,
    ENDPOINT_KIND,
    HUMAN,
    HUMAN_KIND,
    IMPORTED_KIND,
    REFERENCE,
    SUBMITTED_KIND,
    Candidate,
    CandidateError,
    CandidateKind,
    KindInfo,
    candidate_endpoints,
    kind_info,
    kinds_with_role,
    load_candidates,
    parse_candidate,
    sync_candidates,
)
from grebench.bench._run import BenchRun, check_candidates, generate_for, run_bench
from grebench.bench._sections import join_sections, split_sections, split_sentences
from grebench.bench._unreviewed import generate_unreviewed, reseal, stored_candidate, unreviewed_paper_ids
from grebench.bench.controls import (
    CONTROLS,
    Control,
    ControlInput,
    ControlSkip,
    core_controls,
    default_controls,
    floor_controls,
)

__all__ = [
    "BASELINE",
    "CANDIDATE_KINDS",
    "CONTESTANT",
    "CONTROLS",
    "CONTROL_KIND",
    "COPY_THRESHOLD",
    "DEFAULT_MAX_TOKENS",
    "ENDPOINT_KIND",
    "HUMAN",
    "HUMAN_KIND",
    "IMPORTED_KIND",
    "IMPORT_VERSION",
    "MAX_FILE_BYTES",
    "MAX_REVIEW_BYTES",
    "MIN_REVIEWS",
    "PROSE_MIN_TOKENS",
    "REFERENCE",
    "REVIEW_PROMPT_VERSION",
    "SUBMITTED_KIND",
    "BadLine",
    "BenchRun",
    "Candidate",
    "CandidateError",
    "CandidateKind",
    "Control",
    "ControlInput",
    "ControlSkip",
    "CopyEvidence",
    "ImportFile",
    "ImportRefusal",
    "ImportRefused",
    "ImportSummary",
    "ImportedReview",
    "KindInfo",
    "ModelMeta",
    "PaperInput",
    "ParsedReview",
    "ProseEvidence",
    "Split",
    "WordOrderModel",
    "bundled_word_order",
    "candidate_endpoints",
    "check_candidate_name",
    "check_candidates",
    "check_meta",
    "choose_split",
    "clean_pairs",
    "copied_shares",
    "copies_elsewhere",
    "copy_evidence",
    "copy_findings",
    "copy_share",
    "core_controls",
    "default_controls",
    "floor_controls",
    "generate_for",
    "generate_unreviewed",
    "import_reviews",
    "is_clean",
    "is_reserved_name",
    "is_sealed",
    "is_vouched",
    "join_sections",
    "kind_info",
    "kinds_with_role",
    "load_candidates",
    "make_splits",
    "paper_own_texts",
    "parse_candidate",
    "parse_review",
    "prose_evidence",
    "prose_findings",
    "public_review_texts",
    "read_import",
    "reseal",
    "reserved_names",
    "review_messages",
    "run_bench",
    "split_sections",
    "split_sentences",
    "stored_candidate",
    "sync_candidates",
    "unreviewed_paper_ids",
]

"""Model owners' submissions: validated server-side, queued apart from the main store, handed to the bench stage.

The app (:mod:`grebench.site`) writes to the queue (a separate ``queue.duckdb``, so the app never holds the
writer's lock); the scheduler accepts queued submissions into the main store as ``llm`` candidates, evaluates them
with the key in the process environment only (:func:`key_in_env`) and closes them, deleting the key.  A file of
reviews written elsewhere is checked with the bench's validator and queued the same way (:func:`queue_import`);
the scheduler imports it as a candidate of kind ``imported`` (:func:`accept_queued_imports`).
"""

from grebench.submissions._copycheck import CopiedReview, CopyCheck, check_copies
from grebench.submissions._evaluate import QueuePass, approve_submission, evaluate_queued, refuse_copied_generations
from grebench.submissions._form import (
    FIELD_NAMES,
    HOSTED_PROVIDERS,
    SubmissionError,
    SubmissionForm,
    validate_submission,
)
from grebench.submissions._holds import APPROVAL_REFUSED, OVERRIDE, HeldSubmission, held_submissions, recheck_held
from grebench.submissions._imports import (
    UPLOAD_MAX_BYTES,
    ImportForm,
    accept_queued_imports,
    queue_import,
    read_upload,
    validate_import,
)
from grebench.submissions._keys import key_in_env
from grebench.submissions._limits import Allowance, limits_sentence
from grebench.submissions._log import (
    REASON_CLASSES,
    STATUSES,
    LogEntry,
    LogGroup,
    Withdrawal,
    endpoint_fingerprint,
    grouped,
    submission_log,
    sync_log,
    variants_scored,
    withdraw_submission,
)
from grebench.submissions._nearcopy import NEAR_COPY_FLAG, near_copies_of_import, unseal_near_copies
from grebench.submissions._queue import (
    SubmissionQueue,
    accept_queued_submissions,
    finish_submission,
    queue_path,
)

__all__ = [
    "APPROVAL_REFUSED",
    "FIELD_NAMES",
    "HOSTED_PROVIDERS",
    "NEAR_COPY_FLAG",
    "OVERRIDE",
    "REASON_CLASSES",
    "STATUSES",
    "UPLOAD_MAX_BYTES",
    "Allowance",
    "CopiedReview",
    "CopyCheck",
    "HeldSubmission",
    "ImportForm",
    "LogEntry",
    "LogGroup",
    "QueuePass",
    "SubmissionError",
    "SubmissionForm",
    "SubmissionQueue",
    "Withdrawal",
    "accept_queued_imports",
    "accept_queued_submissions",
    "approve_submission",
    "check_copies",
    "endpoint_fingerprint",
    "evaluate_queued",
    "finish_submission",
    "grouped",
    "held_submissions",
    "key_in_env",
    "limits_sentence",
    "near_copies_of_import",
    "queue_import",
    "queue_path",
    "read_upload",
    "recheck_held",
    "refuse_copied_generations",
    "submission_log",
    "sync_log",
    "unseal_near_copies",
    "validate_import",
    "validate_submission",
    "variants_scored",
    "withdraw_submission",
]

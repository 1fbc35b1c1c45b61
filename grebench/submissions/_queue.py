"""Model-endpoint submissions: validation, the queue file, and hand-over to the bench stage.

Every check runs here, server-side: a Gradio handler is also a public API endpoint, so nothing may rely on the
form.  The app writes to a small separate DuckDB file (``DATA_DIR/queue.duckdb``) with short-lived connections,
so it never holds the main store's writer lock; the scheduler calls :func:`accept_queued_submissions`, which
turns queued submissions into ``submitted`` candidates of the main store.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import date, datetime
from pathlib import Path
from typing import Any, TypedDict, cast

import duckdb

from grebench.bench import SUBMITTED_KIND
from grebench.endpoints import KeyVault, Resolver, URLRejected, check_submitted_url
from grebench.settings import Settings, SubmissionSettings
from grebench.store import Store, utcnow
from grebench.store.migrations.m0008_submissions import SUBMISSIONS_DDL
from grebench.submissions import _limits
from grebench.submissions._form import (
    _CONTACT,
    FieldErrors,
    SubmissionError,
    SubmissionForm,
    validate_submission,
)
from grebench.submissions._limits import when
from grebench.submissions._log import QUEUE_LOG_DDL, backfill_queue_log, record_try

log = logging.getLogger(__name__)

_PUBLIC_COLUMNS = "id, model_name, status, reason, created_at, updated_at"
IMPORTED_SUFFIX = " (imported reviews)"  # how the Queue tab marks an import among the endpoint submissions

#: Uploaded files of reviews written elsewhere (queue file only; see :mod:`._imports`).  ``content`` is the file's
#: text until the import ends (then NULL, like an endpoint's key).
IMPORT_SUBMISSIONS_DDL = """
CREATE TABLE IF NOT EXISTS import_submissions (
    id VARCHAR PRIMARY KEY,
    submitter VARCHAR NOT NULL,            -- normalised (lower-case) contact identity used for the rate limit
    contact VARCHAR NOT NULL,
    candidate VARCHAR NOT NULL,            -- becomes the candidate name (kind imported)
    meta_json VARCHAR NOT NULL,            -- the form's metadata (cutoff, model, description)
    content VARCHAR,                       -- the JSON Lines file, validated; NULL once the import ended
    content_sha256 VARCHAR NOT NULL,
    reviews INTEGER NOT NULL,
    status VARCHAR NOT NULL,               -- queued | finished | failed
    reason VARCHAR,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
)
"""


class SubmissionReply(TypedDict):
    """The reply to a submission or an upload: whether it was queued (``id``: its id, or the submission it
    repeats), every problem in ``message`` and per form field in ``errors``, and when a limit ends (``next_try``)."""

    ok: bool
    id: str | None
    message: str
    errors: dict[str, list[str]]
    next_try: str | None


class PublicSubmission(TypedDict):
    """A queue entry as the Queue tab shows it (:meth:`SubmissionQueue.public_rows`)."""

    id: str
    model_name: str
    status: str
    reason: str | None
    created_at: datetime
    updated_at: datetime


class SubmittedCandidate(TypedDict):
    """The candidate an accepted submission becomes (:func:`accept_queued_submissions`)."""

    name: str
    kind: str
    model: str
    api_base: str | None
    family: None
    released: date | None
    cutoff: None
    api_key_env: None
    params_json: str
    description: str
    submitter: str
    updated_at: datetime


def refusal(message: str, fields: dict[str, list[str]] | None = None, next_try: datetime | None = None,
            sub_id: str | None = None) -> SubmissionReply:
    """The reply to a refused submission or upload: ``message`` (every problem), ``errors`` (per form field) and
    ``next_try`` (when a limit ends, ``2026-11-29 14:03 UTC``; None when a corrected form may be sent at once)."""
    tail = f"; next try allowed after {when(next_try)}" if next_try is not None else ""
    return {"ok": False, "id": sub_id, "message": f"Rejected: {message}{tail}", "errors": fields or {},
            "next_try": None if next_try is None else when(next_try)}


class SubmissionQueue:
    """The queue file: opened briefly for each operation, so the app and the scheduler can take turns."""

    def __init__(self, path: Path | str | None) -> None:
        self.path = None if path is None else Path(path)
        self._lock = threading.Lock()
        self._memory = duckdb.connect(":memory:") if self.path is None else None
        with self.connect() as con:
            con.execute(SUBMISSIONS_DDL)
            con.execute(IMPORT_SUBMISSIONS_DDL)
            _limits.create_tables(con)
            con.execute(QUEUE_LOG_DDL)
            backfill_queue_log(con)

    @contextmanager
    def connect(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection to the queue file, retried briefly while another process holds it."""
        with self._lock:
            if self._memory is not None:
                yield self._memory
                return
            assert self.path is not None
            self.path.parent.mkdir(parents=True, exist_ok=True)
            con = None
            for attempt in range(20):
                try:
                    con = duckdb.connect(str(self.path))
                    break
                except duckdb.IOException:
                    if attempt == 19:
                        raise
                    time.sleep(0.1)
            assert con is not None
            try:
                yield con
            finally:
                con.close()

    def rows(self, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
        """Rows of a query on the queue as dicts."""
        with self.connect() as con:
            cur = con.execute(sql, params or [])
            names = [d[0] for d in cur.description]
            return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]

    def waiting(self) -> int:
        """Submissions and imports queued or being evaluated (the service's metric of the queue's length)."""
        with self.connect() as con:
            row = con.execute("SELECT (SELECT count(*) FROM submissions WHERE status IN ('queued', 'running')) + "
                              "(SELECT count(*) FROM import_submissions WHERE status IN ('queued', 'running'))"
                              ).fetchone()
        return int(row[0]) if row else 0

    def public_rows(self, limit: int = 200) -> list[PublicSubmission]:
        """What the Queue tab shows, endpoint submissions and imports alike: no contact, no URL, never the key."""
        return cast(list[PublicSubmission], self.rows(f"""SELECT {_PUBLIC_COLUMNS} FROM submissions UNION ALL
                             SELECT id, candidate || ? AS model_name, status, reason, created_at, updated_at
                             FROM import_submissions ORDER BY created_at DESC LIMIT ?""", [IMPORTED_SUFFIX, limit]))

    @staticmethod
    def admission(con: duckdb.DuckDBPyConnection, quota: SubmissionSettings, source: str | None, now: datetime,
                  contact: str = "") -> SubmissionReply | None:
        """The refusal of a new submission or upload before its form is looked at, or None: the queue holds
        ``queue_max_pending`` waiting entries, the source address is over its weekly quota or its refused tries
        (:mod:`._limits`), or the contact (when it is a well-formed one) has used its weekly quota.  A refusal here
        says when the next try is allowed, and is not itself counted as a refused try."""
        refused = SubmissionQueue.admission_class(con, quota, source, now, contact)
        return None if refused is None else refused[0]

    @staticmethod
    def admission_class(con: duckdb.DuckDBPyConnection, quota: SubmissionSettings, source: str | None,
                        now: datetime, contact: str = "") -> tuple[SubmissionReply, str] | None:
        """:meth:`admission` with the refusal's public reason class (``queue-full`` or ``rate-limited``)."""
        waiting = _limits.pending(con)
        if waiting >= quota.queue_max_pending:
            return refusal(f"the queue is full ({waiting} waiting); try again later"), "queue-full"
        allowance = _limits.address_allowance(con, quota, source, now)
        if allowance.next_try is not None:
            return refusal(str(allowance.reason), next_try=allowance.next_try), "rate-limited"
        contact = contact.strip()
        if _CONTACT.match(contact):
            next_try = _limits.submitter_next_try(con, quota, contact.lower(), now)
            if next_try is not None:
                return refusal(f"rate limit reached for this contact ({quota.submissions_per_week} accepted "
                               "submissions or uploads per 7 days per submitter)", next_try=next_try), "rate-limited"
        return None

    def allowance(self, quota: SubmissionSettings, source: str | None) -> _limits.Allowance:
        """What the address may still do (the form shows it on load and after every try)."""
        with self.connect() as con:
            return _limits.address_allowance(con, quota, source, utcnow())

    @staticmethod
    def record_source(con: duckdb.DuckDBPyConnection, sub_id: str, source: str | None, now: Any) -> None:
        """Remember where an accepted entry came from (its address's weekly quota)."""
        _limits.record_source(con, sub_id, source, now)

    def record_refusal(self, source: str | None) -> None:
        """Count a refused try against its address: the anti-abuse limit of refused tries, never the weekly quota
        (:mod:`._limits`)."""
        if source:
            with self.connect() as con:
                _limits.record_refusal(con, source, utcnow())

    @staticmethod
    def name_taken(con: duckdb.DuckDBPyConnection, name: str) -> bool:
        """Whether a queued, running or finished submission or import already uses this name (any case)."""
        row = cast("tuple[Any, ...]", con.execute(
            "SELECT (SELECT count(*) FROM submissions WHERE lower(model_name) = lower(?) AND status <> 'failed') + "
            "(SELECT count(*) FROM import_submissions WHERE lower(candidate) = lower(?) AND status <> 'failed')",
            [name, name]).fetchone())
        return bool(row[0])

    def submit(self, form: SubmissionForm, settings: Settings, vault: KeyVault,
               resolver: Resolver | Mapping[str, Iterable[str]] | None = None,
               source: str | None = None) -> SubmissionReply:
        """Validate and queue one submission: ``{"ok", "id", "message", "errors", "next_try"}``; ``source`` is the
        network address it came from (the app's client address).

        A refused form names every problem at once (``errors``: per field) and counts as one refused try of its
        address; only an accepted submission counts toward the weekly quota.
        """
        now = utcnow()

        def logged(con: duckdb.DuckDBPyConnection, reason_class: str | None, sub_id: str | None = None,
                   url: str | None = None) -> None:
            # the public log (._log): every try, refused ones with their class; never the key, the URL or the text
            record_try(con, contact=form.contact, model_name=form.model_name, normalised_url=url,
                       model_string=form.model_string, reason_class=reason_class, now=now, sub_id=sub_id,
                       secret=form.api_key or "")

        with self.connect() as con:
            admitted = self.admission_class(con, settings.submissions, source, now, form.contact or "")
            if admitted:
                logged(con, admitted[1], url=_fingerprint_url(form))
                return admitted[0]
        row = None
        try:
            row = validate_submission(form, settings, resolver)
            errors = FieldErrors()
        except SubmissionError as exc:
            errors = FieldErrors(exc.fields)
        name = (form.model_name or "").strip()
        with self.connect() as con:
            if row is not None:  # the same submission again says which one it repeats
                dup = con.execute("SELECT id, status FROM submissions WHERE dedup_key = ? AND status <> 'failed'",
                                  [row["dedup_key"]]).fetchone()
                if dup is not None:
                    log.info("submission refused: duplicate of %s", dup[0])
                    _limits.record_refusal(con, source, now)
                    logged(con, "duplicate", url=row["normalised_url"])
                    return refusal(f"duplicate of submission {dup[0]} ({dup[1]})", sub_id=dup[0])
            if "model_name" not in errors.by_field and name and self.name_taken(con, name):
                errors.add("model_name", f"model name {name!r} is taken; choose another")
            if errors.by_field or row is None:
                log.info("submission refused: %s", errors.message())
                _limits.record_refusal(con, source, now)
                logged(con, _form_class(errors.by_field), url=row["normalised_url"] if row else _fingerprint_url(form))
                return refusal(errors.message(), fields=errors.by_field)
            # again under the lock that guards the insert: a concurrent try may have used the quota meanwhile
            admitted = self.admission_class(con, settings.submissions, source, now, row["contact"])
            if admitted:
                logged(con, admitted[1], url=row["normalised_url"])
                return admitted[0]
            sub_id = uuid.uuid4().hex[:12]
            ciphertext = vault.seal(sub_id, form.api_key or "")
            _limits.record_source(con, sub_id, source, now)
            con.execute(
                "INSERT INTO submissions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'queued', NULL, ?, ?, ?)",
                [sub_id, row["submitter"], row["contact"], row["model_name"], row["model_string"], row["base_url"],
                 row["normalised_url"], row["params_json"], row["dedup_key"], row["released"], row["cutoff"],
                 ciphertext, now, now])
            logged(con, None, sub_id=sub_id, url=row["normalised_url"])
        log.info("submission %s queued (%s)", sub_id, row["model_name"])
        return {"ok": True, "id": sub_id, "errors": {}, "next_try": None,
                "message": f"Queued as {sub_id}: {row['model_name']} will be evaluated "
                f"on papers whose reviews became public after its declared cutoff {row['cutoff']}, and on papers "
                "whose reviews are not public yet; the declared cutoff is shown, not trusted: until the operator "
                "vouches for it, only reviews written before a paper's reviews were public count."}

    def set_status(self, sub_id: str, status: str, reason: str | None = None) -> None:
        """Move a submission to running / finished / failed; the stored key goes when it ends."""
        if status not in ("queued", "running", "finished", "failed", "withdrawn"):
            raise ValueError(f"unknown status {status!r}")
        ended = status in ("finished", "failed", "withdrawn")
        with self.connect() as con:
            con.execute("UPDATE submissions SET status = ?, reason = ?, updated_at = ?"
                        + (", key_ciphertext = NULL" if ended else "") + " WHERE id = ?",
                        [status, reason, utcnow(), sub_id])


def _fingerprint_url(form: SubmissionForm) -> str | None:
    """What a refused form's endpoint is fingerprinted by before its URL was checked: the URL as given, trimmed
    and without a trailing slash (hashed, never kept)."""
    url = (form.base_url or "").strip().rstrip("/")
    return url or None


def _form_class(by_field: Mapping[str, list[str]]) -> str:
    """The public class of a refused form: its endpoint's address refused, its name taken, or a form problem."""
    if "base_url" in by_field:
        return "unreachable-endpoint"
    if set(by_field) == {"model_name"} and any("taken" in p or "reserved" in p for p in by_field["model_name"]):
        return "name-taken"
    return "invalid-form"


def queue_path(settings: Settings) -> Path:
    """Where the app writes submissions (a separate file: the app never opens the main store for writing)."""
    return settings.queue_path


def finish_submission(queue: SubmissionQueue, vault: KeyVault, sub_id: str, ok: bool, reason: str | None = None,
                      store: Store | None = None) -> None:
    """End an evaluation: status finished or failed (with reason), the key deleted everywhere."""
    status = "finished" if ok else "failed"
    queue.set_status(sub_id, status, reason)
    vault.forget(sub_id)
    if store is not None:
        store.con.execute("UPDATE submissions SET status = ?, reason = ?, updated_at = ? WHERE id = ?",
                          [status, reason, utcnow(), sub_id])


def _candidate_params(params_json: str | None, context: int) -> str:
    """The submitted parameters completed like a configured candidate's (temperature 0, max and context tokens)."""
    from grebench.bench import DEFAULT_MAX_TOKENS

    params = {"temperature": 0, "max_tokens": DEFAULT_MAX_TOKENS, **json.loads(params_json or "{}")}
    if context:
        params["context_tokens"] = context
        params["max_tokens"] = max(1, min(int(params["max_tokens"]), context // 2))
    return json.dumps(params, sort_keys=True)


def accept_queued_submissions(
        store: Store, queue: SubmissionQueue, settings: Settings | None = None,
        resolver: Resolver | Mapping[str, Iterable[str]] | None = None) -> list[SubmittedCandidate]:
    """Turn queued submissions into ``submitted`` candidates of the main store (called by the scheduler); the
    declared cutoff stays in ``submissions.cutoff`` until the operator vouches for it
    (:func:`grebench.submissions.approve_submission`).

    A base URL is checked again (its DNS may have changed since it was queued); the bench stage must still pin
    the address at call time (:func:`grebench.endpoints.pinned_transport`).  The main store's copy of a submission
    never carries the key ciphertext.  Returns the candidate rows written.
    """
    accepted: list[SubmittedCandidate] = []
    for sub in queue.rows("SELECT * FROM submissions WHERE status = 'queued' ORDER BY created_at"):
        reason = None
        if store.scalar("SELECT count(*) FROM candidates WHERE lower(name) = lower(?)", [sub["model_name"]]):
            reason = f"a candidate named {sub['model_name']!r} already exists"
        elif sub["base_url"] and settings is not None:
            try:
                check_submitted_url(sub["base_url"], settings, resolver)
            except URLRejected as exc:
                reason = f"base URL rejected on acceptance: {exc}"
        now = utcnow()
        status = "failed" if reason else "running"
        with store.transaction() as con:
            con.execute("DELETE FROM submissions WHERE id = ?", [sub["id"]])
            con.execute("INSERT INTO submissions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?)",
                        [sub["id"], sub["submitter"], sub["contact"], sub["model_name"], sub["model_string"],
                         sub["base_url"], sub["normalised_url"], sub["params_json"], sub["dedup_key"],
                         sub["released"], sub["cutoff"], status, reason, sub["created_at"], now])
            if reason is None:
                # the declared cutoff stays in `submissions.cutoff`: information only until the operator vouches
                candidate: SubmittedCandidate = {
                    "name": sub["model_name"], "kind": SUBMITTED_KIND, "model": sub["model_string"],
                    "api_base": sub["normalised_url"], "family": None, "released": sub["released"], "cutoff": None,
                    "api_key_env": None, "params_json": _candidate_params(
                        sub["params_json"], settings.bench.context_tokens if settings is not None else 0),
                    "description": f"submission {sub['id']}", "submitter": sub["submitter"], "updated_at": now}
                con.execute(f"INSERT INTO candidates ({', '.join(candidate)}) VALUES "
                            f"({', '.join('?' * len(candidate))})", list(candidate.values()))
                con.execute("INSERT INTO board_changes VALUES (?, 'submission', ?, ?)",
                            [now, sub["model_name"], f"submission {sub['id']} accepted, declared cutoff "
                             f"{sub['cutoff']} (not vouched: ranked on sealed reviews only until approved)"])
                accepted.append(candidate)
        queue.set_status(sub["id"], status, reason)
    return accepted

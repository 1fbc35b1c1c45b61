"""Imported-review submissions: an uploaded JSON Lines file of reviews written elsewhere, queued for the scheduler.

The app checks an upload with the bench's own validator (:func:`grebench.bench.read_import`: every line, against
the exported papers) and queues a valid file in the queue file's ``import_submissions`` table
(:func:`queue_import`).  The scheduler's submissions stage, like an endpoint submission, then turns queued files
into candidates of kind ``imported`` in the main store (:func:`accept_queued_imports`): the file is checked again
against the live store, imported in one transaction, and its text deleted from the queue when the import ends.
A web import never replaces an existing candidate (the operator does that with ``grebench bench import``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import uuid
from collections.abc import Collection
from dataclasses import dataclass
from datetime import date
from functools import partial
from pathlib import Path
from typing import NotRequired, TypedDict

import duckdb

from grebench.bench import (
    CandidateError,
    ImportRefused,
    ImportSummary,
    ModelMeta,
    check_meta,
    import_reviews,
    is_reserved_name,
    read_import,
)
from grebench.llm import NAME_PATTERN
from grebench.settings import Settings
from grebench.store import Store, utcnow
from grebench.submissions import _limits
from grebench.submissions._copycheck import check_copies
from grebench.submissions._form import _CONTACT, FieldErrors, SubmissionError
from grebench.submissions._log import record_try
from grebench.submissions._nearcopy import near_copies_of_import
from grebench.submissions._queue import SubmissionQueue, SubmissionReply, refusal

log = logging.getLogger(__name__)

UPLOAD_MAX_BYTES = 16 * 1024 * 1024  # an upload through the app (the command line takes up to 64 MiB)
_FORM_META = ("cutoff", "model", "description")


@dataclass(frozen=True)
class ImportForm:
    """The fields of the app's import form, as strings (all optional until validated)."""

    candidate: str = ""
    contact: str = ""
    cutoff: str = ""
    model: str = ""
    description: str = ""


def read_upload(path: str | Path | None, limit: int = UPLOAD_MAX_BYTES) -> bytes:
    """The bytes of an uploaded file, refused (:class:`SubmissionError`) when missing or over ``limit``."""
    if not path:
        raise SubmissionError("choose a JSON Lines file of reviews to upload")
    try:
        size = os.path.getsize(path)
        if size > limit:
            raise SubmissionError(f"the file is {size:,} bytes (limit {limit:,})")
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
    except OSError:
        raise SubmissionError("the uploaded file cannot be read") from None
    if len(data) > limit:
        raise SubmissionError(f"the file is over {limit:,} bytes")
    return data


class QueuedImport(TypedDict):
    """A validated upload, as it is queued (:func:`validate_import`)."""

    submitter: str
    contact: str
    candidate: str
    meta_json: str
    content: str
    content_sha256: str
    reviews: int
    cutoff: date | None


class ImportOutcome(TypedDict):
    """What became of a queued upload (:func:`accept_queued_imports`); an imported one says how many reviews it
    brought and how many are clean."""

    id: str
    candidate: str
    ok: bool
    reason: str | None
    our_failure: bool
    reviews: NotRequired[int]
    clean: NotRequired[int]


def validate_import(form: ImportForm, data: bytes, paper_ids: Collection[str],
                    taken: Collection[str] = ()) -> QueuedImport:
    """Check the form and every line of the file; the row to queue, or one :class:`SubmissionError` naming every
    problem (``fields``: per form field, the file's bad lines under ``file``).  ``taken``: candidate names in use."""
    errors = FieldErrors()
    name = (form.candidate or "").strip()
    if not NAME_PATTERN.fullmatch(name):
        errors.add("candidate", "candidate name: 1-100 characters, letters, digits and . _ : / @ + -")
    elif name.lower() in {t.lower() for t in taken}:
        errors.add("candidate", f"candidate name {name!r} is taken; choose another")
    contact = (form.contact or "").strip()
    if not _CONTACT.match(contact):
        errors.add("contact", "contact: an e-mail address or handle (3-200 characters, no spaces)")
    options = {key: (getattr(form, key) or "").strip() or None for key in _FORM_META}
    meta, reasons = check_meta(options, "form")
    for reason in reasons:
        errors.add(next((k for k in _FORM_META if k in reason), "cutoff"), reason)
    parsed = None
    try:
        parsed = read_import(data, paper_ids, max_bytes=UPLOAD_MAX_BYTES, source="the uploaded file")
    except ImportRefused as exc:
        errors.add("file", exc.message(bullet="- "))
    if parsed is not None:
        merged: ModelMeta = {**parsed.meta, **meta}
        if merged.get("cutoff") and merged.get("released") and merged["cutoff"] > merged["released"]:
            errors.add("cutoff", f"the cutoff {merged['cutoff']} is after the release date {merged['released']}")
    errors.raise_if_any()
    assert parsed is not None
    return {"submitter": contact.lower(), "contact": contact, "candidate": name,
            "meta_json": json.dumps({k: v for k, v in options.items() if v}, sort_keys=True),
            "content": data.decode("utf-8"), "content_sha256": parsed.sha256, "reviews": len(parsed.reviews),
            "cutoff": merged.get("cutoff")}


def queue_import(queue: SubmissionQueue, form: ImportForm, data: bytes, settings: Settings, paper_ids: Collection[str],
                 taken: Collection[str] = (), source: str | None = None) -> SubmissionReply:
    """Validate and queue one import: ``{"ok", "id", "message", "errors", "next_try"}`` (as
    :meth:`SubmissionQueue.submit`).

    A refused upload names every problem at once: the form's fields and the file's bad lines (the first 20, then a
    count); nothing is queued, and it counts as one refused try of its address, never toward the weekly quota.
    """
    now = utcnow()
    fingerprint = f"upload:{hashlib.sha256(data).hexdigest()}"  # the file's, never its text

    def logged(con: duckdb.DuckDBPyConnection, reason_class: str | None, sub_id: str | None = None) -> None:
        # the public log (._log): every upload, refused ones with their class
        record_try(con, contact=form.contact, model_name=form.candidate, normalised_url=None,
                   model_string=fingerprint, reason_class=reason_class, now=now, sub_id=sub_id, kind="upload")

    with queue.connect() as con:
        admitted = queue.admission_class(con, settings.submissions, source, now, form.contact or "")
        if admitted:
            logged(con, admitted[1])
            return admitted[0]
    try:
        if is_reserved_name(settings, form.candidate or ""):
            raise SubmissionError(f"candidate name {(form.candidate or '').strip()[:100]!r} is reserved (the human "
                                  "baseline, a control or a configured candidate); choose another name")
        row = validate_import(form, data, paper_ids, taken)
    except SubmissionError as exc:
        log.info("import refused: %s", str(exc)[:200])
        queue.record_refusal(source)
        with queue.connect() as con:
            name_refused = "reserved" in str(exc) or (set(exc.fields) == {"candidate"} and "taken" in str(exc))
            logged(con, "name-taken" if name_refused else "invalid-form")
        return refusal(str(exc), fields=exc.fields)
    with queue.connect() as con:
        admitted = queue.admission_class(con, settings.submissions, source, now, row["contact"])  # the insert's lock
        if admitted:
            logged(con, admitted[1])
            return admitted[0]
        if queue.name_taken(con, row["candidate"]):
            _limits.record_refusal(con, source, now)
            logged(con, "name-taken")
            return refusal(f"candidate name {row['candidate']!r} is taken; choose another",
                           fields={"candidate": [f"candidate name {row['candidate']!r} is taken"]})
        sub_id = uuid.uuid4().hex[:12]
        queue.record_source(con, sub_id, source, now)
        con.execute("INSERT INTO import_submissions VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'queued', NULL, ?, ?)",
                    [sub_id, row["submitter"], row["contact"], row["candidate"], row["meta_json"], row["content"],
                     row["content_sha256"], row["reviews"], now, now])
        logged(con, None, sub_id=sub_id)
    log.info("import %s queued (%s, %d reviews)", sub_id, row["candidate"], row["reviews"])
    declared = f"declared cutoff {row['cutoff']}: shown, not trusted; " if row["cutoff"] else ""
    cutoff = f"{declared}only papers whose reviews were not yet public when this file was received count"
    return {"ok": True, "id": sub_id, "errors": {}, "next_try": None,
            "message": f"Queued as {sub_id}: {row['reviews']} reviews of "
            f"{row['candidate']} ({cutoff}); the operator's next queue run imports and scores them."}


def accept_queued_imports(store: Store, queue: SubmissionQueue, settings: Settings) -> list[ImportOutcome]:
    """Import every queued file into the main store (called by the scheduler's submissions stage).

    Each file is checked again against the live store (papers may differ from the app's export) and imported in
    one transaction; a name already in the store fails the import (a web import never replaces a candidate).
    The file's text leaves the queue when the import ends, finished or failed.  ``our_failure``: the import failed
    on our side (the store), not because of the file: the caller records it as its run's failure.
    """
    done: list[ImportOutcome] = []
    for sub in queue.rows("SELECT * FROM import_submissions WHERE status = 'queued' ORDER BY created_at"):
        summary: ImportSummary | None = None
        ours = False  # the import failed on our side (the store), not on the file: the job's failure too
        if store.scalar("SELECT count(*) FROM candidates WHERE lower(name) = lower(?)", [sub["candidate"]]):
            reason: str | None = f"a candidate named {sub['candidate']!r} already exists"
        else:
            options = {**json.loads(sub["meta_json"] or "{}"), "submitter": sub["submitter"]}
            options.setdefault("description", f"imported reviews, submission {sub['id']}")
            try:
                # a web upload is never trusted: its reviews are dated when the app received them (server clock)
                summary = import_reviews(store, settings, sub["candidate"], (sub["content"] or "").encode("utf-8"),
                                         options, source=f"import {sub['id']}", now=sub["created_at"])
                # a review carrying a nearby paper's public reviews does not count as sealed (issue 62)
                summary = near_copies_of_import(store, summary, settings.submissions.near_copy_estimator,
                                                partial(check_copies, store, sub["candidate"], settings,
                                                        near_only=True))
                reason = None
            except (ImportRefused, CandidateError) as exc:
                reason = str(exc)[:2000]
            except Exception as exc:  # a store failure: the import is rolled back; say so and go on
                reason, ours = f"{type(exc).__name__}: {exc}"[:2000], True
        status = "failed" if reason else "finished"
        if summary is not None:
            reason = (f"{summary['reviews']} reviews imported: {summary['clean']} clean, "
                      f"{summary['contaminated']} contaminated")
        with queue.connect() as con:
            con.execute("UPDATE import_submissions SET status = ?, reason = ?, content = NULL, updated_at = ? "
                        "WHERE id = ?", [status, reason, utcnow(), sub["id"]])
        log.info("import %s %s%s", sub["id"], status, f": {reason}" if reason else "")
        outcome: ImportOutcome = {"id": sub["id"], "candidate": sub["candidate"], "ok": status == "finished",
                                  "reason": reason, "our_failure": ours}
        if summary is not None:
            outcome["reviews"], outcome["clean"] = summary["reviews"], summary["clean"]
        done.append(outcome)
    return done

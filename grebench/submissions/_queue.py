"""Model-endpoint submissions: validation, the queue file, and hand-over to the bench stage.

Every check runs here, server-side: a Gradio handler is also a public API endpoint, so nothing may rely on the
form.  The app writes to a small separate DuckDB file (``DATA_DIR/queue.duckdb``) with short-lived connections,
so it never holds the main store's writer lock; the scheduler calls :func:`accept_queued_submissions`, which
turns queued submissions into ``submitted`` candidates of the main store.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any, cast

import duckdb

from grebench.bench import SUBMITTED_KIND, is_reserved_name
from grebench.endpoints import KeyVault, Resolver, URLRejected, check_submitted_url
from grebench.settings import Settings
from grebench.store import Store, utcnow
from grebench.store.migrations.m0008_submissions import SUBMISSIONS_DDL

log = logging.getLogger(__name__)

#: litellm providers a bare model string may use: hosted APIs only (ollama/, vllm/, lm_studio/ ... default to
#: servers on localhost, which would let a submission reach our own network).
HOSTED_PROVIDERS = frozenset({
    "openai", "anthropic", "gemini", "mistral", "groq", "together_ai", "fireworks_ai", "deepseek", "cohere",
    "openrouter", "xai", "perplexity", "deepinfra", "cerebras", "sambanova", "nvidia_nim",
})
ALLOWED_PARAMS = {"temperature": float, "top_p": float, "max_tokens": int, "seed": int}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:+ -]{0,79}$")
_MODEL_STRING = re.compile(r"^([a-z0-9_]+)/([A-Za-z0-9._:@+/-]{1,200})$")
_CONTACT = re.compile(r"^[^\s<>\"'`]{3,200}$")
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


#: Where each submission and upload came from (queue file only, never copied to the main store or exported): the
#: network address the app saw, for a rate limit that a fresh e-mail address cannot reset.
SOURCES_DDL = """
CREATE TABLE IF NOT EXISTS submission_sources (
    id VARCHAR PRIMARY KEY,
    address VARCHAR NOT NULL,
    created_at TIMESTAMP NOT NULL
)
"""


class SubmissionError(ValueError):
    """A submission was refused; the message is safe to show to the submitter."""


@dataclass(frozen=True)
class SubmissionForm:
    """The fields of the Submit form, as strings (all optional until validated)."""

    model_name: str = ""
    model_string: str = ""
    base_url: str = ""
    released: str = ""
    cutoff: str = ""
    contact: str = ""
    api_key: str = ""
    params: str = ""

    def __repr__(self) -> str:  # the key must not reach a log line through a repr
        return f"SubmissionForm(model_name={self.model_name!r}, contact={self.contact!r}, api_key=***)"


def _date(text: str, field: str, required: bool) -> date | None:
    text = (text or "").strip()
    if not text:
        if required:
            raise SubmissionError(f"{field} is required (YYYY-MM-DD)")
        return None
    try:
        value = date.fromisoformat(text[:10])
    except ValueError:
        raise SubmissionError(f"{field} must be a date YYYY-MM-DD, got {text[:40]!r}") from None
    if value > utcnow().date():
        raise SubmissionError(f"{field} {value} is in the future")
    return value


def _params(text: str) -> dict[str, Any]:
    text = (text or "").strip()
    if not text:
        return {}
    try:
        raw = json.loads(text)
    except json.JSONDecodeError:
        raise SubmissionError("parameters must be a JSON object, e.g. {\"temperature\": 0.7}") from None
    if not isinstance(raw, dict):
        raise SubmissionError("parameters must be a JSON object")
    out: dict[str, Any] = {}
    for key, value in raw.items():
        kind = ALLOWED_PARAMS.get(key)
        if kind is None:
            raise SubmissionError(f"parameter {key!r} is not allowed (allowed: {', '.join(sorted(ALLOWED_PARAMS))})")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise SubmissionError(f"parameter {key!r} must be a number")
        out[key] = kind(value)
    return out


def validate_submission(form: SubmissionForm, settings: Any,
                        resolver: Resolver | Mapping[str, Iterable[str]] | None = None) -> dict[str, Any]:
    """Check every field; return the row to queue (without the key) or raise :class:`SubmissionError`."""
    name = (form.model_name or "").strip()
    if not _NAME.match(name):
        raise SubmissionError("model name: 1-80 characters, letters, digits and . _ : + - or space")
    if isinstance(settings, Settings) and is_reserved_name(settings, name):
        raise SubmissionError(f"model name {name!r} is reserved (the human baseline, a control or a configured "
                              "candidate)")
    contact = (form.contact or "").strip()
    if not _CONTACT.match(contact):
        raise SubmissionError("contact: an e-mail address or handle (3-200 characters, no spaces)")
    model_string = (form.model_string or "").strip()
    base_url = (form.base_url or "").strip()
    if not model_string and not base_url:
        raise SubmissionError("give a litellm model string or an OpenAI-compatible base URL")
    normalised = None
    if base_url:
        try:
            endpoint = check_submitted_url(base_url, settings, resolver)
        except URLRejected as exc:
            raise SubmissionError(f"base URL rejected: {exc}") from None
        normalised = endpoint.url
        model_string = model_string or "openai/" + name.replace(" ", "-")  # the model id sent to the endpoint
    match = _MODEL_STRING.match(model_string)
    if not match:
        raise SubmissionError("model string must look like provider/model, e.g. openai/gpt-4o-mini")
    if base_url and match.group(1) != "openai":
        raise SubmissionError("a base URL is called as an OpenAI-compatible endpoint: the model string must be "
                              "openai/<model id> (or left empty)")
    if not base_url and match.group(1) not in HOSTED_PROVIDERS:
        raise SubmissionError(f"provider {match.group(1)!r} needs a base URL; hosted providers: "
                              f"{', '.join(sorted(HOSTED_PROVIDERS))}")
    cutoff = _date(form.cutoff, "training-data cutoff", required=True)
    released = _date(form.released, "release date", required=False)
    if released is not None and cutoff is not None and cutoff > released:
        raise SubmissionError("the training-data cutoff cannot be after the release date")
    key = form.api_key or ""
    if len(key) > 1000 or any(ord(c) < 32 for c in key):
        raise SubmissionError("the API key is too long or contains control characters")
    if not base_url and not key.strip():
        raise SubmissionError(f"a hosted model ({match.group(1)}) is called with your own API key, and none was "
                              "given (the operator's keys are never used for submissions)")
    params = _params(form.params)
    params_json = json.dumps(params, sort_keys=True)
    dedup = hashlib.sha256(json.dumps([normalised or model_string, model_string, name.lower(), params],
                                      sort_keys=True).encode()).hexdigest()
    return {"submitter": contact.lower(), "contact": contact, "model_name": name, "model_string": model_string,
            "base_url": base_url or None, "normalised_url": normalised, "params_json": params_json,
            "dedup_key": dedup, "released": released, "cutoff": cutoff}


class SubmissionQueue:
    """The queue file: opened briefly for each operation, so the app and the scheduler can take turns."""

    def __init__(self, path: Path | str | None) -> None:
        self.path = None if path is None else Path(path)
        self._lock = threading.Lock()
        self._memory = duckdb.connect(":memory:") if self.path is None else None
        with self.connect() as con:
            con.execute(SUBMISSIONS_DDL)
            con.execute(IMPORT_SUBMISSIONS_DDL)
            con.execute(SOURCES_DDL)

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

    def public_rows(self, limit: int = 200) -> list[dict[str, Any]]:
        """What the Queue tab shows, endpoint submissions and imports alike: no contact, no URL, never the key."""
        return self.rows(f"""SELECT {_PUBLIC_COLUMNS} FROM submissions UNION ALL
                             SELECT id, candidate || ? AS model_name, status, reason, created_at, updated_at
                             FROM import_submissions ORDER BY created_at DESC LIMIT ?""", [IMPORTED_SUFFIX, limit])

    @staticmethod
    def recent_count(con: duckdb.DuckDBPyConnection, submitter: str, since: Any) -> int:
        """Submissions (endpoints and imports) of one submitter since a time: what the rate limit counts."""
        row = cast("tuple[Any, ...]", con.execute(
            "SELECT (SELECT count(*) FROM submissions WHERE submitter = ? AND created_at > ?) + "
            "(SELECT count(*) FROM import_submissions WHERE submitter = ? AND created_at > ?)",
            [submitter, since, submitter, since]).fetchone())
        return int(row[0])

    @staticmethod
    def admission(con: duckdb.DuckDBPyConnection, settings: Any, source: str | None, now: Any) -> str | None:
        """Why a new submission or upload is refused before anything else is looked at, or None: the queue holds
        ``queue_max_pending`` waiting entries already, or the source address sent
        ``submissions_per_address_per_week`` in 7 days, accepted or refused (the contact a form gives is the
        submitter's to choose)."""
        pending = cast("tuple[Any, ...]", con.execute(
            "SELECT (SELECT count(*) FROM submissions WHERE status = 'queued') + "
            "(SELECT count(*) FROM import_submissions WHERE status = 'queued')").fetchone())[0]
        if int(pending) >= settings.queue_max_pending:
            return f"Rejected: the queue is full ({pending} waiting); try again later"
        if source:
            recent = cast("tuple[Any, ...]", con.execute(
                "SELECT count(*) FROM submission_sources WHERE address = ? AND created_at > ?",
                [source, now - timedelta(days=7)]).fetchone())[0]
            if int(recent) >= settings.submissions_per_address_per_week:
                return ("Rejected: rate limit reached for your network address "
                        f"({settings.submissions_per_address_per_week} per 7 days)")
        return None

    @staticmethod
    def record_source(con: duckdb.DuckDBPyConnection, sub_id: str, source: str | None, now: Any) -> None:
        """Remember where an accepted entry came from (for :meth:`admission`)."""
        if source:
            con.execute("INSERT INTO submission_sources VALUES (?, ?, ?)", [sub_id, source[:100], now])

    def record_refusal(self, source: str | None) -> None:
        """Count a refused submission or upload against its address (:meth:`admission`): probing the checks
        costs the same allowance as submitting."""
        if source:
            with self.connect() as con:
                self.record_source(con, f"refused-{uuid.uuid4().hex[:12]}", source, utcnow())

    @staticmethod
    def name_taken(con: duckdb.DuckDBPyConnection, name: str) -> bool:
        """Whether a queued, running or finished submission or import already uses this name (any case)."""
        row = cast("tuple[Any, ...]", con.execute(
            "SELECT (SELECT count(*) FROM submissions WHERE lower(model_name) = lower(?) AND status <> 'failed') + "
            "(SELECT count(*) FROM import_submissions WHERE lower(candidate) = lower(?) AND status <> 'failed')",
            [name, name]).fetchone())
        return bool(row[0])

    def submit(self, form: SubmissionForm, settings: Any, vault: KeyVault,
               resolver: Resolver | Mapping[str, Iterable[str]] | None = None,
               source: str | None = None) -> dict[str, Any]:
        """Validate and queue one submission: ``{"ok": bool, "id": str | None, "message": str}``; ``source`` is
        the network address it came from (the app's client address)."""
        with self.connect() as con:
            refused = self.admission(con, settings, source, utcnow())
        if refused:
            return {"ok": False, "id": None, "message": refused}
        try:
            row = validate_submission(form, settings, resolver)
        except SubmissionError as exc:
            log.info("submission refused: %s", exc)
            self.record_refusal(source)
            return {"ok": False, "id": None, "message": f"Rejected: {exc}"}
        now = utcnow()
        with self.connect() as con:
            recent = self.recent_count(con, row["submitter"], now - timedelta(days=7))
            if recent >= settings.submissions_per_week:
                return {"ok": False, "id": None, "message": "Rejected: rate limit reached "
                        f"({settings.submissions_per_week} submissions per 7 days per submitter)"}
            dup = con.execute("SELECT id, status FROM submissions WHERE dedup_key = ? AND status <> 'failed'",
                              [row["dedup_key"]]).fetchone()
            if dup is not None:
                return {"ok": False, "id": dup[0], "message": f"Rejected: duplicate of submission {dup[0]} "
                        f"({dup[1]})"}
            if self.name_taken(con, row["model_name"]):
                return {"ok": False, "id": None, "message": f"Rejected: model name {row['model_name']!r} is taken"}
            sub_id = uuid.uuid4().hex[:12]
            ciphertext = vault.seal(sub_id, form.api_key or "")
            self.record_source(con, sub_id, source, now)
            con.execute(
                "INSERT INTO submissions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'queued', NULL, ?, ?, ?)",
                [sub_id, row["submitter"], row["contact"], row["model_name"], row["model_string"], row["base_url"],
                 row["normalised_url"], row["params_json"], row["dedup_key"], row["released"], row["cutoff"],
                 ciphertext, now, now])
        log.info("submission %s queued (%s)", sub_id, row["model_name"])
        return {"ok": True, "id": sub_id, "message": f"Queued as {sub_id}: {row['model_name']} will be evaluated "
                f"on papers whose reviews became public after its declared cutoff {row['cutoff']}, and on papers "
                "whose reviews are not public yet; the declared cutoff is shown, not trusted: until the operator "
                "vouches for it, only reviews written before a paper's reviews were public count."}

    def set_status(self, sub_id: str, status: str, reason: str | None = None) -> None:
        """Move a submission to running / finished / failed; the stored key goes when it ends."""
        if status not in ("queued", "running", "finished", "failed"):
            raise ValueError(f"unknown status {status!r}")
        ended = status in ("finished", "failed")
        with self.connect() as con:
            con.execute("UPDATE submissions SET status = ?, reason = ?, updated_at = ?"
                        + (", key_ciphertext = NULL" if ended else "") + " WHERE id = ?",
                        [status, reason, utcnow(), sub_id])


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


def _candidate_params(params_json: str | None, settings: Any) -> str:
    """The submitted parameters completed like a configured candidate's (temperature 0, max and context tokens)."""
    from grebench.bench import DEFAULT_MAX_TOKENS

    params = {"temperature": 0, "max_tokens": DEFAULT_MAX_TOKENS, **json.loads(params_json or "{}")}
    context = int(getattr(settings, "context_tokens", 0) or 0)
    if context:
        params["context_tokens"] = context
        params["max_tokens"] = max(1, min(int(params["max_tokens"]), context // 2))
    return json.dumps(params, sort_keys=True)


def accept_queued_submissions(store: Store, queue: SubmissionQueue, settings: Any = None,
                              resolver: Resolver | Mapping[str, Iterable[str]] | None = None) -> list[dict[str, Any]]:
    """Turn queued submissions into ``submitted`` candidates of the main store (called by the scheduler); the
    declared cutoff stays in ``submissions.cutoff`` until the operator vouches for it
    (:func:`grebench.submissions.approve_submission`).

    A base URL is checked again (its DNS may have changed since it was queued); the bench stage must still pin
    the address at call time (:func:`grebench.endpoints.pinned_transport`).  The main store's copy of a submission
    never carries the key ciphertext.  Returns the candidate rows written.
    """
    accepted: list[dict[str, Any]] = []
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
                candidate = {"name": sub["model_name"], "kind": SUBMITTED_KIND, "model": sub["model_string"],
                             "api_base": sub["normalised_url"], "family": None, "released": sub["released"],
                             "cutoff": None, "api_key_env": None,
                             "params_json": _candidate_params(sub["params_json"], settings),
                             "description": f"submission {sub['id']}", "submitter": sub["submitter"],
                             "updated_at": now}
                con.execute(f"INSERT INTO candidates ({', '.join(candidate)}) VALUES "
                            f"({', '.join('?' * len(candidate))})", list(candidate.values()))
                con.execute("INSERT INTO board_changes VALUES (?, 'submission', ?, ?)",
                            [now, sub["model_name"], f"submission {sub['id']} accepted, declared cutoff "
                             f"{sub['cutoff']} (not vouched: ranked on sealed reviews only until approved)"])
                accepted.append(candidate)
        queue.set_status(sub["id"], status, reason)
    return accepted

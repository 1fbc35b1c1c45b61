"""The public submissions log (issue 63 §2): every submission ever made, and what became of it.

"The Leaderboard Illusion" (arXiv 2504.20879) documents 27 private variants tested before one public release.  Here
every try is public: accepted, refused (with a coarse public *reason class*, never the raw error, which could name
internals), withdrawn (a withdrawal is shown as one; nothing is deleted), held, or scored (with its scores), with its
date, the submitter's public handle, the model name and an endpoint fingerprint.  Variants of one submitter are
grouped, and the board says beside a submitted model how many variants its submitter had scored (``best of 4``).

What never appears: the API key, the endpoint URL, a contact that is an e-mail address (the submitter shows as
``anon-<8 hex>``, a salted hash: stable within this deployment, not reversible without the private salt), the network
address, the raw refusal text.  The queue file (written by the app) keeps a log row per try; the scheduler copies
them into the main store (:func:`sync_log`), where the site, the app's export and the snapshots read them.
"""

from __future__ import annotations

import hashlib
import logging
import re
import uuid
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, TypedDict

import duckdb

from grebench.store import Store, utcnow

log = logging.getLogger(__name__)

#: The queue file's log: the store's columns with the private ``submitter`` (lower-case contact) in place of
#: ``group_key`` (the queue has no salt; :func:`sync_log` hashes it on the way into the store).
QUEUE_LOG_DDL = """
CREATE TABLE IF NOT EXISTS submission_log (
    id VARCHAR PRIMARY KEY,
    kind VARCHAR NOT NULL,
    submitter VARCHAR,
    handle VARCHAR,
    model_name VARCHAR,
    endpoint_fingerprint VARCHAR,
    status VARCHAR NOT NULL,
    reason_class VARCHAR,
    created_at TIMESTAMP NOT NULL
)
"""

#: The public reason classes of a refusal, and what each means (the site and docs/submissions.md list them).
REASON_CLASSES: dict[str, str] = {
    "invalid-form": "a field of the form was missing or malformed",
    "name-taken": "the model name was taken (by a submission, a configured candidate or a reserved name)",
    "duplicate": "the same endpoint, model and parameters were submitted already",
    "rate-limited": "a limit of submissions per contact or per network address was reached",
    "queue-full": "the queue was full",
    "unreachable-endpoint": "the endpoint's address was refused (not public, not resolvable) or did not answer",
    "copy-evidence": "its reviews copied public reviews or did not read as text: none of them is scored",
    "evaluation-failed": "its evaluation failed or was stopped by a budget: it is never ranked",
}
#: What was submitted: a model endpoint (``grebench submit``, the Submit form) or a file of reviews written elsewhere.
KINDS = ("endpoint", "upload")
#: The statuses a log entry may have.
STATUSES = ("accepted", "refused", "withdrawn", "held", "scored")
#: Refusals by a limit are logged once per submitter, model name and class an hour, and at most this many an hour
#: altogether: a client hammering a limit cannot grow the log without bound.
LIMIT_LOG_PER_HOUR = 200
_HANDLE = re.compile(r"^@?[A-Za-z0-9][A-Za-z0-9_.-]{1,38}$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:+ -]{0,79}$")
_CONTACT = re.compile(r"^[^\s<>\"'`]{3,200}$")


def endpoint_fingerprint(normalised_url: str | None, model_string: str | None) -> str | None:
    """16 hex digits of SHA-256 of the endpoint (its normalised URL, else its model string); None: neither given.
    The same endpoint submitted under another name has the same fingerprint; the URL cannot be read from it."""
    target = (normalised_url or "").strip() or (model_string or "").strip()
    if not target:
        return None
    return hashlib.sha256(f"endpoint\n{target}".encode()).hexdigest()[:16]


def public_handle(contact: str | None) -> str | None:
    """The contact as shown in public when it is a handle (``alice``, ``@lab-x``; lower-case, as the submitter is
    one whatever its case), else None (an e-mail address or anything else is never shown)."""
    text = (contact or "").strip()
    return text.lower() if _HANDLE.match(text) else None


def group_key(salt: str, submitter: str | None) -> str | None:
    """The salted hash a submitter's variants are grouped by (the same as an export's hashed ``submitter``)."""
    return None if not submitter else hashlib.sha256(f"{salt}{submitter}".encode()).hexdigest()[:16]


def _scrub(value: str | None, secret: str) -> str | None:
    """``value``, or None when it holds the submitted key (a key pasted into the wrong field never reaches the log)."""
    if value is None or (secret and len(secret) >= 4 and secret.strip() and secret.strip() in value):
        return None
    return value


def record_try(con: duckdb.DuckDBPyConnection, *, contact: str | None, model_name: str | None,
               normalised_url: str | None, model_string: str | None, reason_class: str | None, now: datetime,
               sub_id: str | None = None, secret: str = "", kind: str = "endpoint") -> str | None:
    """Log one try in the queue file: accepted (``sub_id``, no ``reason_class``) or refused (``reason_class``);
    returns the log id (None: a refusal by a limit already logged within the hour).  Only well-formed values are
    kept, none holding ``secret`` (the submitted key), never the URL itself."""
    if reason_class is not None and reason_class not in REASON_CLASSES:
        raise ValueError(f"unknown reason class {reason_class!r}")
    contact = (contact or "").strip()
    submitter = _scrub(contact.lower(), secret.lower()) if _CONTACT.match(contact) else None
    name = (model_name or "").strip()
    name_kept = _scrub(name, secret) if _NAME.match(name) else None
    fingerprint = endpoint_fingerprint(normalised_url, model_string)
    if reason_class in ("rate-limited", "queue-full"):
        hour = now - timedelta(hours=1)
        row = con.execute("SELECT count(*), count(*) FILTER (WHERE submitter IS NOT DISTINCT FROM ? AND model_name "
                          "IS NOT DISTINCT FROM ? AND reason_class = ?) FROM submission_log WHERE reason_class IN "
                          "('rate-limited', 'queue-full') AND created_at > ?",
                          [submitter, name_kept, reason_class, hour]).fetchone()
        if row is not None and (row[1] or row[0] >= LIMIT_LOG_PER_HOUR):
            return None
    log_id = sub_id or f"r-{uuid.uuid4().hex[:12]}"
    con.execute("INSERT INTO submission_log (id, kind, submitter, handle, model_name, endpoint_fingerprint, status, "
                "reason_class, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [log_id, kind, submitter, None if submitter is None else _scrub(public_handle(contact), secret),
                 name_kept, fingerprint, "accepted" if reason_class is None else "refused", reason_class, now])
    return log_id


def backfill_queue_log(con: duckdb.DuckDBPyConnection) -> None:
    """Log rows for queue entries made before the log existed (endpoint submissions and uploads)."""
    rows = con.execute("SELECT id, contact, model_name, normalised_url, model_string, created_at FROM submissions s "
                       "WHERE NOT EXISTS (SELECT 1 FROM submission_log l WHERE l.id = s.id)").fetchall()
    for sub_id, contact, name, url, model, created in rows:
        record_try(con, contact=contact, model_name=name, normalised_url=url, model_string=model, reason_class=None,
                   now=created, sub_id=sub_id)
    uploads = con.execute("SELECT id, contact, candidate, content_sha256, created_at FROM import_submissions s "
                          "WHERE NOT EXISTS (SELECT 1 FROM submission_log l WHERE l.id = s.id)").fetchall()
    for sub_id, contact, name, sha, created in uploads:
        record_try(con, contact=contact, model_name=name, normalised_url=None, model_string=f"upload:{sha}",
                   reason_class=None, now=created, sub_id=sub_id, kind="upload")


def sync_log(store: Store, queue: Any) -> int:
    """Copy the queue's log rows (and its withdrawn submissions never accepted) into the main store, and add rows
    for store submissions that have none (made before the log); returns the rows added.  Idempotent."""
    salt = store.salt()
    known = {r["id"] for r in store.rows("SELECT id FROM submission_log")}
    added = 0
    rows = [] if queue is None else queue.rows("SELECT * FROM submission_log ORDER BY created_at")
    withdrawn = [] if queue is None else queue.rows("SELECT * EXCLUDE (key_ciphertext) FROM submissions "
                                                    "WHERE status = 'withdrawn'")
    with store.transaction() as con:
        for r in rows:
            if r["id"] in known:
                continue
            con.execute("INSERT INTO submission_log (id, kind, handle, group_key, model_name, endpoint_fingerprint, "
                        "status, reason_class, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        [r["id"], r["kind"], r["handle"], group_key(salt, r["submitter"]), r["model_name"],
                         r["endpoint_fingerprint"], r["status"], r["reason_class"], r["created_at"]])
            known.add(r["id"])
            added += 1
        for s in withdrawn:  # a submission withdrawn while queued: the store keeps it as one (never its key)
            con.execute("INSERT OR IGNORE INTO submissions (id, submitter, contact, model_name, model_string, "
                        "base_url, normalised_url, params_json, dedup_key, released, cutoff, status, reason, "
                        "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'withdrawn', ?, ?, ?)",
                        [s["id"], s["submitter"], s["contact"], s["model_name"], s["model_string"], s["base_url"],
                         s["normalised_url"], s["params_json"], s["dedup_key"], s["released"], s["cutoff"],
                         s["reason"], s["created_at"], s["updated_at"]])
        for s in store.rows("SELECT id, submitter, contact, model_name, normalised_url, model_string, created_at "
                            "FROM submissions s WHERE NOT EXISTS (SELECT 1 FROM submission_log l WHERE l.id = s.id)"):
            con.execute("INSERT INTO submission_log (id, kind, handle, group_key, model_name, endpoint_fingerprint, "
                        "status, reason_class, created_at) VALUES (?, 'endpoint', ?, ?, ?, ?, 'accepted', NULL, ?)",
                        [s["id"], public_handle(s["contact"]), group_key(salt, s["submitter"]), s["model_name"],
                         endpoint_fingerprint(s["normalised_url"], s["model_string"]), s["created_at"]])
            added += 1
    # the status as of now, written back: a snapshot carries this table (not the submissions)
    current = {e["id"]: (e["status"], e["reason_class"]) for e in submission_log(store, queue)}
    with store.transaction() as con:
        for r in store.rows("SELECT id, status, reason_class FROM submission_log"):
            now = current.get(r["id"])
            if now is not None and now != (r["status"], r["reason_class"]):
                con.execute("UPDATE submission_log SET status = ?, reason_class = ? WHERE id = ?", [*now, r["id"]])
    return added


def failure_class(reason: str | None) -> str:
    """The public class of a stored failure reason (the text itself is never shown: it may name internals)."""
    text = (reason or "").lower()
    if "unknown paper" in text or text.startswith("line ") or "invalid json" in text:  # an uploaded file's lines
        return "invalid-form"
    if "already exists" in text or "duplicate" in text:
        return "name-taken" if "candidate named" in text else "duplicate"
    if "base url" in text or "connect" in text or "timeout" in text or "timed out" in text or "unreachable" in text:
        return "unreachable-endpoint"
    if text.startswith("refused:") or "cop" in text or "prose" in text:
        return "copy-evidence"
    return "evaluation-failed"


class LogScore(TypedDict):
    """One score of a logged submission: its board (venue-year, metric, setup), score and rank (None: unranked)."""

    board_id: str
    venue_id: str
    metric: str
    score: float | None
    rank: int | None


class LogEntry(TypedDict):
    """One row of the public log (``grebench submissions log --json``; docs/submissions.md)."""

    id: str
    kind: str
    submitted_at: str
    submitter: str
    model_name: str | None
    endpoint_fingerprint: str | None
    status: str
    reason_class: str | None
    variants: int
    variants_scored: int
    scores: list[LogScore]


def _submitter(handle: str | None, key: str | None) -> str:
    if handle:
        return handle
    return f"anon-{key[:8]}" if key else "unknown"


def _scores(store: Store) -> dict[str, list[LogScore]]:
    if not {"board_rows", "boards"} <= _tables(store):
        return {}
    out: dict[str, list[LogScore]] = {}
    for r in store.rows("SELECT r.candidate, b.board_id, b.venue_id, b.metric, r.score, r.rank FROM board_rows r "
                        "JOIN boards b USING (board_id) WHERE r.candidate IN (SELECT name FROM candidates WHERE "
                        "kind IN ('submitted', 'imported') AND submitter IS NOT NULL) ORDER BY b.board_id"):
        out.setdefault(r["candidate"], []).append({
            "board_id": r["board_id"], "venue_id": r["venue_id"], "metric": r["metric"],
            "score": None if r["score"] is None else float(r["score"]),
            "rank": None if r["rank"] is None else int(r["rank"])})
    return out


def _tables(store: Store) -> set[str]:
    return {r["table_name"] for r in store.rows("SELECT table_name FROM duckdb_tables() WHERE database_name = "
                                                "current_database()")}


def _held(store: Store) -> set[str]:
    from grebench.submissions._holds import held_submissions

    return set(held_submissions(store)) if "board_changes" in _tables(store) else set()


def _scored_names(store: Store) -> set[str]:
    if "scores" not in _tables(store):
        return set()
    return {r["candidate"] for r in store.rows("SELECT DISTINCT candidate FROM scores")}


def submission_log(store: Store, queue: Any = None) -> list[LogEntry]:
    """Every submission ever made, newest first, each with its status (accepted, refused with its reason class,
    withdrawn, held, scored), its submitter's public handle (or ``anon-<8 hex>``), its endpoint fingerprint, its
    scores and its submitter's variants; ``queue`` (a :class:`grebench.submissions.SubmissionQueue`) adds what the
    scheduler has not copied yet.  Reads the store (or an export of it) only."""
    tables = _tables(store)
    rows: list[Mapping[str, Any]] = []
    if "submission_log" in tables:
        rows += store.rows("SELECT * FROM submission_log")
    subs: dict[str, Mapping[str, Any]] = {}
    if "submissions" in tables:
        subs = {r["id"]: r for r in store.rows("SELECT id, model_name, status, reason FROM submissions")}
    if queue is not None:  # what the scheduler has not copied yet
        seen = {r["id"] for r in rows}
        salt = store.salt()
        for r in queue.rows("SELECT * FROM submission_log"):
            if r["id"] not in seen:
                rows.append({**r, "group_key": group_key(salt, r.pop("submitter"))})
        for s in queue.rows("SELECT id, model_name, status, reason FROM submissions UNION ALL SELECT id, candidate, "
                            "status, reason FROM import_submissions"):
            subs.setdefault(s["id"], s)
    held, scored, scores = _held(store), _scored_names(store), _scores(store)
    built: list[tuple[LogEntry, str, bool]] = []
    for r in rows:
        sub = subs.get(r["id"])
        name = r["model_name"]
        status, reason_class = "accepted", None
        if sub is None:  # a try refused before it was queued, an upload, a snapshot's row: as last synced ...
            status = r["status"] or "accepted"
            reason_class = r["reason_class"] if status in ("refused", "held") else None
            if status in ("accepted", "scored", "held") and name is not None:  # ... unless the store says more now
                status = "held" if name in held else "scored" if name in scored else status
        elif sub["status"] == "withdrawn":
            status = "withdrawn"
        elif name in held:  # held for the operator (a copy refused at evaluation says so in its class)
            status = "held"
            reason_class = failure_class(sub["reason"]) if sub["status"] == "failed" else None
        elif sub["status"] == "failed":
            status, reason_class = "refused", failure_class(sub["reason"])
        elif name in scored:
            status = "scored"
        has_scores = name is not None and name in scored and status not in ("refused", "accepted") \
            and not r["id"].startswith("r-")
        entry: LogEntry = {"id": r["id"], "kind": r["kind"],
                           "submitted_at": r["created_at"].isoformat(timespec="seconds"),
                           "submitter": _submitter(r["handle"], r["group_key"]), "model_name": name,
                           "endpoint_fingerprint": r["endpoint_fingerprint"], "status": status,
                           "reason_class": reason_class, "variants": 0, "variants_scored": 0,
                           "scores": scores.get(name, []) if has_scores else []}
        built.append((entry, r["group_key"] or r["id"], has_scores))
    tries: dict[str, int] = {}
    scored_tries: dict[str, int] = {}
    for _, key, has in built:
        tries[key] = tries.get(key, 0) + 1
        scored_tries[key] = scored_tries.get(key, 0) + int(has)
    out = []
    for entry, key, _ in built:
        entry["variants"], entry["variants_scored"] = tries[key], scored_tries[key]
        out.append(entry)
    out.sort(key=lambda e: (e["submitted_at"], e["id"]), reverse=True)
    return out


class LogGroup(TypedDict):
    """One submitter's tries in the log (:func:`grouped`)."""

    submitter: str
    variants: int
    variants_scored: int
    entries: list[LogEntry]


def grouped(entries: list[LogEntry]) -> list[LogGroup]:
    """The log by submitter: ``{submitter, variants, variants_scored, entries}``, the most recent submitter first."""
    groups: dict[str, LogGroup] = {}
    for e in entries:  # entries are newest first: a group's place is its newest entry's
        g = groups.setdefault(e["submitter"] if e["submitter"] != "unknown" else f"unknown:{e['id']}",
                              {"submitter": e["submitter"], "variants": 0, "variants_scored": 0, "entries": []})
        g["entries"].append(e)
        g["variants"] = max(g["variants"], e["variants"])
        g["variants_scored"] = max(g["variants_scored"], e["variants_scored"])
    return list(groups.values())


def variants_scored(store: Store) -> dict[str, int]:
    """For each submitted candidate, how many submitted candidates of its submitter were scored (itself included):
    the board's ``best of N``.  Scored: it has scores, or a row on a stored board (a reader of the published boards
    has those only).  Reads ``candidates.submitter`` (hashed in an export: the grouping is the same)."""
    tables = _tables(store)
    sources = [f"SELECT candidate FROM {t}" for t in ("scores", "board_rows") if t in tables]
    if "candidates" not in tables or not sources:
        return {}
    rows = store.rows(f"""WITH scored AS ({' UNION '.join(sources)}),
                         s AS (SELECT c.name, c.submitter FROM candidates c WHERE c.kind IN ('submitted', 'imported')
                               AND c.submitter IS NOT NULL AND c.name IN (SELECT candidate FROM scored))
                         SELECT c.name, (SELECT count(*) FROM s WHERE s.submitter = c.submitter) AS n
                         FROM candidates c WHERE c.kind IN ('submitted', 'imported') AND c.submitter IS NOT NULL""")
    return {r["name"]: int(r["n"]) for r in rows if r["n"]}


class Withdrawal(TypedDict):
    """A withdrawn submission (:func:`withdraw_submission`)."""

    id: str
    model_name: str
    detail: str


def withdraw_submission(store: Store, queue: Any, vault: Any, sub_id: str, note: str = "") -> Withdrawal:
    """Withdraw a submission at its submitter's request: its status becomes ``withdrawn`` in the queue and the store,
    its stored key is deleted, and nothing else is: its log row, candidate, reviews and scores stay, and the log shows
    the withdrawal.  Audited in ``board_changes``.  :class:`grebench.submissions.SubmissionError` when there is no
    such submission or it is withdrawn already."""
    from grebench.submissions._form import SubmissionError

    stored = store.rows("SELECT model_name, status FROM submissions WHERE id = ?", [sub_id])
    queued = [] if queue is None else queue.rows("SELECT model_name, status FROM submissions WHERE id = ?", [sub_id])
    found = stored or queued
    if not found:
        raise SubmissionError(f"no submission {sub_id!r}")
    if found[0]["status"] == "withdrawn":
        raise SubmissionError(f"submission {sub_id} is withdrawn already")
    name = found[0]["model_name"]
    detail = f"submission {sub_id} withdrawn by its submitter" + (f" ({note.strip()[:500]})" if note.strip() else "")
    if queued:
        queue.set_status(sub_id, "withdrawn", detail)  # the stored key goes with it
    if vault is not None:
        vault.forget(sub_id)
    now = utcnow()
    with store.transaction() as con:
        if stored:
            con.execute("UPDATE submissions SET status = 'withdrawn', reason = ?, updated_at = ? WHERE id = ?",
                        [detail, now, sub_id])
        con.execute("INSERT INTO board_changes VALUES (?, 'submission', ?, ?)", [now, name, detail])
    sync_log(store, queue)  # one withdrawn while queued joins the store's submissions as withdrawn
    log.info("%s", detail)
    return {"id": sub_id, "model_name": name, "detail": detail}

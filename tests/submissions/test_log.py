"""The public submissions log (issue 63 §2): every try is in it with its status and a coarse reason class, a
withdrawal stays as one, variants of one submitter are grouped, and no key, URL or e-mail address ever shows."""

from __future__ import annotations

import json
import socket
from datetime import timedelta
from typing import Any

import pytest
from click.testing import CliRunner

from grebench.cli._main import main
from grebench.endpoints import KeyVault
from grebench.settings import Settings
from grebench.store import Store, open_store, utcnow
from grebench.submissions import (
    REASON_CLASSES,
    SubmissionError,
    SubmissionForm,
    SubmissionQueue,
    accept_queued_submissions,
    endpoint_fingerprint,
    finish_submission,
    grouped,
    submission_log,
    sync_log,
    withdraw_submission,
)
from grebench.submissions._log import LIMIT_LOG_PER_HOUR, record_try

CANARY = "sk-CANARY-5e1f0a9b8c7d"
RESOLVER = {"api.model.example": ["93.184.216.34"], "private.example": ["192.168.1.20"]}
#: What may never appear in the log, its JSON, the site or a snapshot.
SECRETS = (CANARY, "api.model.example", "private.example", "hidden-path", "@example.org", "example.org")


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("outbound connection attempted")

    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


def _form(**changes: str) -> SubmissionForm:
    base = {"model_name": "Lab Model v1", "base_url": "https://api.model.example/v1/hidden-path",
            "released": "2025-03-01", "cutoff": "2024-12-01", "contact": "lab-x", "api_key": CANARY}
    base.update(changes)
    return SubmissionForm(**base)


def _no_secret(text: str) -> None:
    for secret in SECRETS:
        assert secret.lower() not in text.lower(), secret


def _by_id(entries: list[Any]) -> dict[str, Any]:
    return {e["id"]: e for e in entries}


def test_refused_and_accepted_tries_are_logged_with_status_and_reason_class(settings: Settings,
                                                                            store: Store) -> None:
    queue, vault = SubmissionQueue(None), KeyVault(env={})
    ok = queue.submit(_form(), settings, vault, RESOLVER)
    assert ok["ok"]
    bad_date = queue.submit(_form(model_name="Lab Model v2", cutoff="2024-13-01"), settings, vault, RESOLVER)
    private = queue.submit(_form(model_name="Lab Model v3", base_url="https://private.example/v1",
                                 contact="Bob@Example.org"), settings, vault, RESOLVER)
    dup = queue.submit(_form(contact="someone-else"), settings, vault, RESOLVER)
    taken = queue.submit(_form(base_url="https://api.model.example/v2"), settings, vault, RESOLVER)
    assert not (bad_date["ok"] or private["ok"] or dup["ok"] or taken["ok"])

    entries = submission_log(store, queue)  # before the scheduler copied anything: the queue's rows
    assert len(entries) == 5
    got = sorted((e["model_name"], e["status"], e["reason_class"]) for e in entries)
    assert got == [("Lab Model v1", "accepted", None), ("Lab Model v1", "refused", "duplicate"),
                   ("Lab Model v1", "refused", "name-taken"), ("Lab Model v2", "refused", "invalid-form"),
                   ("Lab Model v3", "refused", "unreachable-endpoint")]
    assert {e["reason_class"] for e in entries} <= set(REASON_CLASSES) | {None}
    accepted = _by_id(entries)[str(ok["id"])]
    assert accepted["submitter"] == "lab-x"
    assert accepted["endpoint_fingerprint"] == endpoint_fingerprint("https://api.model.example/v1/hidden-path",
                                                                    None)
    # an e-mail address is never the handle: a stable pseudonym instead
    [bob] = [e for e in entries if e["model_name"] == "Lab Model v3"]
    assert bob["submitter"].startswith("anon-") and len(bob["submitter"]) == len("anon-") + 8
    _no_secret(json.dumps(entries))

    # the scheduler copies the log into the store (idempotently); the statuses follow the submissions
    accept_queued_submissions(store, queue, settings, RESOLVER)
    assert sync_log(store, queue) == 5 and sync_log(store, queue) == 0
    stored = submission_log(store)
    assert sorted((e["model_name"], e["status"]) for e in stored) == sorted(
        (e["model_name"], e["status"]) for e in entries)
    finish_submission(queue, vault, str(ok["id"]), False, "APIConnectionError: connect to 10.1.2.3:443 refused",
                      store)
    failed = _by_id(submission_log(store))[str(ok["id"])]
    assert (failed["status"], failed["reason_class"]) == ("refused", "unreachable-endpoint")
    # the raw reason (an internal address) is not in the log
    assert "10.1.2.3" not in json.dumps(submission_log(store))
    # lab-x's three tries are grouped; the others stand alone
    groups = {g["submitter"]: g for g in grouped(stored)}
    assert groups["lab-x"]["variants"] == 3 and len(groups["lab-x"]["entries"]) == 3
    assert groups["someone-else"]["variants"] == 1


def test_a_key_typed_into_another_field_never_reaches_the_log(settings: Settings, store: Store) -> None:
    queue = SubmissionQueue(None)
    refused = queue.submit(_form(contact=CANARY, model_name=CANARY, cutoff="bad"), settings, KeyVault(env={}),
                           RESOLVER)
    assert not refused["ok"]
    [entry] = submission_log(store, queue)
    assert entry["model_name"] is None and entry["submitter"] == "unknown"
    _no_secret(json.dumps(entry))
    assert CANARY not in json.dumps(queue.rows("SELECT * FROM submission_log"), default=str)


def test_refusals_by_a_limit_are_logged_once_an_hour_and_bounded(settings: Settings, store: Store) -> None:
    queue, vault = SubmissionQueue(None), KeyVault(env={})
    limited = settings.replace(submissions_per_week=1)
    assert queue.submit(_form(), limited, vault, RESOLVER)["ok"]
    for _ in range(3):
        again = queue.submit(_form(model_name="Lab Model v9"), limited, vault, RESOLVER)
        assert "rate limit" in again["message"]
    entries = submission_log(store, queue)
    assert [(e["model_name"], e["reason_class"]) for e in entries if e["status"] == "refused"] == [
        ("Lab Model v9", "rate-limited")]
    now = utcnow()
    with queue.connect() as con:
        for i in range(LIMIT_LOG_PER_HOUR + 5):
            record_try(con, contact=f"spam-{i}", model_name="X", normalised_url=None, model_string=None,
                       reason_class="rate-limited", now=now + timedelta(seconds=i))
    limited_rows = [e for e in submission_log(store, queue) if e["reason_class"] == "rate-limited"]
    assert len(limited_rows) == LIMIT_LOG_PER_HOUR


def test_a_withdrawn_submission_stays_in_the_log_as_withdrawn(settings: Settings) -> None:
    queue, vault = SubmissionQueue(settings.queue_path), KeyVault(env={})
    first = str(queue.submit(_form(), settings, vault, RESOLVER)["id"])
    second = str(queue.submit(_form(model_name="Lab Model v2", params='{"temperature": 0.5}'), settings, vault,
                              RESOLVER)["id"])
    store = open_store(settings.db_path)
    try:
        accept_queued_submissions(store, queue, settings, RESOLVER)  # the first is accepted, running
        third = str(queue.submit(_form(model_name="Lab Model v3", params='{"temperature": 0.9}'), settings, vault,
                                 RESOLVER)["id"])
        withdrawn = withdraw_submission(store, queue, vault, third, "asked by e-mail")  # withdrawn while queued
        assert withdrawn["model_name"] == "Lab Model v3"
        with pytest.raises(SubmissionError, match="withdrawn already"):
            withdraw_submission(store, queue, vault, third)
        with pytest.raises(SubmissionError, match="no submission"):
            withdraw_submission(store, queue, vault, "nope")
        # never accepted afterwards, kept (without its key) in the store
        accept_queued_submissions(store, queue, settings, RESOLVER)
        assert store.scalar("SELECT status FROM submissions WHERE id = ?", [third]) == "withdrawn"
        assert store.scalar("SELECT count(*) FROM candidates WHERE name = 'Lab Model v3'") == 0
        assert queue.rows("SELECT key_ciphertext FROM submissions WHERE id = ?", [third]) == [
            {"key_ciphertext": None}]
    finally:
        store.close()
    env = {"GREBENCH_DATA_DIR": str(settings.data_path)}
    out = CliRunner().invoke(main, ["submissions", "withdraw", first, "--json"], env=env)
    assert out.exit_code == 0, out.output
    logged = CliRunner().invoke(main, ["submissions", "log", "--json"], env=env)
    assert logged.exit_code == 0, logged.output
    entries = _by_id(json.loads(logged.stdout))
    assert set(entries) == {first, second, third}
    assert (entries[first]["status"], entries[second]["status"], entries[third]["status"]) == (
        "withdrawn", "accepted", "withdrawn")
    assert {e["variants"] for e in entries.values()} == {3}
    _no_secret(logged.stdout)
    text = CliRunner().invoke(main, ["submissions", "log"], env=env)
    assert text.exit_code == 0 and "lab-x: 3 submission(s), 0 scored" in text.output, text.output
    assert text.output.count("withdrawn") == 2
    _no_secret(text.output)
    again = CliRunner().invoke(main, ["submissions", "withdraw", first], env=env)
    assert again.exit_code == 1 and "withdrawn already" in again.output and "Traceback" not in again.output
    # nothing was deleted: the store still has every submission
    store = open_store(settings.db_path, read_only=True)
    try:
        assert store.scalar("SELECT count(*) FROM submissions") == 3
        assert store.scalar("SELECT count(*) FROM board_changes WHERE detail LIKE '%withdrawn by its submitter%'") == 2
    finally:
        store.con.close()


def test_uploads_of_reviews_are_logged_too_and_count_as_variants(settings: Settings, store: Store) -> None:
    from grebench.submissions import ImportForm, accept_queued_imports, queue_import, variants_scored
    from tests.bench.conftest import tiny_papers

    with store.transaction():
        for paper in tiny_papers():
            store.upsert_paper(paper)
    papers = frozenset(f"paper{n}" for n in range(5))
    good = (json.dumps({"paper_id": "paper0", "review": "Summary: fine."}) + "\n").encode()
    form = ImportForm(candidate="agent-1", contact="lab-x", cutoff="2019-01-01", model="agent-x")
    queue = SubmissionQueue(None)
    ok = queue_import(queue, form, good, settings, papers)
    bad = queue_import(queue, ImportForm(candidate="agent-2", contact="lab-x"), b'{"paper_id": "nope"}\n',
                       settings, papers)
    stale = queue_import(queue, ImportForm(candidate="agent-3", contact="lab-x"),
                         (json.dumps({"paper_id": "paper4", "review": "x"}) + "\n").encode(), settings, papers)
    assert ok["ok"] and not bad["ok"] and stale["ok"]
    store.con.execute("DELETE FROM papers WHERE paper_id = 'paper4'")  # the stale one fails on import
    accept_queued_imports(store, queue, settings)
    sync_log(store, queue)
    entries = _by_id(submission_log(store))  # the store alone: statuses as synced
    assert {e["kind"] for e in entries.values()} == {"upload"}
    assert (entries[str(ok["id"])]["status"], entries[str(stale["id"])]["status"]) == ("accepted", "refused")
    assert entries[str(stale["id"])]["reason_class"] == "invalid-form"
    [refused] = [e for e in entries.values() if e["model_name"] == "agent-2"]
    assert (refused["status"], refused["reason_class"]) == ("refused", "invalid-form")
    # scores arrive: the store says "scored" at once, and the submitter's variants count it
    gen = store.scalar("SELECT generation_id FROM generations WHERE candidate = 'agent-1'")
    store.con.execute("INSERT INTO scores VALUES ('gem', 'offline', 'rules', 'gem-v1', 'agent-1', 'paper0', 'r1', ?, "
                      "-1.0, -2.0, 1.0, 5, ?)", [gen, utcnow()])
    scored = _by_id(submission_log(store))[str(ok["id"])]
    assert (scored["status"], scored["variants"], scored["variants_scored"]) == ("scored", 3, 1)
    assert variants_scored(store) == {"agent-1": 1}

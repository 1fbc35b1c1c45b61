"""Submissions: validation, rate limit, duplicates, the key kept secret, hand-over to the bench stage."""

from __future__ import annotations

import logging
import socket
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet

from grebench.endpoints import KeyVault
from grebench.settings import Settings
from grebench.store import Store
from grebench.submissions import SubmissionForm, SubmissionQueue, accept_queued_submissions, finish_submission

CANARY = "sk-CANARY-7f3a9e0b1c2d"
RESOLVER = {"api.model.example": ["93.184.216.34"], "private.example": ["192.168.1.20"]}


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("outbound connection attempted")

    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


def _form(**changes: str) -> SubmissionForm:
    base = {"model_name": "My Model 1", "base_url": "https://api.model.example/v1", "released": "2025-03-01",
            "cutoff": "2024-12-01", "contact": "Alice@example.org", "api_key": CANARY}
    base.update(changes)
    return SubmissionForm(**base)


def test_good_submission_is_queued_and_bad_fields_are_refused(settings: Settings) -> None:
    queue, vault = SubmissionQueue(None), KeyVault(env={})
    ok = queue.submit(_form(), settings, vault, RESOLVER)
    assert ok["ok"] and ok["message"].startswith("Queued as")
    rows = queue.public_rows()
    assert [(r["id"], r["model_name"], r["status"]) for r in rows] == [(ok["id"], "My Model 1", "queued")]
    bad = {
        "base_url": ("https://private.example/v1", "private"),
        "cutoff": ("2024-13-01", "YYYY-MM-DD"),
        "released": ("2020-01-01", "cutoff cannot be after"),
        "model_name": ("<script>", "model name"),
        "contact": ("a b", "contact"),
        "params": ('{"api_base": "http://127.0.0.1"}', "not allowed"),
    }
    for field, (value, reason) in bad.items():
        result = queue.submit(_form(**{"model_name": "Other", field: value}), settings, vault, RESOLVER)
        assert not result["ok"] and reason in result["message"], (field, result)
    local = queue.submit(_form(model_name="Local", base_url="", model_string="ollama/llama3"), settings, vault)
    assert "needs a base URL" in local["message"]
    future = queue.submit(_form(model_name="Future", cutoff="2999-01-01", released=""), settings, vault, RESOLVER)
    assert "in the future" in future["message"]
    assert len(queue.public_rows()) == 1


def test_rate_limit_and_duplicates(settings: Settings) -> None:
    queue, vault = SubmissionQueue(None), KeyVault(env={})
    limited = settings.replace(submissions_per_week=2)
    first = queue.submit(_form(), limited, vault, RESOLVER)
    dup = queue.submit(_form(api_key="", contact="bob@example.org"), limited, vault, RESOLVER)
    assert "duplicate of submission " + first["id"] in dup["message"]
    second = queue.submit(_form(model_name="Second", params='{"temperature": 0.2}'), limited, vault, RESOLVER)
    assert second["ok"]
    third = queue.submit(_form(model_name="Third"), limited, vault, RESOLVER)
    assert not third["ok"] and "rate limit" in third["message"]
    # the submitter is the contact, case-insensitive
    again = queue.submit(_form(model_name="Fourth", contact="ALICE@example.org"), limited, vault, RESOLVER)
    assert "rate limit" in again["message"]


def test_key_is_encrypted_at_rest_and_never_leaks(settings: Settings, tmp_path: Path, store: Store,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    server_key = Fernet.generate_key().decode()
    vault = KeyVault(env={"GREBENCH_SECRET_KEY": server_key})
    assert vault.encrypted_at_rest
    queue = SubmissionQueue(tmp_path / "queue.duckdb")
    sub = queue.submit(_form(), settings, vault, RESOLVER)
    stored = queue.rows("SELECT key_ciphertext FROM submissions")[0]["key_ciphertext"]
    assert stored and CANARY not in stored
    secret = vault.open(sub["id"], stored)
    assert secret is not None and secret.reveal() == CANARY and CANARY not in repr(secret) + str(secret)
    assert CANARY not in repr(_form())
    assert CANARY.encode() not in (tmp_path / "queue.duckdb").read_bytes()

    accepted = accept_queued_submissions(store, queue, settings, RESOLVER)
    # the declared cutoff is information only (in `submissions.cutoff`) until the operator vouches for it
    assert [(c["name"], c["kind"], c["cutoff"], c["api_base"]) for c in accepted] == [
        ("My Model 1", "submitted", None, "https://api.model.example/v1")]
    cand = store.rows("SELECT kind, model, cutoff, api_key_env FROM candidates WHERE name = 'My Model 1'")[0]
    assert cand["kind"] == "submitted" and cand["model"] == "openai/My-Model-1" and cand["api_key_env"] is None
    assert str(store.scalar("SELECT cutoff FROM submissions")) == "2024-12-01"
    assert store.scalar("SELECT key_ciphertext FROM submissions") is None
    assert queue.public_rows()[0]["status"] == "running"
    assert accept_queued_submissions(store, queue, settings, RESOLVER) == []  # nothing queued any more

    finish_submission(queue, vault, sub["id"], ok=False, reason="endpoint returned 401", store=store)
    assert queue.rows("SELECT status, reason, key_ciphertext FROM submissions")[0] == {
        "status": "failed", "reason": "endpoint returned 401", "key_ciphertext": None}
    assert store.scalar("SELECT status FROM submissions") == "failed"

    exported = store.export_parquet(tmp_path / "export")
    for path in exported.values():
        assert CANARY.encode() not in path.read_bytes()
    assert CANARY not in caplog.text and "My Model 1" in caplog.text


def test_key_without_server_key_stays_in_memory(settings: Settings, store: Store) -> None:
    vault, queue = KeyVault(env={}), SubmissionQueue(None)
    sub = queue.submit(_form(), settings, vault, RESOLVER)
    assert queue.rows("SELECT key_ciphertext FROM submissions")[0]["key_ciphertext"] is None
    assert vault.open(sub["id"], None).reveal() == CANARY
    finish_submission(queue, vault, sub["id"], ok=True)
    assert vault.open(sub["id"], None) is None
    with pytest.raises(ValueError, match="not a valid Fernet key"):
        KeyVault(env={"GREBENCH_SECRET_KEY": "short"})


def test_name_clash_fails_with_reason(settings: Settings, store: Store) -> None:
    store.con.execute("INSERT INTO candidates (name, kind, params_json, updated_at) "
                      "VALUES ('my model 1', 'llm', '{}', now())")
    queue = SubmissionQueue(None)
    queue.submit(_form(), settings, KeyVault(env={}), RESOLVER)
    assert accept_queued_submissions(store, queue) == []
    row = queue.public_rows()[0]
    assert row["status"] == "failed" and "already exists" in row["reason"]


def test_a_bad_form_gets_every_field_error_in_one_reply(settings: Settings) -> None:
    """``http://127.0.0.1:1`` is told about plain http, port 1 and the loopback address at once, and every other bad
    field of the same form is named beside it (before: one problem per try)."""
    queue = SubmissionQueue(None)
    bad = _form(model_name="<script>", base_url="http://127.0.0.1:1", cutoff="2024-13-01", contact="a b",
                params='{"api_base": "x", "temperature": "hot"}')
    result = queue.submit(bad, settings, KeyVault(env={}), RESOLVER, source="198.51.100.7")
    assert not result["ok"] and result["next_try"] is None
    errors = result["errors"]
    assert set(errors) == {"model_name", "base_url", "cutoff", "contact", "params"}, errors
    url = " ".join(errors["base_url"])
    assert "plain http" in url and "use https://" in url and "port 1 " in url and "loopback" in url, url
    assert len(errors["params"]) == 2 and "'api_base' is not allowed" in errors["params"][0]
    for problems in errors.values():  # and the one-line message names each of them
        for problem in problems:
            assert problem in result["message"], (problem, result["message"])
    # following the advice works: https, a public name, an unprivileged port, the other fields fixed
    fixed = queue.submit(_form(base_url="https://api.model.example:8443/v1"), settings, KeyVault(env={}), RESOLVER,
                         source="198.51.100.7")
    assert fixed["ok"], fixed


def test_the_key_field_is_required_for_hosted_providers_only(settings: Settings) -> None:
    queue, vault = SubmissionQueue(None), KeyVault(env={})
    hosted = queue.submit(_form(base_url="", model_string="openai/gpt-4o-mini", api_key=""), settings, vault)
    assert list(hosted["errors"]) == ["api_key"] and "own API key" in hosted["errors"]["api_key"][0]
    assert queue.submit(_form(api_key=""), settings, vault, RESOLVER)["ok"]  # an endpoint of one's own: optional


def test_a_refused_submission_does_not_reduce_the_weekly_quota(settings: Settings) -> None:
    """Only accepted entries count toward ``submissions_per_address_per_week``; the refusal that ends the quota
    says when the next try is allowed (the oldest accepted entry's time + 7 days)."""
    from datetime import datetime, timedelta

    from grebench.store import SimulatedClock, use_clock

    queue, vault = SubmissionQueue(None), KeyVault(env={})
    limited = settings.replace(submissions_per_address_per_week=2, submissions_per_week=10)
    start = datetime(2026, 11, 20, 9, 30, 15)
    with use_clock(SimulatedClock(start)) as clock:
        for i in range(5):  # five refused tries: a reserved name, a bad URL, ...
            refused = queue.submit(_form(model_name="human" if i % 2 else f"M{i}", base_url="https://127.0.0.1/"),
                                   limited, vault, RESOLVER, source="198.51.100.7")
            assert not refused["ok"] and refused["errors"], refused
        assert queue.allowance(limited.submissions, "198.51.100.7").used == 0
        first = queue.submit(_form(model_name="First"), limited, vault, RESOLVER, source="198.51.100.7")
        clock.set(start + timedelta(days=1))
        second = queue.submit(_form(model_name="Second"), limited, vault, RESOLVER, source="198.51.100.7")
        assert first["ok"] and second["ok"], (first, second)
        third = queue.submit(_form(model_name="Third"), limited, vault, RESOLVER, source="198.51.100.7")
        assert not third["ok"] and "rate limit reached for your network address" in third["message"]
        assert third["next_try"] == "2026-11-27 09:31 UTC" and third["next_try"] in third["message"]
        allowance = queue.allowance(limited.submissions, "198.51.100.7")
        assert (allowance.used, allowance.limit) == (2, 2) and "2026-11-27 09:31 UTC" in allowance.sentence()
        assert queue.submit(_form(model_name="Other"), limited, vault, RESOLVER, source="198.51.100.8")["ok"]
        clock.set(start + timedelta(days=7, minutes=1))
        assert queue.submit(_form(model_name="Third"), limited, vault, RESOLVER, source="198.51.100.7")["ok"]


def test_refused_tries_have_their_own_hourly_limit(settings: Settings) -> None:
    from datetime import datetime, timedelta

    from grebench.store import SimulatedClock, use_clock

    queue, vault = SubmissionQueue(None), KeyVault(env={})
    limited = settings.replace(submission_refusals_per_address_per_hour=3)
    start = datetime(2026, 11, 20, 9, 0, 0)
    with use_clock(SimulatedClock(start)) as clock:
        for i in range(3):
            clock.set(start + timedelta(minutes=i))
            assert queue.submit(_form(contact="x"), limited, vault, RESOLVER, source="198.51.100.7")["errors"]
        paused = queue.submit(_form(), limited, vault, RESOLVER, source="198.51.100.7")  # a good form: paused too
        assert not paused["ok"] and "too many refused tries" in paused["message"]
        # the first refusal (09:00:00 and a tick of the simulated clock) leaves the hour after 10:00: said as 10:01
        assert paused["next_try"] == "2026-11-20 10:01 UTC" and paused["errors"] == {}
        assert queue.submit(_form(model_name="Elsewhere"), limited, vault, RESOLVER, source="198.51.100.8")["ok"]
        clock.set(start + timedelta(hours=1, seconds=1))
        assert queue.submit(_form(), limited, vault, RESOLVER, source="198.51.100.7")["ok"]
        assert queue.allowance(limited.submissions, "198.51.100.7").used == 1  # the refusals took nothing of the quota


def test_refusals_an_older_queue_file_counted_as_sources_move_out_of_the_quota(settings: Settings,
                                                                                 tmp_path: Path) -> None:
    path = tmp_path / "queue.duckdb"
    SubmissionQueue(path)
    import duckdb

    from grebench.store import utcnow

    with duckdb.connect(str(path)) as con:  # what the queue file held before issue 50
        con.executemany("INSERT INTO submission_sources VALUES (?, '198.51.100.7', ?)",
                        [[f"refused-{i:012d}", utcnow()] for i in range(6)])
    queue = SubmissionQueue(path)
    assert queue.allowance(settings.submissions, "198.51.100.7").used == 0
    assert queue.rows("SELECT count(*) AS n FROM submission_refusals") == [{"n": 6}]

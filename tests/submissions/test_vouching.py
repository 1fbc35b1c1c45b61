"""Nothing anonymous buys rank, nobody blocks the service: a submitted model's declared cutoff is information only
until the operator vouches for it (audited); a hanging or failing endpoint is stopped by the submission budgets;
a wrong server key keeps the ciphertext; reserved names and keyless hosted models are refused at submit time."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from datetime import date, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from cryptography.fernet import Fernet

from grebench.bench import Candidate, ImportRefused, is_clean, is_vouched, read_import
from grebench.bench._generations import make_row, write_rows
from grebench.cli._main import main
from grebench.endpoints import KeyUnreadable, KeyVault
from grebench.progress import NoProgress
from grebench.scoring._leaderboard import leaderboard
from grebench.settings import Settings
from grebench.store import Store, open_store
from grebench.submissions import (
    SubmissionError,
    SubmissionForm,
    SubmissionQueue,
    _evaluate,
    _turns,
    accept_queued_submissions,
    approve_submission,
    evaluate_queued,
    validate_submission,
)
from tests.bench.conftest import tiny_papers
from tests.fakes.openai_server import FakeOpenAIServer

RESOLVER = {"api.model.example": ["93.184.216.34"]}


def _form(**changes: str) -> SubmissionForm:
    base = {"model_name": "Honest 1", "base_url": "https://api.model.example/v1", "released": "2019-03-01",
            "cutoff": "2000-01-01", "contact": "alice@example.org", "api_key": "sk-test-key"}
    base.update(changes)
    return SubmissionForm(**base)


@pytest.fixture
def papered(store: Store) -> Store:
    with store.transaction():
        for paper in tiny_papers():
            store.upsert_paper(paper)
    return store


def _accepted(store: Store, settings: Settings, vault: KeyVault | None = None) -> tuple[SubmissionQueue, str]:
    queue = SubmissionQueue(None)
    result = queue.submit(_form(), settings, vault or KeyVault(env={}), RESOLVER)
    assert result["ok"] and "not trusted" in result["message"], result
    accept_queued_submissions(store, queue, settings, RESOLVER)
    return queue, result["id"]


def test_declared_cutoff_counts_only_once_the_operator_vouches_and_the_approval_is_audited(
        papered: Store, settings: Settings) -> None:
    store = papered
    _, sub_id = _accepted(store, settings)
    cand = store.rows("SELECT kind, cutoff, params_json FROM candidates WHERE name = 'Honest 1'")[0]
    assert (cand["kind"], cand["cutoff"]) == ("submitted", None)
    assert is_vouched(cand["kind"], cand["cutoff"], cand["params_json"]) is False
    public = datetime(2019, 11, 8)
    assert not is_clean(None, public, "submitted") and is_clean(None, public, "llm")
    # one review written before the paper's reviews were public (sealed), one after
    rows = [make_row(candidate="Honest 1", paper_id=pid, prompt_version="v", params={}, source_review_id=None,
                     status="ok", text="A review.", sections=None, parse_ok=True, flags={}, error=None, attempts=1,
                     generated_at=at, reviews_public_at=public)
            for pid, at in (("paper0", datetime(2019, 10, 1)), ("paper1", datetime(2019, 12, 1)))]
    write_rows(store, rows)
    clean = {r["paper_id"]: r["clean"] for r in store.rows("SELECT paper_id, clean FROM clean_pairs "
                                                            "WHERE candidate = 'Honest 1'")}
    assert clean == {"paper0": True, "paper1": False}
    for row in rows:  # both reviews scored: the board decides which count
        store.con.execute("INSERT INTO scores VALUES ('gem', 'offline', 'rules', 'gem-v1', 'Honest 1', ?, ?, ?, "
                          "-1.0, -2.0, 1.0, 5, ?)", [row["paper_id"], f"{row['paper_id']}-r1", row["generation_id"],
                                                    datetime(2020, 1, 1)])
    [board] = leaderboard(store, "gem", "offline", "rules", samples=20)
    assert (board["vouched"], board["clean_papers"], board["papers"]) == (False, 1, 1)  # the sealed paper only

    changes = store.scalar("SELECT count(*) FROM board_changes")
    with pytest.raises(SubmissionError, match="waits for sealed evidence: no paper of it scored beside the human"):
        approve_submission(store, sub_id, note="checked the model card")  # its sealed-gap test cannot run yet
    assert store.scalar("SELECT count(*) FROM board_changes") == changes  # nothing written: not a hold
    result = approve_submission(store, sub_id, note="checked the model card",
                                override="two papers only: the sealed-gap test cannot run on this sample")
    assert result["cutoff"] == "2000-01-01"
    clean = {r["paper_id"]: r["clean"] for r in store.rows("SELECT paper_id, clean FROM clean_pairs "
                                                            "WHERE candidate = 'Honest 1'")}
    assert clean == {"paper0": True, "paper1": True}
    [board] = leaderboard(store, "gem", "offline", "rules", samples=20)
    assert (board["vouched"], board["clean_papers"], board["papers"]) == (True, 2, 2)
    cand = store.rows("SELECT kind, cutoff, params_json FROM candidates WHERE name = 'Honest 1'")[0]
    assert is_vouched(cand["kind"], cand["cutoff"], cand["params_json"]) is True
    audit = store.rows("SELECT kind, detail FROM board_changes WHERE subject = 'Honest 1' ORDER BY changed_at")
    assert "not vouched" in audit[0]["detail"]
    assert f"submission {sub_id} vouched for by the operator" in audit[-1]["detail"]
    assert "checked the model card" in audit[-1]["detail"]
    assert "OVERRIDE by the operator over: no sealed-gap test yet (reason: two papers only" in audit[-1]["detail"]
    with pytest.raises(SubmissionError, match="vouched for already"):
        approve_submission(store, sub_id)
    with pytest.raises(SubmissionError, match="no accepted submission"):
        approve_submission(store, "nope")


def test_cli_approve_and_list(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    store = open_store(settings.db_path)
    try:
        with store.transaction():
            for paper in tiny_papers():
                store.upsert_paper(paper)
        _, sub_id = _accepted(store, settings)
    finally:
        store.close()
    env = {"GREBENCH_DATA_DIR": str(settings.data_path)}
    listed = CliRunner().invoke(main, ["submissions", "list"], env=env)
    assert listed.exit_code == 0 and "not vouched: sealed only" in listed.output, listed.output
    waits = CliRunner().invoke(main, ["submissions", "approve", sub_id], env=env)
    assert waits.exit_code == 1 and "waits for sealed evidence: no paper of it scored" in waits.output, waits.output
    assert "--override REASON" in waits.output
    empty = CliRunner().invoke(main, ["submissions", "approve", sub_id, "--override", " "], env=env)
    assert empty.exit_code == 2 and "--override needs a reason" in empty.output, empty.output
    ok = CliRunner().invoke(main, ["submissions", "approve", sub_id, "--json", "--override", "demo store"], env=env)
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout)["cutoff"] == "2000-01-01"
    again = CliRunner().invoke(main, ["submissions", "approve", sub_id], env=env)
    assert again.exit_code == 1 and "vouched for already" in again.output and "Traceback" not in again.output


def test_reserved_names_and_keyless_hosted_models_are_refused_at_submit_time(settings: Settings) -> None:
    for name in ("abstract-only", "Rephrase", "human", "GENERIC"):
        with pytest.raises(SubmissionError, match="is reserved"):
            validate_submission(_form(model_name=name), settings, RESOLVER)
    with pytest.raises(SubmissionError, match="called with your own API key: give one"):
        validate_submission(_form(base_url="", model_string="openai/gpt-4o-mini", api_key=""), settings, RESOLVER)
    assert validate_submission(_form(base_url="", model_string="openai/gpt-4o-mini"), settings, RESOLVER)


def test_a_wrong_server_key_is_reported_as_such_and_the_ciphertext_is_kept(papered: Store, settings: Settings,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(socket.socket, "connect", lambda *a, **k: pytest.fail("no call may be made"))
    right = KeyVault(env={"GREBENCH_SECRET_KEY": Fernet.generate_key().decode()})
    wrong = KeyVault(env={"GREBENCH_SECRET_KEY": Fernet.generate_key().decode()})
    queue = SubmissionQueue(None)
    sub_id = queue.submit(_form(), settings, right, RESOLVER)["id"]
    stored = queue.rows("SELECT key_ciphertext FROM submissions")[0]["key_ciphertext"]
    with pytest.raises(KeyUnreadable, match="cannot be decrypted"):
        wrong.open(sub_id, stored)
    with pytest.raises(KeyUnreadable, match="not set"):
        KeyVault(env={}).open(sub_id, stored)
    summary = evaluate_queued(papered, settings, "run", queue, wrong, RESOLVER)
    [entry] = summary["evaluated"]
    assert not entry["ok"] and "cannot be decrypted" in entry["error"] and "no API key" not in entry["error"]
    assert queue.rows("SELECT status, key_ciphertext FROM submissions") == [
        {"status": "running", "key_ciphertext": stored}]
    assert papered.scalar("SELECT status FROM submissions") == "running"


@pytest.fixture
def hanging() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(mode="hang") as server:
        yield server


def _budget_settings(settings: Settings, **values: Any) -> Settings:
    return settings.replace(bench_concurrency=1, submission_call_timeout_s=1.0, submission_max_retries=0,
                            **values)


def _candidate(url: str) -> Candidate:
    return Candidate(name="Endpoint", kind="llm", model="openai/fake-model", api_base=url, cutoff=date(2000, 1, 1),
                     params={"temperature": 0, "max_tokens": 64, "context_tokens": 8192}, stream=True)


def test_a_hanging_endpoint_is_stopped_after_the_consecutive_failure_budget(
        papered: Store, settings: Settings, hanging: FakeOpenAIServer) -> None:
    fast = _budget_settings(settings, submission_max_consecutive_failures=2)
    papers = [f"paper{i}" for i in range(4)]
    result = _turns.take_turn(papered, fast, "run", "sub1", _candidate(hanging.url), papers, NoProgress())
    assert result.finished and result.stopped is not None
    assert "2 failed calls in a row" in result.stopped and "timed out" in result.stopped, result
    tried = papered.rows("SELECT paper_id, status FROM generations WHERE candidate = 'Endpoint' ORDER BY paper_id")
    assert tried == [{"paper_id": "paper0", "status": "failed"}, {"paper_id": "paper1", "status": "failed"}]
    bounded = _evaluate.submission_settings(settings).limits.llm_timeout_s
    assert bounded == settings.submissions.submission_call_timeout_s


def test_the_wall_time_budget_stops_between_batches(papered: Store, settings: Settings,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    ticks = iter([0.0, 1.0, 5000.0, 5001.0])
    monkeypatch.setattr(_turns, "_clock", lambda: next(ticks))  # observed progress, not the machine's speed
    with FakeOpenAIServer() as server:
        result = _turns.take_turn(papered, _budget_settings(settings), "run", "sub1", _candidate(server.url),
                                  [f"paper{i}" for i in range(4)], NoProgress())
        assert len(server.chat_requests) == 1
    assert result.stopped is not None and result.stopped.startswith("stopped: wall-time budget spent")
    assert "after 1 of 4 papers" in result.stopped, result


def test_an_import_line_with_very_many_unknown_keys_gets_a_short_message() -> None:
    line = json.dumps({"paper_id": "paper0", "review": "x", **{f"k{i}": 0 for i in range(200_000)}})
    with pytest.raises(ImportRefused) as caught:
        read_import(line.encode(), {"paper0"})
    message = caught.value.message()
    assert len(message) < 1200 and "and 199,990 more" in message, message[:300]


def test_settings_bound_the_budgets(tmp_path: Path) -> None:
    from grebench.settings import load_settings

    config = tmp_path / "g.toml"
    config.write_text("submission_max_wall_s = 10\n")
    with pytest.raises(ValueError, match="submission_max_wall_s"):
        load_settings(config, env={})

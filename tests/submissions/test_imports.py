"""Imported-review submissions: validated with the bench's validator, queued, then imported by the scheduler."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from grebench.endpoints import KeyVault
from grebench.pipeline import RunOptions, StageContext, stages
from grebench.progress import NoProgress
from grebench.settings import Settings
from grebench.store import Store, open_store
from grebench.submissions import ImportForm, SubmissionQueue, accept_queued_imports, queue_import
from tests.bench.conftest import tiny_papers

PAPERS = frozenset(f"paper{n}" for n in range(5))


@pytest.fixture
def papers_store() -> Iterator[Store]:
    """An in-memory store with the tiny papers (reviews public on 2019-11-08)."""
    store = open_store(None)
    with store.transaction():
        for paper in tiny_papers():
            store.upsert_paper(paper)
    yield store
    store.con.close()


def _file(*lines: Any) -> bytes:
    return "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines).encode()


def _form(**changes: str) -> ImportForm:
    base = {"candidate": "agent-1", "contact": "Bob@example.org", "cutoff": "2019-01-01", "model": "agent-x"}
    base.update(changes)
    return ImportForm(**base)


GOOD = _file({"paper_id": "paper0", "review": "Summary: fine.\nWeaknesses: none."},
             {"paper_id": "paper1", "review": "Weaknesses: baselines.", "generated_at": "2019-10-01T00:00:00Z"})


def test_a_valid_upload_is_queued_and_a_bad_one_lists_its_lines(settings: Settings) -> None:
    queue = SubmissionQueue(None)
    ok = queue_import(queue, _form(), GOOD, settings, PAPERS)
    assert ok["ok"] and ok["message"].startswith(
        f"Queued as {ok['id']}: 2 reviews of agent-1 (declared cutoff 2019-01-01: shown, not trusted; only papers "
        "whose reviews were not yet public when this file was received count)")
    row = queue.rows("SELECT * FROM import_submissions")[0]
    assert (row["status"], row["reviews"], row["submitter"]) == ("queued", 2, "bob@example.org")
    assert json.loads(row["meta_json"]) == {"cutoff": "2019-01-01", "model": "agent-x"}
    assert [(r["model_name"], r["status"]) for r in queue.public_rows()] == [("agent-1 (imported reviews)", "queued")]

    bad = _file({"paper_id": "paper0", "review": "ok"}, {"paper_id": "ghost", "review": "x"}, '{"paper_id": "pa')
    refused = queue_import(queue, _form(candidate="agent-2"), bad, settings, PAPERS)
    assert not refused["ok"] and refused["id"] is None
    lines = refused["message"].splitlines()
    assert lines[0] == "Rejected: the uploaded file refused, nothing written: 2 bad lines"
    assert lines[1] == "- line 2: unknown paper id 'ghost' (not in the store)"
    assert lines[2].startswith("- line 3: invalid JSON (truncated or malformed)")
    for form, reason in [(_form(candidate="agent-1"), "candidate name 'agent-1' is taken"),
                         (_form(candidate="AGENT-1"), "is taken"),
                         (_form(candidate="bad name!"), "candidate name: 1-100 characters"),
                         (_form(candidate="x", contact="no"), "contact:"),
                         (_form(candidate="x", cutoff="soon"), "form cutoff must be a date")]:
        message = queue_import(queue, form, GOOD, settings, PAPERS)["message"]
        assert message.startswith("Rejected:") and reason in message, message
    taken = queue_import(queue, _form(candidate="someone"), GOOD, settings, PAPERS, taken={"someone"})
    assert "candidate name 'someone' is taken" in taken["message"]
    for reserved in ("generic", "Abstract-Only", "rephrase", "human"):  # the registries' names, any case
        message = queue_import(queue, _form(candidate=reserved), GOOD, settings, PAPERS)["message"]
        assert message.startswith("Rejected:") and "is reserved" in message, message
    assert queue.rows("SELECT count(*) AS n FROM import_submissions")[0]["n"] == 1


def test_the_rate_limit_counts_imports_and_endpoint_submissions(settings: Settings) -> None:
    queue = SubmissionQueue(None)
    limited = settings.replace(submissions_per_week=2)
    assert queue_import(queue, _form(candidate="a1"), GOOD, limited, PAPERS)["ok"]
    assert queue_import(queue, _form(candidate="a2"), GOOD, limited, PAPERS)["ok"]
    third = queue_import(queue, _form(candidate="a3"), GOOD, limited, PAPERS)
    assert not third["ok"] and "rate limit" in third["message"]


def test_the_scheduler_imports_queued_files_and_deletes_their_text(settings: Settings, papers_store: Store) -> None:
    queue = SubmissionQueue(None)
    first = queue_import(queue, _form(), GOOD, settings, PAPERS)["id"]
    # valid against the app's export, but the live store lacks paper4 now: checked again, refused, nothing written
    stale = queue_import(queue, _form(candidate="agent-2"), _file({"paper_id": "paper4", "review": "x"}), settings,
                         PAPERS)["id"]
    papers_store.con.execute("DELETE FROM papers WHERE paper_id = 'paper4'")
    done = {d["id"]: d for d in accept_queued_imports(papers_store, queue, settings)}
    assert done[first]["ok"] and done[first]["reviews"] == 2
    assert not done[stale]["ok"] and "line 1: unknown paper id 'paper4'" in done[stale]["reason"]
    cand = papers_store.rows("SELECT * FROM candidates WHERE name = 'agent-1'")[0]
    assert (cand["kind"], cand["model"], cand["submitter"]) == ("imported", "agent-x", "bob@example.org")
    assert papers_store.scalar("SELECT count(*) FROM generations WHERE candidate = 'agent-1'") == 2
    assert papers_store.scalar("SELECT count(*) FROM candidates WHERE name = 'agent-2'") == 0
    rows = {r["id"]: r for r in queue.rows("SELECT id, status, reason, content FROM import_submissions")}
    assert rows[first]["status"] == "finished" and rows[first]["content"] is None
    assert rows[first]["reason"] == "2 reviews imported: 0 clean, 2 contaminated"  # a declared cutoff is not trusted
    assert rows[stale]["status"] == "failed" and rows[stale]["content"] is None
    assert accept_queued_imports(papers_store, queue, settings) == []  # nothing queued any more


def test_the_submissions_stage_imports_and_never_replaces_a_candidate(settings: Settings,
                                                                      papers_store: Store) -> None:
    queue = SubmissionQueue(None)
    papers_store.con.execute("INSERT INTO candidates (name, kind, params_json, updated_at) "
                             "VALUES ('Taken-1', 'imported', '{}', now())")
    good = queue_import(queue, _form(), GOOD, settings, PAPERS)["id"]
    clash = queue_import(queue, _form(candidate="taken-1"), GOOD, settings, PAPERS)["id"]
    ctx = StageContext(papers_store, settings, papers_store.start_run("queue", {}), RunOptions(), NoProgress(),
                       services={"queue": queue, "vault": KeyVault(env={})})
    summary = stages("submissions")[0].run(ctx)
    result = {d["id"]: d for d in summary["imported"]}
    assert result[good]["ok"] and not result[clash]["ok"]
    assert "a candidate named 'taken-1' already exists" in result[clash]["reason"]
    assert papers_store.scalar("SELECT count(*) FROM generations WHERE candidate = 'Taken-1'") == 0


def test_an_import_that_fails_on_our_side_fails_the_queue_job_and_a_refused_file_does_not(
        settings: Settings, papers_store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    queue = SubmissionQueue(None)
    papers_store.con.execute("INSERT INTO candidates (name, kind, params_json, updated_at) "
                             "VALUES ('Taken-1', 'imported', '{}', now())")
    clash = queue_import(queue, _form(candidate="taken-1"), GOOD, settings, PAPERS)["id"]  # the submitter's fault
    broken = queue_import(queue, _form(), GOOD, settings, PAPERS)["id"]

    def store_fails(*_args: Any, **_kwargs: Any) -> None:
        raise OSError("No space left on device")

    monkeypatch.setattr("grebench.submissions._imports.import_reviews", store_fails)
    run_id = papers_store.start_run("queue", {})
    ctx = StageContext(papers_store, settings, run_id, RunOptions(), NoProgress(),
                       services={"queue": queue, "vault": KeyVault(env={})})
    summary = stages("submissions")[0].run(ctx)
    result = {d["id"]: d for d in summary["imported"]}
    assert not result[clash]["ok"] and not result[clash]["our_failure"]
    assert not result[broken]["ok"] and result[broken]["our_failure"]
    assert papers_store.run_failures(run_id) == [
        {"stage": "submissions", "item": f"import {broken}", "reason": "OSError: No space left on device"}]

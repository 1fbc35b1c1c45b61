"""Issue 31 §4: approval checks again, and a submission cannot choose its papers by failing on the rest.

Driven through the real paths: a fake OpenAI-compatible endpoint on 127.0.0.1 (reached through a submitted host
name that only the test's table resolves), the app's queue (:meth:`SubmissionQueue.submit`), the scheduler's queue
job, and the CLI for everything the operator does (`grebench score`, `leaderboard`, `site build`, `submissions
approve` and `list`).

(a) A submission whose reviews pass at evaluation, and whose stored text is then found to copy a public review (what
    a stronger detector, a review made public since, or a generation added after the evaluation would show), is
    refused at approval with the evidence; the candidate keeps no cutoff and only an audit row is written.
(b) An endpoint that answers 5 papers and then fails is stopped; its row is scored and shown, incomplete and
    unranked, before and after the operator approves its declared cutoff.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from cryptography.fernet import Fernet

from grebench.bench import run_bench
from grebench.cli._main import main
from grebench.endpoints import KeyVault
from grebench.scheduler import SchedulerService
from grebench.settings import load_settings
from grebench.store import PaperRecord, ReviewRecord, open_store
from grebench.submissions import SubmissionForm, SubmissionQueue, queue_path
from tests.conftest import FAST_ENV, subject
from tests.fakes.openai_server import FakeOpenAIServer
from tests.security.conftest import RESOLVER

PAPERS = 8
ANSWERED = 5


def _papers() -> list[PaperRecord]:
    """Eight papers, three public reviews each (public on 2019-11-08), each review about its paper's subject."""
    out = []
    for n in range(PAPERS):
        pid = f"paper{n}"
        reviews = []
        for i in range(3):
            text = (f"Summary:\nPaper {n} studies {subject(n)} with a new estimator and reports gains.\n\n"
                    f"Weaknesses:\nPaper {n} lacks {subject(n)} baselines; reviewer {i} asks for ablations "
                    f"of the {subject(n)} component and error bars on every table.")
            reviews.append(ReviewRecord(review_id=f"{pid}-r{i}", paper_id=pid, kind="official_review", text=text,
                                        sections=[("Review", text)], content={"review": text}))
        out.append(PaperRecord(paper_id=pid, venue_id="Test.cc/2019/Conference", title=f"Title {n}",
                               source="test", abstract=f"We study {subject(n)}. We find result {n}.",
                               reviews_public_at=datetime(2019, 11, 8), reviews=reviews))
    return out


def _original(messages: list[dict[str, Any]]) -> str:
    """An endpoint's own review of the paper in the prompt (no public review's words)."""
    prompt = json.dumps(messages)
    n = next((n for n in range(PAPERS) if f"Title {n}" in prompt), 0)
    return (f"<summary>The submission tackles {subject(n)} and claims an improvement.</summary>\n"
            f"<strengths>\n1. Tackling {subject(n)} at scale is timely.\n</strengths>\n"
            f"<weaknesses>\n1. The {subject(n)} evaluation omits strong competitors.\n"
            "2. Statistical significance is never assessed.\n</weaknesses>")


@pytest.fixture
def world(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A store with eight benched papers (human baseline and controls), the queue file, an encrypting vault."""
    config = tmp_path / "grebench.toml"
    # the app binds 127.0.0.2 (its own address stays refused); the fake endpoint's 127.0.0.1 is opted in
    config.write_text('app_host = "127.0.0.2"\nsubmission_http_allowlist = "models.example.test"\n'
                      'submission_private_allowlist = "127.0.0.1/32"\nllm_max_retries = 0\nllm_timeout_s = 30\n'
                      "bench_concurrency = 1\nsubmission_max_consecutive_failures = 2\nbootstrap_samples = 50\n")
    env = {**FAST_ENV, "GREBENCH_DATA_DIR": str(tmp_path / "data")}
    settings = load_settings(config, env=env)
    store = open_store(settings.db_path)
    with store.transaction():
        for paper in _papers():
            store.upsert_paper(paper)
    run_bench(store, settings, store.start_run("bench", {}))
    store.close()
    yield {"settings": settings, "config": config, "env": env, "queue": SubmissionQueue(queue_path(settings)),
           "vault": KeyVault(env={"GREBENCH_SECRET_KEY": Fernet.generate_key().decode()})}


def _cli(world: dict[str, Any], *args: str, ok: bool = True) -> Any:
    result = CliRunner().invoke(main, [*args[:2], "--config", str(world["config"]), *args[2:]]
                                if args[0] in ("submissions", "site") else
                                [args[0], "--config", str(world["config"]), *args[1:]], env=world["env"])
    assert (result.exit_code == 0) == ok, result.output
    assert "Traceback" not in result.output
    return result


def _submit_and_evaluate(world: dict[str, Any], server: FakeOpenAIServer, name: str) -> tuple[str, dict[str, Any]]:
    """Submit through the app's queue, then run the scheduler's queue job once (on its own store connection)."""
    form = SubmissionForm(model_name=name, base_url=f"http://models.example.test:{server.port}/v1",
                          released="2019-01-01", cutoff="2000-01-01", contact="owner@example.org", api_key="")
    queued = world["queue"].submit(form, world["settings"], world["vault"], RESOLVER)
    assert queued["ok"], queued
    store = open_store(world["settings"].db_path)
    try:
        service = SchedulerService(world["settings"], store, vault=world["vault"], queue=world["queue"],
                                   kinds=["queue"], resolver={**RESOLVER, "models.example.test": ["127.0.0.1"]})
        summary = service.run_job("queue")["summary"]
    finally:
        store.close()
    [entry] = summary["evaluated"]
    return str(queued["id"]), entry


def _rows(world: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The headline board's rows by candidate, as `grebench leaderboard --json` prints them."""
    board = json.loads(_cli(world, "leaderboard", "--json").stdout)
    [only] = board["boards"]
    return {r["candidate"]: r for r in only["rows"]}


def _site_rows(world: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The headline board's rows in the static site's leaderboard.json."""
    out = Path(world["settings"].data_path) / "site-test"
    _cli(world, "site", "build", "--out", str(out), "--force")
    data = json.loads((out / "leaderboard.json").read_text())
    page = (out / "index.html").read_text()
    assert ("3 of 8 papers missing" in page) == any(r.get("complete") is False for r in data["boards"][0]["rows"])
    return {r["candidate"]: r for r in data["boards"][0]["rows"]}


def test_an_endpoint_that_answers_five_papers_then_fails_is_shown_incomplete_and_never_ranked(
        world: dict[str, Any]) -> None:
    with FakeOpenAIServer(reply=_original, mode="http500") as server:
        server.script(*["ok"] * ANSWERED)
        sub_id, entry = _submit_and_evaluate(world, server, "Picky")
    assert not entry["ok"] and "stopped" in entry, entry
    store = open_store(world["settings"].db_path)
    try:
        assert store.scalar("SELECT count(*) FROM generations WHERE candidate = 'Picky' AND status = 'ok'") == ANSWERED
        assert store.scalar("SELECT status FROM submissions WHERE id = ?", [sub_id]) == "failed"
    finally:
        store.close()

    _cli(world, "score")
    before = _rows(world)
    row = before["Picky"]
    assert row["rank"] is None and row["complete"] is False, row
    assert (row["due_papers"], row["missing_papers"]) == (PAPERS, PAPERS - ANSWERED), row
    assert before["human"]["rank"] is None and before["human"]["complete"] is True  # a reference line
    assert all(r["complete"] for name, r in before.items() if name != "Picky")  # the baseline and controls cover all

    # every paper's reviews were public when it wrote: no sealed-gap test can run, so the operator says why anyway
    waits = _cli(world, "submissions", "approve", sub_id, ok=False)
    assert "waits for sealed evidence: 0 sealed and 5 public papers scored" in " ".join(waits.output.split())
    approved = _cli(world, "submissions", "approve", sub_id, "--override",
                    "retrospective sample: no paper was under review")  # its 5 papers are now clean
    assert "the submission is failed: it stays unranked" in " ".join(approved.output.split()), approved.output
    _cli(world, "score")
    after = _rows(world)
    row = after["Picky"]
    assert row["clean_papers"] == ANSWERED and row["vouched"] is True, row
    assert row["rank"] is None and row["complete"] is False and row["rank_word"] == "incomplete", row
    assert after["human"]["rank"] is None and [r["candidate"] for r in after.values() if r["rank"]] == []
    text = _cli(world, "leaderboard").output
    assert re.search(r"incomplete\s+Picky.*\(3 of 8 papers missing\)", text), text
    assert "never ranked" in text
    site = _site_rows(world)
    assert site["Picky"]["status"] == "incomplete" and site["Picky"]["rank"] is None, site["Picky"]
    assert (site["Picky"]["complete"], site["Picky"]["missing_papers"]) == (False, 3)
    assert site["human"]["status"] == "reference" and site["human"]["complete"] is True


def test_approval_runs_the_copy_check_again_and_refuses_with_the_evidence(world: dict[str, Any]) -> None:
    with FakeOpenAIServer(reply=_original) as server:
        sub_id, entry = _submit_and_evaluate(world, server, "Sleeper")
    assert entry["ok"] and "copied" not in entry, entry  # passes the copy check at evaluation
    store = open_store(world["settings"].db_path)
    try:
        # after evaluation its stored text turns out to carry a public review (a stronger detector would see it, a
        # review published since would match it, or a generation added later carries it): here, verbatim
        copied = store.scalar("SELECT text FROM review_versions WHERE review_id = 'paper3-r1'")
        store.con.execute("UPDATE generations SET text = ? WHERE candidate = 'Sleeper' AND paper_id = 'paper3'",
                          [copied])
        generations = store.rows("SELECT * FROM generations WHERE candidate = 'Sleeper' ORDER BY paper_id")
        audit = store.scalar("SELECT count(*) FROM board_changes")
    finally:
        store.close()

    refused = _cli(world, "submissions", "approve", sub_id, ok=False)
    message = " ".join(refused.output.split())
    assert "refused" in message and "1 of 8 reviews copy their paper's public reviews" in message, message
    assert "paper3 (100%, closest public review paper3-r1: carries 100% of a review's own content" in message, message

    store = open_store(world["settings"].db_path)
    try:
        assert store.scalar("SELECT cutoff FROM candidates WHERE name = 'Sleeper'") is None  # no cutoff bought
        assert store.rows("SELECT * FROM generations WHERE candidate = 'Sleeper' ORDER BY paper_id") == generations
        changes = store.rows("SELECT kind, subject, detail FROM board_changes ORDER BY changed_at")
        assert len(changes) == audit + 1 and changes[-1]["kind"] == "approval_refused"
        assert changes[-1]["subject"] == "Sleeper" and "paper3-r1" in changes[-1]["detail"]
    finally:
        store.close()
    listed = _cli(world, "submissions", "list")
    assert re.search(r"HELD: approval of submission \w+ refused.*paper3 \(100%, closest public review paper3-r1:",
                     listed.output), listed.output
    as_json = json.loads(_cli(world, "submissions", "list", "--json").stdout)
    assert "paper3-r1" in as_json[0]["held"]

"""Issue 62, done-when: a paraphrase copy does not pass approval through the real path, whatever its wording.

Driven as the product runs: real ICLR 2026 papers and reviews (bundled), a fake OpenAI-compatible endpoint on
127.0.0.1 reached through a submitted host name, the app's queue, the scheduler's queue job, the bench stage for the
human baseline, and the CLI for what the operator does (`grebench score`, `submissions approve`, `leaderboard`).

Half the papers have public reviews when the endpoints write; the other half are still under review (sealed) and get
their reviews afterwards.  "Copier" serves a review of another paper followed by 30 % of the public reviews'
sentences, every content word swapped for a synonym (the benchmark's paraphraser: a thesaurus, else distributional
neighbours) and the sentences reordered, wherever the reviews are public and the shipped word-level checks let it
through (it runs them itself first: the tailoring attacker), and the review of another paper alone elsewhere (on
sealed papers it has nothing to copy).  "Honest" serves a real
review of each paper that is in no store (a fourth reviewer): as good on sealed papers as on public ones.

The operator's approval refuses Copier with the sealed-gap test and the papers that carry the excess, and approves
Honest with the test's p in its audit line; on the board Copier then counts only where it was sealed, below the human
baseline.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from cryptography.fernet import Fernet

from benchmarks.copy_detection import NEIGHBOURS, Neighbours, paraphrased
from grebench.bench import copy_findings, prose_findings, run_bench
from grebench.cli._main import main
from grebench.endpoints import KeyVault
from grebench.ingest import bundled_source
from grebench.scheduler import SchedulerService
from grebench.scoring import sealed_gap
from grebench.settings import load_settings
from grebench.store import PaperRecord, open_store, utcnow
from grebench.submissions import SubmissionForm, SubmissionQueue, queue_path
from tests.conftest import FAST_ENV
from tests.fakes.openai_server import FakeOpenAIServer
from tests.security.conftest import RESOLVER

PAPERS = 20  # 10 public when the endpoints write, 10 sealed


def _sample() -> tuple[list[PaperRecord], list[PaperRecord]]:
    """(papers with at least four reviews, stand-in papers outside the store)."""
    papers = [p for p in bundled_source("iclr2026").fetch() if isinstance(p, PaperRecord) and len(p.reviews) >= 4]
    return papers[:PAPERS], papers[PAPERS:PAPERS + PAPERS]


def _stored(paper: PaperRecord, public: bool) -> PaperRecord:
    """The paper as the store sees it: three of its reviews (the fourth is Honest's), public since ``public`` or
    none yet."""
    if not public:
        return replace(paper, reviews=[], reviews_public_at=None)
    return replace(paper, reviews=list(paper.reviews[:3]))


@pytest.mark.timeout(1800)
def test_a_paraphrase_copier_is_refused_at_approval_by_the_sealed_gap_test_and_an_honest_model_is_not(
        tmp_path: Path) -> None:
    papers, stand_ins = _sample()
    public = {p.paper_id for p in papers[:PAPERS // 2]}
    by_title = {p.title: (k, p) for k, p in enumerate(papers)}
    config = tmp_path / "grebench.toml"
    config.write_text('app_host = "127.0.0.2"\nsubmission_http_allowlist = "models.example.test"\n'
                      'submission_private_allowlist = "127.0.0.1/32"\nllm_max_retries = 0\nllm_timeout_s = 30\n'
                      "bench_concurrency = 2\nbootstrap_samples = 50\n")
    env = {**FAST_ENV, "GREBENCH_DATA_DIR": str(tmp_path / "data")}
    settings = load_settings(config, env=env)
    store = open_store(settings.db_path)
    with store.transaction():
        for p in papers:
            store.upsert_paper(_stored(p, p.paper_id in public))
    run_bench(store, settings, store.start_run("bench", {}))
    store.close()

    def paper_of(messages: list[dict[str, Any]]) -> tuple[int, PaperRecord]:
        prompt = json.dumps(messages)
        return next(v for title, v in by_title.items() if json.dumps(title)[1:-1] in prompt)

    # the copier's texts, made and checked before it is submitted: the paraphrase where the shipped word-level
    # checks pass it, its own review (of another paper) elsewhere
    if not NEIGHBOURS:
        NEIGHBOURS.append(Neighbours([r.text for p in [*papers, *stand_ins] for r in p.reviews], size=2000))
    served: dict[str, str] = {}
    store = open_store(settings.db_path)
    try:
        tries = {p.paper_id: paraphrased(0.3, [stand_ins[k].reviews[0].text])(
                     [r.text for r in p.reviews[:3]], random.Random(f"copier/{p.paper_id}"), [])
                 for k, p in enumerate(papers) if p.paper_id in public}
        found = copy_findings(store, list(tries.items()))
        reads = prose_findings(list(tries.values()))
        passing = {pid for (pid, _), c, r in zip(tries.items(), found, reads, strict=True) if not c.copied and r.prose}
        assert len(passing) >= 6, (len(passing), len(tries))  # most papers: the word-level checks let it through
        for k, p in enumerate(papers):
            served[p.paper_id] = tries[p.paper_id] if p.paper_id in passing else stand_ins[k].reviews[0].text
    finally:
        store.close()

    def copier(messages: list[dict[str, Any]]) -> str:
        return served[paper_of(messages)[1].paper_id]

    def honest(messages: list[dict[str, Any]]) -> str:
        return paper_of(messages)[1].reviews[3].text

    queue = SubmissionQueue(queue_path(settings))
    vault = KeyVault(env={"GREBENCH_SECRET_KEY": Fernet.generate_key().decode()})
    ids = {}
    for name, reply in (("Copier", copier), ("Honest", honest)):
        with FakeOpenAIServer(reply=reply) as server:
            form = SubmissionForm(model_name=name, base_url=f"http://models.example.test:{server.port}/v1",
                                  released="2019-01-01", cutoff="2000-01-01", contact=f"{name.lower()}@example.org",
                                  api_key="")
            queued = queue.submit(form, settings, vault, RESOLVER)
            assert queued["ok"], queued
            ids[name] = str(queued["id"])
            store = open_store(settings.db_path)
            try:
                service = SchedulerService(settings, store, vault=vault, queue=queue, kinds=["queue"],
                                           resolver={**RESOLVER, "models.example.test": ["127.0.0.1"]})
                [entry] = service.run_job("queue")["summary"]["evaluated"]
            finally:
                store.close()
            assert entry["ok"], json.dumps(entry, default=str)[:3000]  # the word-level checks pass it at evaluation
            assert len(server.requests) == PAPERS

    def cli(*args: str, ok: bool = True) -> Any:
        argv = [*args[:2], "--config", str(config), *args[2:]] if args[0] == "submissions" else \
            [args[0], "--config", str(config), *args[1:]]
        result = CliRunner().invoke(main, argv, env=env)
        assert (result.exit_code == 0) == ok, result.output
        assert "Traceback" not in result.output
        return result

    # nothing sealed is scored yet: approval waits for the evidence (and writes nothing)
    cli("score")
    waits = " ".join(cli("submissions", "approve", ids["Honest"], ok=False).output.split())
    assert "waits for sealed evidence: 0 sealed and 10 public papers scored" in waits, waits

    # the sealed papers' reviews are published (after the endpoints wrote), benched and scored
    store = open_store(settings.db_path)
    try:
        with store.transaction():
            for p in papers:
                if p.paper_id not in public:
                    store.upsert_paper(replace(p, reviews=list(p.reviews[:3]),
                                                reviews_public_at=utcnow() + timedelta(seconds=1)))
    finally:
        store.close()
    cli("bench")  # the bench stage: generations made before the reviews were public are sealed, then benched
    cli("score")
    store = open_store(settings.db_path)
    try:
        sealed = {r["candidate"]: r["n"] for r in store.rows(
            "SELECT candidate, count(*) AS n FROM generations WHERE sealed AND candidate IN ('Copier', 'Honest') "
            "GROUP BY candidate")}
        assert sealed == {"Copier": PAPERS // 2, "Honest": PAPERS // 2}, sealed
    finally:
        store.close()

    store = open_store(settings.db_path, read_only=True)
    try:
        gap = sealed_gap(store, "Copier")
        assert gap is not None and gap.held and (gap.public, gap.sealed) == (PAPERS // 2, PAPERS // 2), gap
        honest_gap = sealed_gap(store, "Honest")
        assert honest_gap is not None and honest_gap.testable and not honest_gap.held, honest_gap
    finally:
        store.close()
    refused = " ".join(cli("submissions", "approve", ids["Copier"], ok=False).output.split())
    assert "refused, held for the operator" in refused and "sealed-gap test" in refused, refused
    named = set(re.findall(r"[A-Za-z0-9_-]{6,}", refused.split("the excess on")[1].split(";")[0]))
    assert named and named <= public | {"papers"}, (named, refused)  # only papers whose reviews were public
    approved = " ".join(cli("submissions", "approve", ids["Honest"]).output.split())
    assert "vouched for by the operator" in approved and "sealed-gap test (offline" in approved, approved
    assert "OVERRIDE" not in approved

    cli("score")
    [board] = json.loads(cli("leaderboard", "--json").stdout)["boards"]
    rows = {r["candidate"]: r for r in board["rows"]}
    assert rows["Copier"]["vouched"] is False and rows["Honest"]["vouched"] is True
    assert rows["Copier"]["clean_papers"] == PAPERS // 2  # only where it was sealed
    assert rows["Copier"]["score"] < rows["human"]["score"], (rows["Copier"], rows["human"])
    listed = " ".join(cli("submissions", "list").output.split())
    assert "HELD" in listed and "sealed-gap test" in listed

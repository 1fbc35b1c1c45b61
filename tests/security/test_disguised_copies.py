"""Issue 31 §1: copies in disguise are copies.

The attacks of the issue (one inserted word every three, all public reviews concatenated with filler, two reviews
mixed with filler, adjacent words swapped) passed the old 5-gram detector on 60 of 60 papers and, once an operator
approved, took rank #1.  Here they are served by a fake OpenAI-compatible endpoint on 127.0.0.1 to the real queue
job (and uploaded through the app's import queue), on real bundled ICLR 2026 papers, and must be refused.  The
disguises draw their filler from *other* papers' reviews, seeded, so no test recognises a text of its own.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from cryptography.fernet import Fernet

from grebench.bench import COPY_THRESHOLD, copy_evidence, run_bench, split_sentences
from grebench.bench._copies import stems
from grebench.bench._orderfree import LONG_PASSAGE, LONGEST_PASSAGE, SPAN_WORDS
from grebench.cli._main import main
from grebench.endpoints import KeyVault
from grebench.ingest import bundled_source
from grebench.scheduler import SchedulerService
from grebench.scoring import information_flags
from grebench.settings import load_settings
from grebench.store import PaperRecord, Store, open_store
from grebench.submissions import (
    ImportForm,
    SubmissionForm,
    SubmissionQueue,
    accept_queued_imports,
    queue_import,
    queue_path,
)
from tests.conftest import FAST_ENV
from tests.fakes.openai_server import FakeOpenAIServer
from tests.security.conftest import RESOLVER

PAPERS = 4


def _sample(name: str = "iclr2026", count: int = PAPERS, skip: int = 0) -> list[PaperRecord]:
    papers = [p for p in bundled_source(name).fetch() if isinstance(p, PaperRecord) and len(p.reviews) >= 3]
    return papers[skip:skip + count]


def _vocabulary() -> list[str]:
    """Filler words: the words of reviews of papers *not* in the store."""
    return sorted({w for p in _sample(count=20, skip=50) for r in p.reviews for w in r.text.split() if w.isalpha()})


def _filler(text: str, rng: random.Random, every: int = 3) -> str:
    out: list[str] = []
    for i, word in enumerate(text.split(), 1):
        out.append(word)
        if i % every == 0:
            out.append(rng.choice(_VOCAB))
    return " ".join(out)


def _mixed(a: str, b: str) -> str:
    sa, sb = a.split(". "), b.split(". ")
    return ". ".join(s for pair in zip(sa, sb, strict=False) for s in pair)


def _swapped(text: str) -> str:
    words = text.split()
    for i in range(0, len(words) - 1, 2):
        words[i], words[i + 1] = words[i + 1], words[i]
    return " ".join(words)


_VOCAB = _vocabulary()
#: The issue's table, first four rows: each passed the old detector on 60 of 60 papers.
DISGUISES: dict[str, Callable[[list[str], random.Random], str]] = {
    "first review, a filler word every 3": lambda texts, rng: _filler(texts[0], rng),
    "all reviews concatenated, with filler": lambda texts, rng: _filler("\n\n".join(texts), rng),
    "two reviews mixed, with filler": lambda texts, rng: _filler(_mixed(texts[0], texts[1]), rng),
    "adjacent words swapped pairwise": lambda texts, rng: _swapped(texts[0]),
}


def _disguised(kind: str, paper: PaperRecord) -> str:
    return DISGUISES[kind]([r.text for r in paper.reviews], random.Random(f"{kind}/{paper.paper_id}"))


@pytest.mark.parametrize("sample", ["iclr2020", "iclr2026"])
def test_the_disguises_are_caught_on_real_papers_and_real_reviews_are_not(sample: str) -> None:
    """The detector itself, on 15 papers of each bundled sample: every disguise caught; and no honest review of
    those papers is flagged against the other reviews of its paper (the full figures: benchmarks/copy_detection.py)."""
    papers = _sample(sample, count=15, skip=100)
    for kind in DISGUISES:
        scores = [copy_evidence(_disguised(kind, p), [r.text for r in p.reviews], f"{p.title}\n{p.abstract}").score
                  for p in papers]
        assert min(scores) >= COPY_THRESHOLD, (kind, scores)
    for p in papers:
        texts = [r.text for r in p.reviews]
        for i, text in enumerate(texts):
            found = copy_evidence(text, texts[:i] + texts[i + 1:], f"{p.title}\n{p.abstract}")
            assert not found.copied, (p.paper_id, i, found)


def test_look_alike_letters_zero_width_and_spelt_out_words_fold_back() -> None:
    paper = _sample()[0]
    text = paper.reviews[0].text
    table = str.maketrans({"a": "а", "e": "е", "o": "о", "p": "р", "c": "с", "i": "і"})
    games = " ".join(("\u200b".join(w) if k % 7 == 0 else w[:2] + "." + w[2:] if k % 5 == 0 else w.upper())
                     .translate(table) for k, w in enumerate(text.split()))
    found = copy_evidence(games, [r.text for r in paper.reviews], f"{paper.title}\n{paper.abstract}")
    assert found.copied and found.reference == 0, found
    assert found.passages and "copies" not in found.describe() and "own content" in found.describe()


@pytest.mark.parametrize("sample", ["iclr2020", "iclr2026"])
def test_one_long_sentence_copied_behind_text_of_ones_own_is_a_copy(sample: str) -> None:
    """Issue 48: a partial copy behind text the store has never seen.  Real review text of papers that are not
    checked stands in for the attacker's own words; after it, the longest sentence of the paper's public reviews
    (between LONGEST_PASSAGE and SPAN_WORDS words: short of the verbatim-words rule, one sentence of one review).
    Caught as one long passage, which a word inserted after every ninth does not cut; the stand-in alone is not
    a copy."""
    papers = _sample(sample, count=40, skip=100)
    own = [r.text for p in _sample(sample, count=40, skip=200) for r in p.reviews]
    tried = whole = 0
    for k, paper in enumerate(papers):
        texts = [r.text for r in paper.reviews]
        about = f"{paper.title}\n{paper.abstract}"
        longest = max((s for t in texts for _, s in split_sentences(t)), key=lambda s: len(stems(s)))
        if not LONGEST_PASSAGE + 2 <= len(stems(longest)) < SPAN_WORDS:
            continue
        tried += 1
        stand_in = own[k]
        assert not copy_evidence(stand_in, texts, about).copied, paper.paper_id
        found = copy_evidence(f"{stand_in}\n\n{longest}", texts, about)
        assert found.copied, (paper.paper_id, longest, found)
        assert found.order_free.long_passages > 0 and f"passages of {LONG_PASSAGE} words or more" in found.describe()
        if found.order_free.longest_passage < len(stems(longest)):
            continue  # part of the sentence quotes the paper or is everyone's: not one passage to begin with
        whole += 1
        # a word of another review inserted after every ninth does not cut the passage (LONG_GAP words may sit
        # inside one): it runs on across the insertions, where a passage without gaps would stop at nine words
        rng = random.Random(paper.paper_id)
        cut = " ".join(w + (" " + rng.choice(_VOCAB) if i % 9 == 8 else "") for i, w in enumerate(longest.split()))
        found = copy_evidence(f"{stand_in}\n\n{cut}", texts, about)
        assert found.order_free.longest_passage >= 17, (paper.paper_id, cut, found)
    assert tried >= 10 and whole >= 5, (tried, whole)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A store with four real ICLR 2026 papers (public reviews, human baseline, controls), the queue, a vault."""
    config = tmp_path / "grebench.toml"
    config.write_text('app_host = "127.0.0.2"\nsubmission_http_allowlist = "models.example.test"\n'
                      'submission_private_allowlist = "127.0.0.1/32"\nllm_max_retries = 0\nllm_timeout_s = 30\n'
                      "bench_concurrency = 1\n")
    env = {**FAST_ENV, "GREBENCH_DATA_DIR": str(tmp_path / "data")}
    settings = load_settings(config, env=env)
    store = open_store(settings.db_path)
    with store.transaction():
        for paper in _sample():
            store.upsert_paper(paper)
    run_bench(store, settings, store.start_run("bench", {}))
    store.close()
    yield {"settings": settings, "queue": SubmissionQueue(queue_path(settings)), "config": config, "env": env,
           "vault": KeyVault(env={"GREBENCH_SECRET_KEY": Fernet.generate_key().decode()})}


def _copier(kind: str) -> Callable[[list[dict[str, Any]]], str]:
    def reply(messages: list[dict[str, Any]]) -> str:
        prompt = json.dumps(messages)
        for paper in _sample():
            if paper.title in prompt or json.dumps(paper.title)[1:-1] in prompt:
                return _disguised(kind, paper)
        return "Summary: nothing to copy."
    return reply


def _evaluate_endpoint(world: dict[str, Any], name: str, reply: Any) -> tuple[dict[str, Any], int, Store]:
    """Submit a fake OpenAI-compatible endpoint answering with ``reply`` as model ``name`` and run the queue job
    once: (the queued submission, the calls it was served, the open store)."""
    settings = world["settings"]
    with FakeOpenAIServer(reply=reply) as server:
        form = SubmissionForm(model_name=name, base_url=f"http://models.example.test:{server.port}/v1",
                              released="2019-01-01", cutoff="2000-01-01", contact="owner@example.org", api_key="")
        queued = world["queue"].submit(form, settings, world["vault"], RESOLVER)
        assert queued["ok"], queued
        store = open_store(settings.db_path)
        try:
            SchedulerService(settings, store, vault=world["vault"], queue=world["queue"], kinds=["queue"],
                             resolver={**RESOLVER, "models.example.test": ["127.0.0.1"]}).run_job("queue")
        except BaseException:
            store.close()
            raise
        return queued, len(server.chat_requests), store


@pytest.mark.parametrize("kind", list(DISGUISES))
def test_an_endpoint_serving_disguised_copies_is_refused(world: dict[str, Any], kind: str) -> None:
    _queued, served, store = _evaluate_endpoint(world, "Disguised", _copier(kind))
    try:
        ok = store.scalar("SELECT count(*) FROM generations WHERE candidate = 'Disguised' AND status = 'ok'")
    finally:
        store.close()
    row = world["queue"].rows("SELECT status, reason FROM submissions WHERE model_name = 'Disguised'")[0]
    assert served == PAPERS
    assert row["status"] == "failed" and f"{PAPERS} of {PAPERS} reviews copy their paper's public reviews" in \
        row["reason"], row
    assert "own content" in row["reason"]  # the evidence is shown, not only the verdict
    assert ok == 0


@pytest.mark.parametrize("kind", list(DISGUISES))
def test_an_upload_of_disguised_copies_is_refused(world: dict[str, Any], kind: str) -> None:
    settings = world["settings"]
    papers = _sample()
    lines = [{"_meta": {"cutoff": "2018-01-01"}}] + [
        {"paper_id": p.paper_id, "review": _disguised(kind, p), "generated_at": "2018-06-01T00:00:00Z"} for p in papers]
    data = "".join(json.dumps(x) + "\n" for x in lines).encode()
    store = open_store(settings.db_path)
    try:
        form = ImportForm(candidate="disguised-upload", contact="eve@example.org", cutoff="2018-01-01", model="m")
        queued = queue_import(world["queue"], form, data, settings, {p.paper_id for p in papers},
                              source="203.0.113.7")
        assert queued["ok"], queued
        [done] = accept_queued_imports(store, world["queue"], settings)
        assert not done["ok"] and done["reason"].count("copies its public reviews") == PAPERS, done
        assert store.scalar("SELECT count(*) FROM candidates WHERE name = 'disguised-upload'") == 0
    finally:
        store.close()


def test_approval_is_held_by_the_information_a_stored_review_carries(world: dict[str, Any]) -> None:
    """The information view of a copy (:func:`grebench.scoring.information_flags`) at approval: a submission that
    passed evaluation with reviews of its own, whose stored reviews are then the papers' references (what a
    paraphrase beyond the words, or a generation stored after evaluation, would carry), is scored and then refused
    at approval with the information evidence; the human review and the controls raise no such flag."""
    settings = world["settings"]
    store = open_store(settings.db_path)
    try:
        splits = {r["paper_id"]: json.loads(r["reference_review_ids_json"])[0]
                  for r in store.rows("SELECT paper_id, reference_review_ids_json FROM baseline_splits")}
    finally:
        store.close()
    titles = {p.title: p.paper_id for p in _sample()}

    def reply(messages: list[dict[str, Any]]) -> str:
        prompt = json.dumps(messages)
        pid = next((pid for title, pid in titles.items() if json.dumps(title)[1:-1] in prompt), "none")
        return f"Summary: the submission {pid} is reviewed here in words of my own, briefly. It seems fine."

    with FakeOpenAIServer(reply=reply) as server:
        form = SubmissionForm(model_name="Later", base_url=f"http://models.example.test:{server.port}/v1",
                              released="2019-01-01", cutoff="2000-01-01", contact="owner@example.org", api_key="")
        queued = world["queue"].submit(form, settings, world["vault"], RESOLVER)
        store = open_store(settings.db_path)
        try:
            SchedulerService(settings, store, vault=world["vault"], queue=world["queue"], kinds=["queue"],
                             resolver={**RESOLVER, "models.example.test": ["127.0.0.1"]}).run_job("queue")
            for pid, ref in splits.items():
                store.con.execute("UPDATE generations SET text = (SELECT text FROM review_versions WHERE review_id = ? "
                                  "ORDER BY version DESC LIMIT 1) WHERE candidate = 'Later' AND paper_id = ?",
                                  [ref, pid])
        finally:
            store.close()
    assert world["queue"].rows("SELECT status FROM submissions WHERE model_name = 'Later'")[0]["status"] == "finished"
    env = world["env"]
    scored = CliRunner().invoke(main, ["score", "--config", str(world["config"])], env=env)
    assert scored.exit_code == 0, scored.output
    approved = CliRunner().invoke(main, ["submissions", "approve", str(queued["id"]), "--config",
                                         str(world["config"])], env=env)
    assert approved.exit_code == 1, approved.output
    assert f"{PAPERS} of its scored reviews explain their paper's references far beyond the human review" in \
        approved.output
    store = open_store(settings.db_path)
    try:
        assert store.scalar("SELECT cutoff FROM candidates WHERE name = 'Later'") is None
        flags = information_flags(store, "Later")
        assert {f.paper_id for f in flags} == set(splits)
        assert all(f.reference_review_id == splits[f.paper_id] for f in flags if f.share == max(
            g.share for g in flags if g.paper_id == f.paper_id))
        for name in ("human", "sentence-shuffle", "elongation", "repetition", "keyword-stuffing"):
            assert information_flags(store, name) == [], name
    finally:
        store.close()


_FUNCTION_WORDS = ("a an and are as at be but by for from has have in is it its of on or that the this to was "
                   "were which with")
_FUNCTION = frozenset(_FUNCTION_WORDS.split(" "))


def _transposed(texts: list[str], rows: int = 9) -> str:
    """Issue 48's attack: the content words of every public review, written out in ``rows`` interleaved rows
    (words i, i + rows, ...) under a heading; words adjacent in a review end up ``rows`` apart."""
    words = [w for w in " ".join(texts).split() if w.lower().strip(".,;:()") not in _FUNCTION]
    return "Weaknesses:\n" + "\n".join(" ".join(words[r::rows]) for r in range(rows))


def test_a_transposed_copy_is_held_never_ranked_and_its_approval_refused_with_the_evidence(
        world: dict[str, Any]) -> None:
    """Issue 48 §1: the transposed copy of every public review (9 rows) passed the copy check and approval at
    6acf4ba and ranked #1 (60.34 against the human's 15.40).  Served by a fake endpoint to the real queue job, it is
    refused (the order-free evidence and the prose test), held with the evidence, never ranked, and `grebench
    submissions approve` refuses it with the same evidence."""
    from grebench.submissions import held_submissions

    papers = {p.title: p for p in _sample()}

    def reply(messages: list[dict[str, Any]]) -> str:
        prompt = json.dumps(messages)
        paper = next((p for title, p in papers.items() if json.dumps(title)[1:-1] in prompt), None)
        return _transposed([r.text for r in paper.reviews]) if paper else "Summary: nothing to copy."

    queued, served, store = _evaluate_endpoint(world, "Transposed", reply)
    try:
        assert served == PAPERS
        ok = "SELECT count(*) FROM generations WHERE candidate = 'Transposed' AND status = 'ok'"
        assert store.scalar(ok) == 0
        held = held_submissions(store)
    finally:
        store.close()
    row = world["queue"].rows("SELECT status, reason FROM submissions WHERE model_name = 'Transposed'")[0]
    assert row["status"] == "failed" and f"{PAPERS} of {PAPERS} reviews" in row["reason"], row
    assert "in any order" in row["reason"] and "do not read as text" in row["reason"], row["reason"]
    assert "Transposed" in held and "in any order" in held["Transposed"]
    env, config = world["env"], str(world["config"])
    assert CliRunner().invoke(main, ["score", "--config", config], env=env).exit_code == 0
    board = json.loads(CliRunner().invoke(main, ["leaderboard", "--json", "--config", config], env=env).stdout)
    ranked = {r["candidate"] for b in board["boards"] for r in b["rows"] if r.get("rank") is not None}
    assert "Transposed" not in ranked and "human" not in ranked  # the human baseline: a reference line
    approved = CliRunner().invoke(main, ["submissions", "approve", str(queued["id"]), "--config", config], env=env)
    assert approved.exit_code == 1 and "refused, held for the operator" in approved.output, approved.output
    assert "in any order" in approved.output and "do not read as text" in approved.output, approved.output
    listed = CliRunner().invoke(main, ["submissions", "list", "--config", config], env=env)
    assert "HELD" in listed.output, listed.output

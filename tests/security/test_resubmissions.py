"""Issue 31 §2: a resubmission's earlier version has public reviews under another paper id.

The store holds the first paper of the bundled ICLR 2020 sample (``rklp93EtwH``, reviews public 2019-11-08) and
``tests/data/archives/resubmission_iclr2026.jsonl``: ``ResubARML26``, that paper resubmitted to an ICLR 2026-style
venue (title extended, abstract rewritten; reviews not public, announced for 2099), and ``FreshPaper26``, a paper
with no earlier version.  Everything goes through the real CLI (`grebench ingest`, `grebench links`, `grebench bench
import`) or the real submission queue with an OpenAI-compatible fake endpoint on loopback.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from cryptography.fernet import Fernet

from grebench.bench import copied_shares, copies_elsewhere, copy_findings, paper_own_texts, unreviewed_paper_ids
from grebench.bench._import import store_background
from grebench.cli._main import main
from grebench.endpoints import KeyVault
from grebench.ingest import bundled_path
from grebench.settings import Settings
from grebench.site import build_site
from grebench.site._data import paper_page, version_line
from grebench.site._reader import build_reader
from grebench.store import open_store, public_since
from grebench.submissions import SubmissionForm, SubmissionQueue, evaluate_queued
from tests.conftest import DATA_DIR
from tests.fakes.openai_server import DEFAULT_REVIEW, FakeOpenAIServer
from tests.security.conftest import RESOLVER

RESUBMISSION = DATA_DIR / "archives" / "resubmission_iclr2026.jsonl"
EARLIER, RESUB, FRESH = "rklp93EtwH", "ResubARML26", "FreshPaper26"
EARLIER_PUBLIC = datetime(2019, 11, 8)


def _earlier_reviews() -> list[str]:
    record = json.loads(bundled_path("iclr2020").read_text(encoding="utf-8").split("\n")[0])
    assert record["id"] == EARLIER
    return [r["content"]["review"] for r in record["reviews"]]


def _cli(settings: Settings, *args: str) -> Result:
    return CliRunner().invoke(main, list(args), env={"GREBENCH_DATA_DIR": str(settings.data_path)},
                              catch_exceptions=False)


def _ingest_earlier(settings: Settings) -> None:
    result = _cli(settings, "ingest", "--source", "bundled:iclr2020", "--limit", "1", "--json")
    assert result.exit_code == 0, result.output


def _ingest_resubmission(settings: Settings) -> dict[str, Any]:
    result = _cli(settings, "ingest", "--source", f"archive:{RESUBMISSION}", "--json")
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.stdout))


def _import(settings: Settings, tmp_path: Path, name: str, lines: list[dict[str, str]], *extra: str) -> Result:
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return _cli(settings, "bench", "import", "--candidate", name, str(path), "--json", *extra)


def test_ingest_links_the_resubmission_to_its_earlier_version_and_dates_it_by_the_earliest_reviews(
        settings: Settings) -> None:
    _ingest_earlier(settings)
    summary = _ingest_resubmission(settings)
    assert summary["links"]["by_method"] == {"abstract": 1}, summary["links"]
    listed = _cli(settings, "links", "--json")
    assert listed.exit_code == 0, listed.output
    [link] = json.loads(listed.stdout)["list"]
    assert {link["paper_id"], link["linked_id"]} == {EARLIER, RESUB}
    store = open_store(settings.db_path)
    try:
        since = public_since(store)
        assert since[RESUB] == EARLIER_PUBLIC and since[EARLIER] == EARLIER_PUBLIC and since[FRESH] > datetime.now()
        # only the fresh paper is still unreviewed: the resubmission's work has had public reviews since 2019
        assert unreviewed_paper_ids(store) == [FRESH]
    finally:
        store.close()


RETITLED = DATA_DIR / "archives" / "retitled_iclr2026.jsonl"


def test_a_retitled_resubmission_with_a_rewritten_abstract_is_linked_and_a_copy_of_its_reviews_refused(
        settings: Settings, tmp_path: Path) -> None:
    """Issue 48: ``rklp93EtwH`` retitled ("Knowledge Graphs Between Tasks: ..."), its abstract rewritten by hand
    (title similarity 0.29, abstract cosine 0.47, keywords as an ICLR 2026 submission would list them): before, "0 new
    links" and a verbatim copy of the earlier review was imported and sealed.  Now the rare keywords corroborate the
    rewritten abstract, the papers are linked, and a copy of the first round's reviews (one, or all three) is
    refused."""
    _ingest_earlier(settings)
    result = _cli(settings, "ingest", "--source", f"archive:{RETITLED}", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["links"]["by_method"] == {"abstract+keywords": 1}, result.output
    store = open_store(settings.db_path)
    try:
        assert public_since(store)["RetitledARML26"] == EARLIER_PUBLIC
    finally:
        store.close()
    earlier = _earlier_reviews()
    one = _import(settings, tmp_path, "Copier", [{"paper_id": "RetitledARML26", "review": earlier[0]}])
    assert one.exit_code == 1 and "copies its public reviews" in one.output, one.output
    every = _import(settings, tmp_path, "Copier", [{"paper_id": "RetitledARML26", "review": "\n\n".join(earlier)}])
    assert every.exit_code == 1 and "copies its public reviews" in every.output, every.output


def test_a_copy_of_a_review_of_an_unlinked_paper_is_found_through_the_sketch_index(
        settings: Settings, tmp_path: Path) -> None:
    """Issue 48: the copy check compares with every public review of the store through the rare-word sketches, not
    only with linked versions: the earlier version's review, answered for an unrelated paper (no link), is refused
    and the evidence names the paper it came from."""
    _ingest_earlier(settings)
    _ingest_resubmission(settings)
    copied = _import(settings, tmp_path, "Elsewhere", [{"paper_id": FRESH, "review": _earlier_reviews()[1]}])
    assert copied.exit_code == 1 and "copies its public reviews" in copied.output, copied.output
    assert f"of paper {EARLIER}" in copied.output, copied.output


def test_copies_elsewhere_is_the_sketch_half_of_copy_findings(settings: Settings) -> None:
    """The search of other papers' reviews is one function (the benchmark's column calls it too): it names the paper
    a copy came from, finds nothing for an honest text, and nothing once that paper is excluded."""
    _ingest_earlier(settings)
    _ingest_resubmission(settings)
    store = open_store(settings.db_path)
    try:
        texts = [(FRESH, _earlier_reviews()[1]), (FRESH, DEFAULT_REVIEW)]
        background, own = store_background(store), paper_own_texts(store, [FRESH])
        found = copies_elsewhere(store, texts, {FRESH: [FRESH]}, background, own)
        assert found[0] is not None and found[0].copied and found[0].elsewhere == EARLIER
        assert found[1] is None or not found[1].copied
        assert copy_findings(store, texts)[0].score == found[0].score
        assert copies_elsewhere(store, texts[:1], {FRESH: [FRESH, EARLIER]}, background, own) == [None]
    finally:
        store.close()


def test_a_copy_of_the_earlier_versions_review_is_refused_and_an_honest_review_is_not_sealed(
        settings: Settings, tmp_path: Path) -> None:
    _ingest_earlier(settings)
    _ingest_resubmission(settings)
    earlier = _earlier_reviews()
    # the copy: the first-round reviews, answered for the resubmission
    copied = _import(settings, tmp_path, "Copier", [{"paper_id": RESUB, "review": earlier[0]}])
    assert copied.exit_code == 1 and "copies its public reviews" in copied.output, copied.output
    spliced = _import(settings, tmp_path, "Splicer", [{"paper_id": RESUB, "review": earlier[1] + "\n" + earlier[2]}])
    assert spliced.exit_code == 1 and "copies its public reviews" in spliced.output, spliced.output
    # an honest review, written (the operator vouches) before the resubmission's own reviews but after the earlier
    # version's were public: neither sealed nor clean for a model whose cutoff follows the first round
    honest = [{"paper_id": pid, "review": DEFAULT_REVIEW.replace("a method", "automated relational meta-learning"),
               "generated_at": "2025-10-01T00:00:00Z"} for pid in (RESUB, FRESH)]
    result = _import(settings, tmp_path, "Honest", honest, "--trust-cutoff", "--cutoff", "2020-06-01")
    assert result.exit_code == 0, result.output
    store = open_store(settings.db_path)
    try:
        rows = {r["paper_id"]: (r["sealed"], r["clean"]) for r in store.rows(
            "SELECT paper_id, sealed, clean FROM clean_pairs WHERE candidate = 'Honest'")}
    finally:
        store.close()
    assert rows == {RESUB: (False, False), FRESH: (True, True)}  # the paper with no earlier version is unchanged


def test_a_link_found_after_the_generation_unseals_it_and_the_copy_detector_then_sees_the_copy(
        settings: Settings, tmp_path: Path) -> None:
    _ingest_resubmission(settings)  # the resubmission first: nothing links it yet
    copy = [{"paper_id": RESUB, "review": _earlier_reviews()[0], "generated_at": "2025-10-01T00:00:00Z"}]
    first = _import(settings, tmp_path, "Early", copy, "--trust-cutoff")
    assert first.exit_code == 0 and json.loads(first.stdout)["sealed"] == 1, first.output
    _ingest_earlier(settings)  # the earlier version arrives: linked at ingest
    store = open_store(settings.db_path)
    try:
        assert store.rows("SELECT sealed, clean FROM clean_pairs WHERE candidate = 'Early'") == [
            {"sealed": False, "clean": False}]
        [text] = [r["text"] for r in store.rows("SELECT text FROM generations WHERE candidate = 'Early'")]
        assert copied_shares(store, [(RESUB, text)])[0] > 0.9
    finally:
        store.close()
    again = _import(settings, tmp_path, "Early", copy, "--trust-cutoff")
    assert again.exit_code == 1 and "copies its public reviews" in again.output, again.output


@pytest.fixture
def endpoint() -> Iterator[FakeOpenAIServer]:
    """A submitted model that answers a paper of the earlier version's work with the earlier version's review."""
    earlier = _earlier_reviews()[0]

    def reply(messages: list[dict[str, Any]]) -> str:
        prompt = json.dumps(messages)
        return earlier if "relational meta-learning" in prompt.lower() else DEFAULT_REVIEW

    with FakeOpenAIServer(reply=reply) as server:
        yield server


def _evaluate(settings: Settings, server: FakeOpenAIServer, cutoff: str = "2024-12-01") -> dict[str, Any]:
    settings = settings.replace(submission_private_allowlist="127.0.0.1/32",
                                submission_http_allowlist="models.example.test", llm_max_retries=0,
                                app_host="127.0.0.2")  # the app's own host stays refused, as in the app battery
    vault = KeyVault(env={"GREBENCH_SECRET_KEY": Fernet.generate_key().decode()})
    queue = SubmissionQueue(None)
    form = SubmissionForm(model_name="Resubmitter", base_url=f"http://models.example.test:{server.port}/v1",
                          released="2025-03-01", cutoff=cutoff, contact="mallory@example.org",
                          api_key="sk-resub")
    assert queue.submit(form, settings, vault, RESOLVER)["ok"]
    store = open_store(settings.db_path)
    try:
        summary = evaluate_queued(store, settings, store.start_run("queue", {}), queue, vault, RESOLVER)
        summary["generations"] = {r["paper_id"]: r["sealed"] for r in store.rows(
            "SELECT paper_id, sealed FROM generations WHERE candidate = 'Resubmitter' AND status = 'ok'")}
    finally:
        store.close()
    return summary


def test_a_submitted_endpoint_gets_no_sealed_review_of_a_resubmitted_paper(settings: Settings,
                                                                             endpoint: FakeOpenAIServer) -> None:
    _ingest_earlier(settings)
    _ingest_resubmission(settings)
    summary = _evaluate(settings, endpoint)
    # the resubmission is no unreviewed paper (its work's reviews are public): nothing sealed is made for it; the
    # honest case (a paper with no earlier version) is unchanged
    assert summary["generations"] == {FRESH: True}, summary
    [entry] = summary["evaluated"]
    assert entry["ok"], entry


def test_an_endpoint_answering_a_reviewed_resubmission_with_the_first_rounds_review_is_refused(
        settings: Settings, tmp_path: Path) -> None:
    """The issue's attack: the resubmission has public reviews of its own (a human-baseline split, scored), and the
    endpoint answers it with the earlier version's review (the earlier paper itself honestly)."""
    record = json.loads(RESUBMISSION.read_text(encoding="utf-8").split("\n")[0])
    record.update(reviews_public_at="2025-11-12", reviews=[
        {"id": f"resub-r{i}", "content": {"summary": {"value": f"Reviewer {i} summarises the meta-knowledge graph."},
                                          "weaknesses": {"value": f"Reviewer {i} asks for more baselines."}}}
        for i in range(3)])
    reviewed = tmp_path / "reviewed.jsonl"
    reviewed.write_text(json.dumps(record) + "\n", encoding="utf-8")
    _ingest_earlier(settings)
    assert _cli(settings, "ingest", "--source", f"archive:{reviewed}").exit_code == 0
    bench = _cli(settings, "bench", "--json")
    assert bench.exit_code == 0, bench.output
    earlier = _earlier_reviews()[0]
    title = record["title"]  # only the resubmission's prompt carries it; the earlier paper is answered honestly

    def reply(messages: list[dict[str, Any]]) -> str:
        return earlier if title in json.dumps(messages) else DEFAULT_REVIEW

    # a declared cutoff before every review was public: the queue generates for both papers
    with FakeOpenAIServer(reply=reply) as server:
        summary = _evaluate(settings, server, cutoff="2019-06-01")
        assert len(server.chat_requests) == 2
    [entry] = summary["evaluated"]
    assert not entry["ok"] and "copy their paper's public reviews" in entry["copied"], entry
    assert summary["generations"] == {}, summary  # no review of the refused submission is scored


def test_paper_page_names_the_earlier_version(settings: Settings) -> None:
    _ingest_earlier(settings)
    _ingest_resubmission(settings)
    store = open_store(settings.db_path)
    try:
        out = settings.data_path / "site"
        build_site(store, settings, out)
        store.export_parquet(settings.data_path / "export")
    finally:
        store.close()
    page = next((out / "papers").glob("resubarml26-*.html")).read_text(encoding="utf-8")
    assert "earlier version: ICLR 2020" in page and "Automated Relational Meta-learning" in page
    assert "reviews public since 2019-11-08" in page
    # the app's Paper tab reads the export: the same line, and the same date for the contamination window
    reader = build_reader(settings.data_path / "export")
    [version] = paper_page(reader, RESUB)["versions"]
    assert version_line(version) == ("earlier version: ICLR 2020 Automated Relational Meta-learning "
                                     "(reviews public since 2019-11-08)")
    assert public_since(reader, [RESUB]) == {RESUB: EARLIER_PUBLIC}

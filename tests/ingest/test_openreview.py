"""The OpenReview source, through the real openreview-py client (v1 and v2) against a local fake API."""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator

import pytest
from click.testing import CliRunner

from grebench.cli._main import main
from grebench.ingest import SourceError, SourceFailure, run_ingest
from grebench.ingest._openreview import OpenReviewSource, choose_api
from grebench.ingest._openreview_http import reset_seconds
from grebench.settings import Settings, load_settings
from grebench.store import PaperRecord, Store
from tests.fakes.openreview_server import DATA_DIR, REAL_V1_PAPER, REAL_V1_VENUE, FakeOpenReview, ms

V1_VENUE = "Fake.cc/2020/Conference"
V2_VENUE = "Fake.cc/2024/Conference"  # auto: 2024 on -> API v2
VENUE = {"v1": V1_VENUE, "v2": V2_VENUE}


def or_settings(fake: FakeOpenReview, tmp_path: Path, **extra: str) -> Settings:
    env = {"GREBENCH_DATA_DIR": str(tmp_path / "data"), "GREBENCH_OPENREVIEW_BASEURL_V1": fake.url,
           "GREBENCH_OPENREVIEW_BASEURL_V2": fake.url, "GREBENCH_FETCH_PDFS": "false"}
    env.update({f"GREBENCH_{k.upper()}": v for k, v in extra.items()})
    return load_settings(env=env)


def no_sleep(waits: list[float]) -> Any:
    return waits.append


@pytest.fixture(params=["v1", "v2"])
def fake(request: pytest.FixtureRequest) -> Iterator[FakeOpenReview]:
    with FakeOpenReview(api=request.param) as server:
        yield server


def populate(fake: FakeOpenReview, venue: str) -> dict[str, str]:
    """Two accepted papers with 3 reviews and a meta-review, one rejected, one withdrawn."""
    ids = {}
    for name, decision in (("a", "Accept (Poster)"), ("b", "Accept (Oral)"), ("c", "Reject")):
        pid = fake.add_paper(venue, title=f"Paper {name}", decision=decision)
        for day in (3, 1, 2):
            fake.add_review(pid, f"Review of {name}, written on day {day}.", created=datetime(2020, 11, day, 8))
        if decision != "Reject":
            fake.add_review(pid, f"Meta review of {name}.", kind="meta_review", created=datetime(2020, 12, 20))
        fake.add_comment(pid)
        ids[name] = pid
    ids["w"] = fake.add_paper(venue, title="Withdrawn paper", withdrawn=True)
    fake.add_review(ids["w"], "A review of a withdrawn paper.", created=datetime(2020, 11, 5))
    return ids


def first_review(fake: FakeOpenReview, paper_id: str) -> dict[str, Any]:
    """The first official review reply of a paper in the fake's raw state."""
    return next(r for r in fake.replies[paper_id]
                if any(i.endswith("/Official_Review") for i in r.get("invitations") or [r.get("invitation")]))


def papers(source: OpenReviewSource, **kw: Any) -> tuple[dict[str, PaperRecord], list[SourceFailure]]:
    found: dict[str, PaperRecord] = {}
    failures: list[SourceFailure] = []
    for item in source.fetch(**kw):
        if isinstance(item, SourceFailure):
            failures.append(item)
        else:
            assert item.paper_id not in found
            found[item.paper_id] = item
    return found, failures


# -- what a venue turns into --------------------------------------------------
def test_real_v1_notes(store: Store, tmp_path: Path) -> None:
    with FakeOpenReview("v1") as fake:
        fake.load_real_v1()
        settings = or_settings(fake, tmp_path)
        summary = run_ingest(OpenReviewSource(REAL_V1_VENUE, settings), store, settings, "run1")
    assert summary.failures == [] and summary.papers_added == 1 and summary.reviews_added == 3
    paper = store.rows("SELECT * FROM papers")[0]
    assert paper["paper_id"] == REAL_V1_PAPER and paper["title"] == "Rethinking the Value of Network Pruning"
    assert paper["decision"] == "accept" and paper["withdrawn"] is False
    assert paper["venue"] == "NIPS 2018" and paper["venue_year"] == 2018
    assert paper["source"] == f"openreview:{REAL_V1_VENUE}"
    assert paper["submitted_at"] == datetime(2018, 10, 20, 22, 27, 41, 855000)  # cdate 1540074461855
    assert paper["reviews_public_at"] == datetime(2018, 10, 24, 14, 29, 34, 594000)  # earliest review cdate
    reviews = store.rows("SELECT r.*, v.rating, v.text FROM reviews r JOIN review_versions v USING (review_id) "
                         "ORDER BY r.review_id")
    real = json.loads((DATA_DIR / "v1_notes_official_reviews_r1eLk2mKiX.json").read_text(encoding="utf-8"))
    assert {r["review_id"] for r in reviews} == {r["id"] for r in real} and len(real) == 3
    assert all(r["kind"] == "official_review" for r in reviews)  # the author comment is not a review
    assert all(r["signature"].startswith(f"{REAL_V1_VENUE}/Paper49/AnonReviewer") for r in reviews)
    assert any(r["text"].startswith("This paper investigates the importance") for r in reviews)
    assert {r["rating"] for r in reviews} == {"4: Top 50% of accepted papers, clear accept"}


def test_ingest_venue(fake: FakeOpenReview, store: Store, tmp_path: Path) -> None:
    venue = VENUE[fake.api]
    ids = populate(fake, venue)
    settings = or_settings(fake, tmp_path)
    source = OpenReviewSource(venue, settings)
    assert source.api == fake.api and source.name == f"openreview:{venue}"
    summary = run_ingest(source, store, settings, "run1")
    assert summary.failures == [] and summary.papers_added == 4 and summary.reviews_added == 3 * 3 + 2 + 1
    rows = {r["paper_id"]: r for r in store.rows("SELECT * FROM papers")}
    assert rows[ids["a"]]["decision"] == "Accept (Poster)" and rows[ids["c"]]["decision"] == "Reject"
    assert rows[ids["w"]]["withdrawn"] is True and rows[ids["a"]]["withdrawn"] is False
    assert rows[ids["a"]]["reviews_public_at"] == datetime(2020, 11, 1, 8)  # earliest of days 3, 1, 2
    assert rows[ids["a"]]["submitted_at"].year == 2020 and rows[ids["a"]]["abstract"] == "An abstract."
    kinds = store.rows("SELECT kind, count(*) AS n FROM reviews GROUP BY kind ORDER BY kind")
    assert kinds == [{"kind": "meta_review", "n": 2}, {"kind": "official_review", "n": 10}]
    review = store.rows("SELECT r.signature, v.rating, v.text FROM reviews r JOIN review_versions v USING (review_id)"
                        " WHERE r.paper_id = ? AND r.kind = 'official_review' LIMIT 1", [ids["a"]])[0]
    assert review["rating"] == "6: Weak Accept" and "Review of a" in review["text"]
    assert review["signature"].startswith(venue + "/")
    assert "/notes" in {r["path"] for r in fake.requests} and "/login" not in {r["path"] for r in fake.requests}


@pytest.mark.parametrize("api", ["v1", "v2"])
def test_cli_ingest(api: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeOpenReview(api) as fake:
        ids = populate(fake, VENUE[api])
        monkeypatch.setenv(f"GREBENCH_OPENREVIEW_BASEURL_{api.upper()}", fake.url)
        monkeypatch.setenv("GREBENCH_FETCH_PDFS", "false")
        args = ["--data-dir", str(tmp_path / "d"), "ingest", "--source", f"openreview:{VENUE[api]}", "--json"]
        first = CliRunner().invoke(main, args)
        again = CliRunner().invoke(main, args)
    assert first.exit_code == 0, first.output
    out = json.loads(first.stdout)
    assert out["papers_added"] == 4 and out["reviews_added"] == 12 and out["failures"] == []
    assert json.loads(again.stdout)["papers_added"] == 0 and json.loads(again.stdout)["reviews_added"] == 0
    from grebench.store import open_store

    s = open_store(tmp_path / "d" / "grebench.duckdb", read_only=True)
    try:
        assert s.scalar("SELECT withdrawn FROM papers WHERE paper_id = ?", [ids["w"]]) is True
    finally:
        s.close()


def test_choose_api() -> None:
    assert choose_api("ICLR.cc/2023/Conference", "auto") == "v1"
    assert choose_api("ICLR.cc/2024/Conference", "auto") == "v2"
    assert choose_api("TMLR", "auto") == "v2"
    assert choose_api("ICLR.cc/2024/Conference", "v1") == "v1"
    with pytest.raises(SourceError, match="openreview_api"):
        choose_api("ICLR.cc/2024/Conference", "v3")


# -- paging ---------------------------------------------------------------------
def test_pagination_with_after(fake: FakeOpenReview, tmp_path: Path) -> None:
    venue = VENUE[fake.api]
    for _ in range(7):
        fake.add_review(fake.add_paper(venue))
    found, failures = papers(OpenReviewSource(venue, or_settings(fake, tmp_path), page_size=3))
    assert len(found) == 7 and failures == []
    listing = "Blind_Submission" if fake.api == "v1" else "Submission"
    pages = [r["query"] for r in fake.requests_to("/notes") if r["query"]["invitation"] == f"{venue}/-/{listing}"]
    ids = sorted(found)
    # openreview-py pages by id: first page without `after`, then after the last id of each full page
    assert [p.get("after") for p in pages] == [None, ids[2], ids[5], ids[6]]
    assert all(p["limit"] == "3" and p["sort"] == "id" for p in pages)


def test_limit_and_since(fake: FakeOpenReview, tmp_path: Path) -> None:
    venue = VENUE[fake.api]
    ids = populate(fake, venue)
    settings = or_settings(fake, tmp_path)
    assert len(papers(OpenReviewSource(venue, settings), limit=2)[0]) == 2
    assert papers(OpenReviewSource(venue, settings), since=datetime(2021, 2, 1))[0] == {}  # nothing changed since
    fake.edit_review(first_review(fake, ids["b"])["id"], "Edited much later.")
    first_review(fake, ids["b"])["tmdate"] = ms(datetime(2022, 1, 1))
    found, _ = papers(OpenReviewSource(venue, settings), since=datetime(2021, 2, 1))
    assert set(found) == {ids["b"]}


# -- rate limits and retries --------------------------------------------------------
def test_429_retry_after_is_honoured(fake: FakeOpenReview, tmp_path: Path) -> None:
    venue = VENUE[fake.api]
    populate(fake, venue)
    fake.fail_next(1, status=429, retry_after=1, path="/notes")
    source = OpenReviewSource(venue, or_settings(fake, tmp_path))
    start = time.monotonic()
    found, _ = papers(source)
    elapsed = time.monotonic() - start
    assert len(found) == 4
    assert 1.0 <= elapsed < 60  # waited the 1 s Retry-After (the upper bound only rules out a much longer wait)
    assert source.budget.waited_s == 1.0 and source.budget.retries == 1
    first, second = fake.requests[0], fake.requests[1]
    assert first["query"] == second["query"] and second["t"] - first["t"] >= 1.0  # the same request, 1 s later
    assert len(fake.requests) <= 8


def test_429_reset_time_in_body(fake: FakeOpenReview, tmp_path: Path) -> None:
    venue = VENUE[fake.api]
    populate(fake, venue)
    fake.fail_next(1, status=429, retry_after=None, reset_in_s=30, path="/notes")
    waits: list[float] = []
    found, _ = papers(OpenReviewSource(venue, or_settings(fake, tmp_path), sleep=no_sleep(waits)))
    assert len(found) == 4 and len(waits) == 1 and 25 < waits[0] <= 30


def test_reset_seconds_shapes() -> None:
    now = 1_700_000_000.0
    assert reset_seconds(b'{"details": {"resetTime": "2023-11-14T22:13:40.000Z"}}', now) == pytest.approx(20.0)
    assert reset_seconds(b'{"resetTime": 1700000010000}', now) == pytest.approx(10.0)
    assert reset_seconds(b"<html>busy</html>", now) is None


def test_absurd_retry_after_fails_fast(fake: FakeOpenReview, tmp_path: Path) -> None:
    venue = VENUE[fake.api]
    populate(fake, venue)
    fake.fail_next(1, status=429, retry_after=100_000, path="/notes")
    waits: list[float] = []
    source = OpenReviewSource(venue, or_settings(fake, tmp_path, openreview_max_wait_s="60"), sleep=no_sleep(waits))
    start = time.monotonic()
    with pytest.raises(SourceError) as err:
        papers(source)
    assert time.monotonic() - start < 60 and waits == []  # refused at once, never slept the 100000 s
    message = str(err.value)
    assert "rate limit" in message and "100000 s" in message and "rerun later to resume" in message
    assert len(fake.requests) == 1


def test_429_forever_is_bounded_by_retries(fake: FakeOpenReview, tmp_path: Path) -> None:
    venue = VENUE[fake.api]
    populate(fake, venue)
    fake.fail_next(1000, status=429, retry_after=0)
    waits: list[float] = []
    source = OpenReviewSource(venue, or_settings(fake, tmp_path, openreview_max_retries="3"), sleep=no_sleep(waits))
    with pytest.raises(SourceError, match=r"rate limit: still refused after 3 retries.*rerun later"):
        papers(source)
    assert len(fake.requests) == 4  # the request and 3 retries, then a clear stop


# -- bad answers --------------------------------------------------------------------
def test_malformed_notes(fake: FakeOpenReview, store: Store, tmp_path: Path) -> None:
    venue = VENUE[fake.api]
    ids = populate(fake, venue)
    bad = fake.add_malformed_paper(venue)
    broken = first_review(fake, ids["a"])
    broken["content"] = {"rating": "3"}  # a review with no text
    settings = or_settings(fake, tmp_path)
    summary = run_ingest(OpenReviewSource(venue, settings), store, settings, "run1")
    items = {f["item"]: f["reason"] for f in summary.failures}
    assert items.keys() == {bad, f"{ids['a']}/{broken['id']}"}
    assert "content missing" in items[bad] and "no text field" in items[f"{ids['a']}/{broken['id']}"]
    assert summary.papers_added == 4 and summary.reviews_added == 11


@pytest.mark.parametrize("fault,expected", [
    (dict(status=500, retry_after=0), "HTTP 500 InternalServerError after 2 retries"),
    (dict(mode="html", status=200), "not JSON (text/html"),
    (dict(mode="html", status=502, retry_after=None), "HTTP 502 with an HTML page"),
    (dict(mode="close"), "the connection was closed by the other side"),
])
def test_listing_failures_are_clear(fake: FakeOpenReview, tmp_path: Path, fault: dict[str, Any],
                                    expected: str) -> None:
    venue = VENUE[fake.api]
    populate(fake, venue)
    fake.fail_next(1000, **fault)
    waits: list[float] = []
    source = OpenReviewSource(venue, or_settings(fake, tmp_path, openreview_max_retries="2"), sleep=no_sleep(waits))
    with pytest.raises(SourceError) as err:
        papers(source)
    assert expected in str(err.value) and "listing" in str(err.value)
    assert len(fake.requests) <= 3  # never hammers: at most 1 + max_retries


def test_unknown_venue(fake: FakeOpenReview, tmp_path: Path) -> None:
    fake.add_venue("Other.cc/2024/Conference")
    with pytest.raises(SourceError, match=r"unknown OpenReview venue 'Nope.cc/2020/Conference' \(no venue group"):
        papers(OpenReviewSource("Nope.cc/2020/Conference", or_settings(fake, tmp_path, openreview_api=fake.api)))
    empty, failures = papers(OpenReviewSource("Other.cc/2024/Conference",
                                              or_settings(fake, tmp_path, openreview_api=fake.api)))
    assert empty == {} and failures == []  # a venue that exists but has no submissions yet is fine


def test_login_failure_is_clear_and_keeps_the_password_out(fake: FakeOpenReview, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    populate(fake, VENUE[fake.api])
    monkeypatch.setenv("OPENREVIEW_USERNAME", "someone@example.org")
    monkeypatch.setenv("OPENREVIEW_PASSWORD", "s3cret-Pa55")
    with pytest.raises(SourceError, match=r"OpenReview login \(OPENREVIEW_USERNAME\).*HTTP 404") as err:
        papers(OpenReviewSource(VENUE[fake.api], or_settings(fake, tmp_path)))
    assert "s3cret-Pa55" not in str(err.value)
    assert [r["path"] for r in fake.requests] == ["/login"]


@pytest.mark.parametrize("case", ["500", "html", "close", "unknown"])
def test_cli_failures(case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeOpenReview("v1") as fake:
        populate(fake, V1_VENUE)
        faults = {"500": dict(status=500, retry_after=0), "html": dict(mode="html", status=200),
                  "close": dict(mode="close")}
        if case in faults:
            fake.fail_next(1000, **faults[case])
        monkeypatch.setenv("GREBENCH_OPENREVIEW_BASEURL_V1", fake.url)
        monkeypatch.setenv("GREBENCH_OPENREVIEW_MAX_RETRIES", "1")
        venue = "Nope.cc/2020/Conference" if case == "unknown" else V1_VENUE
        result = CliRunner().invoke(main, ["--data-dir", str(tmp_path / "d"), "ingest", "--source",
                                           f"openreview:{venue}", "--json"])
        requests = len(fake.requests)
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    out = json.loads(result.stdout)
    expected = {"500": "HTTP 500", "html": "not JSON", "close": "connection", "unknown": "unknown OpenReview venue"}
    assert expected[case] in out["error"]
    assert requests <= 6


# -- PDFs and versions ----------------------------------------------------------------
def tiny_pdf(text: str) -> bytes:
    import pymupdf

    doc = pymupdf.open()
    doc.new_page().insert_text((72, 72), text, fontsize=12)
    return doc.tobytes()


def test_pdf_loader_downloads_with_the_client(fake: FakeOpenReview, tmp_path: Path) -> None:
    venue = VENUE[fake.api]
    data = tiny_pdf("Pruning from scratch works.")
    pid = fake.add_paper(venue, pdf=data)
    other = fake.add_paper(venue, pdf=b"%PDF-1.4 other")
    found, _ = papers(OpenReviewSource(venue, or_settings(fake, tmp_path, fetch_pdfs="true")))
    assert found[pid].pdf_ref.startswith("/pdf/") and found[pid].pdf_loader is not None
    assert fake.requests_to("/pdf") == [] and fake.requests_to("/attachment") == []  # nothing before asked
    assert found[pid].pdf_loader() == data
    path = "/pdf" if fake.api == "v1" else "/attachment"
    assert [r["query"]["id"] for r in fake.requests_to(path)] == [pid]
    if fake.api == "v2":
        assert fake.requests_to(path)[0]["query"]["name"] == "pdf"
    fake.fail_next(5, mode="html", status=200, path=path)
    with pytest.raises(SourceError, match="not a PDF"):
        found[other].pdf_loader()
    found, _ = papers(OpenReviewSource(venue, or_settings(fake, tmp_path)))  # fetch_pdfs false
    assert found[pid].pdf_loader is None


def test_pdf_text_is_stored_once(fake: FakeOpenReview, store: Store, tmp_path: Path) -> None:
    pytest.importorskip("grebench.ingest._pdf")
    venue = VENUE[fake.api]
    pid = fake.add_paper(venue, pdf=tiny_pdf("Pruning from scratch works."))
    settings = or_settings(fake, tmp_path, fetch_pdfs="true")
    first = run_ingest(OpenReviewSource(venue, settings), store, settings, "run1")
    assert first.pdfs_extracted == 1, first.failures
    text = store.scalar("SELECT text FROM paper_texts WHERE paper_id = ?", [pid])
    assert "Pruning from scratch works." in text
    second = run_ingest(OpenReviewSource(venue, settings), store, settings, "run2")
    assert second.pdfs_extracted == 0
    assert len(fake.requests_to("/pdf" if fake.api == "v1" else "/attachment")) == 1  # not downloaded twice


def test_edited_review_becomes_a_new_version(fake: FakeOpenReview, store: Store, tmp_path: Path) -> None:
    venue = VENUE[fake.api]
    ids = populate(fake, venue)
    settings = or_settings(fake, tmp_path)
    run_ingest(OpenReviewSource(venue, settings), store, settings, "run1")
    review_id = first_review(fake, ids["b"])["id"]
    fake.edit_review(review_id, "After the rebuttal I raise my score.")
    second = run_ingest(OpenReviewSource(venue, settings), store, settings, "run2")
    assert second.versions_added == 1 and second.reviews_added == 0
    versions = store.rows("SELECT version, text, modified_at FROM review_versions WHERE review_id = ? ORDER BY version",
                          [review_id])
    assert [v["version"] for v in versions] == [1, 2] and "After the rebuttal" in versions[1]["text"]
    assert versions[1]["modified_at"] > versions[0]["modified_at"]
    assert store.scalar("SELECT latest_version FROM reviews WHERE review_id = ?", [review_id]) == 2
    third = run_ingest(OpenReviewSource(venue, settings), store, settings, "run3")
    assert (third.papers_added, third.papers_updated, third.reviews_added, third.versions_added) == (0, 0, 0, 0)


def test_records_over_the_ingest_limits_are_refused_like_an_archives(fake: FakeOpenReview, store: Store,
                                                                    tmp_path: Path) -> None:
    venue = VENUE[fake.api]
    ids = populate(fake, venue)
    huge = fake.add_paper(venue, title="Huge abstract", abstract="x" * 30_000)
    long_review = fake.add_paper(venue, title="Long review")
    fake.add_review(long_review, "y" * 5_000)
    settings = or_settings(fake, tmp_path, ingest_max_abstract_chars="20000", ingest_max_review_chars="4000")
    summary = run_ingest(OpenReviewSource(venue, settings), store, settings, "run1")
    reasons = {f["item"]: f["reason"] for f in summary.failures}
    assert reasons.keys() == {huge, long_review}
    assert "abstract is 30,000 characters (limit ingest_max_abstract_chars = 20,000)" in reasons[huge]
    assert "(limit ingest_max_review_chars = 4,000)" in reasons[long_review]
    assert summary.papers_added == len(ids)  # the others are all ingested
    assert store.scalar("SELECT count(*) FROM papers WHERE paper_id IN (?, ?)", [huge, long_review]) == 0

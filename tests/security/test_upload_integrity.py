"""Uploads cannot buy rank (issue 19): copies of public reviews are refused, declared cutoffs and dates are not
trusted, and the rate limit is per network address and per queue, not per self-declared contact."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from datetime import datetime, timedelta
from importlib import resources

import pytest

from grebench.bench import clean_pairs, run_bench
from grebench.bench._copies import COPY_THRESHOLD, copy_share
from grebench.scoring import run_scoring, validation_rows
from grebench.settings import Settings
from grebench.store import PaperRecord, ReviewRecord, Store, open_store, utcnow
from grebench.submissions import ImportForm, SubmissionQueue, accept_queued_imports, queue_import


def _bundled(n: int) -> list[dict]:
    text = resources.files("grebench.ingest").joinpath("data/iclr2020_reviews.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.split("\n")[:n] if line.strip()]


@pytest.fixture
def store() -> Iterator[Store]:
    """Three real ICLR 2020 papers with public reviews and one whose reviews are not public yet."""
    store = open_store(None)
    with store.transaction():
        for k, paper in enumerate(_bundled(4)):
            public = datetime(2019, 11, 8) if k < 3 else utcnow() + timedelta(days=30)
            reviews = [ReviewRecord(review_id=r["id"], paper_id=paper["id"], kind="official_review",
                                    text=r["content"]["review"], sections=[("Review", r["content"]["review"])],
                                    content={"review": r["content"]["review"]}) for r in paper["reviews"]]
            store.upsert_paper(PaperRecord(paper_id=paper["id"], venue_id="ICLR.cc/2020/Conference",
                                           title=paper["title"], source="test", abstract=paper["abstract"],
                                           reviews_public_at=public, reviews=reviews))
    yield store
    store.con.close()


def _upload(papers: list[dict], texts: list[str]) -> bytes:
    meta = {"_meta": {"cutoff": "2018-01-01"}}
    lines = [meta] + [{"paper_id": p["id"], "review": t, "generated_at": "2018-06-01T00:00:00Z"}
                      for p, t in zip(papers, texts, strict=True)]
    return "".join(json.dumps(x) + "\n" for x in lines).encode()


def _edit(text: str, share: float, seed: int = 1) -> str:
    rng = random.Random(seed)
    return " ".join(f"w{rng.randint(0, 999)}" if rng.random() < share else w for w in text.split())


def _run(store: Store, settings: Settings, data: bytes, name: str = "copycat") -> dict:
    queue = SubmissionQueue(None)
    form = ImportForm(candidate=name, contact="eve@example.org", cutoff="2018-01-01", model="m")
    papers = {r["paper_id"] for r in store.rows("SELECT paper_id FROM papers")}
    queued = queue_import(queue, form, data, settings, papers, source="203.0.113.7")
    assert queued["ok"], queued
    [done] = accept_queued_imports(store, queue, settings)
    return done


@pytest.mark.parametrize("share", [0.0, 0.1])
def test_verbatim_and_lightly_edited_copies_of_public_reviews_are_refused(store: Store, settings: Settings,
                                                                          share: float) -> None:
    papers = _bundled(4)
    done = _run(store, settings, _upload(papers, [_edit(p["reviews"][0]["content"]["review"], share) for p in papers]))
    assert not done["ok"] and "copies its public reviews" in done["reason"]
    assert store.scalar("SELECT count(*) FROM candidates WHERE name = 'copycat'") == 0


def test_real_reviews_score_far_below_the_copy_threshold() -> None:
    """The rule is about information: no bundled review shares that much with the other reviews of its paper."""
    worst = 0.0
    for paper in _bundled(400):
        texts = [r["content"]["review"] for r in paper["reviews"]]
        for i, text in enumerate(texts):
            worst = max(worst, copy_share(text, texts[:i] + texts[i + 1:]))
    assert worst < COPY_THRESHOLD / 2


def test_a_declared_cutoff_and_dates_do_not_make_an_upload_clean(store: Store, settings: Settings) -> None:
    papers = _bundled(4)
    # original text (another paper's review, shifted): no copy of this paper's reviews
    texts = [papers[(k + 1) % 4]["reviews"][1]["content"]["review"] for k in range(4)]
    done = _run(store, settings, _upload(papers, texts), name="honest-looking")
    assert done["ok"], done
    cand = store.rows("SELECT cutoff, params_json FROM candidates WHERE name = 'honest-looking'")[0]
    assert cand["cutoff"] is None
    params = json.loads(cand["params_json"])
    assert params["cutoff_trusted"] is False and params["declared_cutoff"] == "2018-01-01"
    pairs = {r["paper_id"]: (r["sealed"], r["clean"]) for r in clean_pairs(store, "honest-looking")}
    # only the paper whose reviews were not public when the upload was received counts
    assert pairs == {papers[0]["id"]: (False, False), papers[1]["id"]: (False, False),
                     papers[2]["id"]: (False, False), papers[3]["id"]: (True, True)}


def test_rate_limit_is_per_address_not_per_contact(settings: Settings) -> None:
    queue = SubmissionQueue(None)
    data = b'{"paper_id": "p0", "review": "Weaknesses: the ablations of the sparse attention kernels are missing."}\n'
    answers = [queue_import(queue, ImportForm(candidate=f"agent-{i}", contact=f"fresh{i}@example.org"), data,
                            settings, {"p0"}, source="198.51.100.9")
               for i in range(int(settings.submissions_per_address_per_week) + 1)]
    assert all(a["ok"] for a in answers[:-1])
    assert not answers[-1]["ok"] and "network address" in answers[-1]["message"]
    other = queue_import(queue, ImportForm(candidate="agent-x", contact="x@example.org"), data, settings, {"p0"},
                         source="198.51.100.10")
    assert other["ok"]


def test_the_queue_has_a_global_cap(settings: Settings) -> None:
    queue = SubmissionQueue(None)
    capped = settings.replace(queue_max_pending=2)
    data = b'{"paper_id": "p0", "review": "Weaknesses: the ablations of the sparse attention kernels are missing."}\n'
    answers = [queue_import(queue, ImportForm(candidate=f"agent-{i}", contact=f"c{i}@example.org"), data, capped,
                            {"p0"}, source=f"192.0.2.{i}") for i in range(3)]
    assert [a["ok"] for a in answers] == [True, True, False] and "queue is full" in answers[2]["message"]


def test_validation_publishes_what_a_copy_of_a_reference_earns(bundled_store: Store, settings: Settings) -> None:
    """The reference-copy control: GEM-S rewards a copy of a public review (published, not hidden); on the references
    it was not copied from the copy is just another human review."""
    run_bench(bundled_store, settings, None, ["human", "reference-copy"])
    papers = sorted(r["paper_id"] for r in bundled_store.rows("SELECT paper_id FROM baseline_splits"))[:60]
    summary = run_scoring(bundled_store, settings, None, ["gem-s"], "offline", "rules", paper_ids=papers)
    rows = {r["transformation"]: r for r in validation_rows(bundled_store, summary["estimator"],
                                                             summary["preprocessor"], ["gem-s"], 200, 0)}
    copy, others = rows["reference-copy"], rows["reference-copy (other refs)"]
    assert copy["verdict"] == "rewarded" and not copy["as_expected"] and copy["d"] > 1
    assert copy["n_papers"] == 60 and others["n_papers"] >= 55  # a paper whose other references lack lines drops
    assert copy["mean_transformed"] > 10 * copy["mean_human"]
    assert abs(others["d"]) < copy["d"] / 3

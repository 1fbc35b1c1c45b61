"""Issue 62, item 3: a review of an unlinked disguised resubmission that carries its earlier version's public reviews
is not counted sealed unchecked (the near-paper copy check, on by default with the offline estimator, bundled ICLR
2026 papers): it is unsealed for good, named in the change log, and its candidate is not refused."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from grebench.bench import reseal
from grebench.ingest import bundled_source
from grebench.settings import load_settings
from grebench.store import PaperRecord, Store, open_store, utcnow
from grebench.submissions import NEAR_COPY_FLAG, check_copies, refuse_copied_generations
from tests.fakes.abstracts import disguised

_SYNONYMS = {"paper": "manuscript", "method": "technique", "results": "outcomes", "experiments": "trials",
             "novel": "original", "limited": "narrow", "show": "exhibit", "unclear": "vague", "improve": "boost",
             "performance": "effectiveness", "authors": "researchers", "model": "system", "models": "systems",
             "approach": "strategy", "analysis": "examination", "evaluation": "appraisal", "problem": "difficulty"}


def _paraphrase(paper: PaperRecord, stand_in: str, share: float) -> str:
    """``stand_in`` (a review of another paper), then ``share`` of the sentences of every public review of ``paper``,
    every listed word replaced by a synonym, the sentences shuffled."""
    rng = random.Random(paper.paper_id)
    taken: list[str] = []
    for review in paper.reviews:
        sentences = [s for s in re.split(r"(?<=[.!?])\s+|\n+", review.text) if len(s.split()) >= 3]
        taken += rng.sample(sentences, max(1, round(share * len(sentences)))) if sentences else []
    rng.shuffle(taken)
    return stand_in + "\n\n" + " ".join(" ".join(_SYNONYMS.get(w.lower(), w) for w in s.split()) for s in taken)


def _build(paraphrase: Callable[[PaperRecord, str], str] | None = None) -> Store:
    """70 ICLR 2026 papers with their public reviews, and disguised resubmissions of the first 4 (title and abstract
    synonymised, under review, not linked); three candidates review the disguises, Paraphraser with ``paraphrase``
    (default: half the sentences, a short synonym list)."""
    paraphrase = paraphrase or (lambda paper, stand_in: _paraphrase(paper, stand_in, 0.5))
    found = [p for p in bundled_source("iclr2026").fetch() if isinstance(p, PaperRecord) and len(p.reviews) >= 2]
    records, stand_ins = found[:70], found[70:74]  # the stand-ins' reviews are in no store: nobody's public review
    rng = random.Random(7)
    db = open_store(None)
    originals = records[:4]
    with db.transaction():
        for paper in records:
            db.upsert_paper(paper)
        for paper in originals:
            title, abstract = disguised(paper.title, paper.abstract or "", rng)
            db.upsert_paper(PaperRecord(f"{paper.paper_id}-disguised", "Disguised/2027", title, "test",
                                        abstract=abstract, venue="Disguised 2027"))
    for name in ("Paraphraser", "Early", "Elsewhere"):
        db.con.execute("INSERT INTO candidates (name, kind, params_json, updated_at) VALUES (?, 'submitted', '{}', ?)",
                       [name, utcnow()])
    for k, paper in enumerate(originals):
        stand_in = stand_ins[k].reviews[0].text
        public = paper.reviews_public_at
        assert public is not None
        for name, text, made in (("Paraphraser", paraphrase(paper, stand_in), utcnow()),
                                 ("Early", _paraphrase(paper, stand_in, 0.5), public - timedelta(days=1)),
                                 ("Elsewhere", stand_in, utcnow())):
            db.con.execute("INSERT INTO generations (generation_id, candidate, paper_id, prompt_version, params_json, "
                           "status, text, generated_at, sealed) VALUES (?, ?, ?, 'v1', '{}', 'ok', ?, ?, true)",
                           [f"{name}/{paper.paper_id}", name, f"{paper.paper_id}-disguised", text, made])
    return db


@pytest.fixture(scope="module")
def store() -> Store:
    """The papers and candidates of :func:`_build`, shared by the tests that only read."""
    return _build()


def test_a_paraphrase_of_the_earlier_versions_reviews_is_found_naming_that_paper(store: Store,
                                                                                tmp_path: Path) -> None:
    settings = load_settings(env={"GREBENCH_DATA_DIR": str(tmp_path)})  # on by default
    assert settings.submissions.near_copy_estimator == "offline"
    check = check_copies(store, "Paraphraser", settings)
    near = check.near_copies
    assert len(near) >= 3, check
    for found in near:  # each names its own disguise's original, and when its reviews became public
        original = found.paper_id.removesuffix("-disguised")
        assert f"reviews of paper {original} (ICLR 2026, public since " in found.detail, found.detail
        assert "possibly an earlier version of this paper" in found.detail
    assert "near-paper copy check under offline" in check.near_summary()
    assert check.lm_copies == ()  # the LM copy check of the paper's own reviews sees nothing: the disguise has none


def test_honest_text_and_reviews_written_before_the_other_paper_was_public_are_not_flagged(store: Store,
                                                                                          tmp_path: Path) -> None:
    settings = load_settings(env={"GREBENCH_DATA_DIR": str(tmp_path), "GREBENCH_NEAR_COPY_ESTIMATOR": "offline"})
    assert getattr(check_copies(store, "Elsewhere", settings), "near_copies", None) == ()
    # the same paraphrases, made before the originals' reviews were out: those reviews are not read against them
    early = check_copies(store, "Early", settings)
    assert not any(f.paper_id.removesuffix("-disguised") in f.detail for f in getattr(early, "near_copies", ()))


def test_without_the_setting_the_near_paper_check_does_not_run(store: Store, tmp_path: Path) -> None:
    off = load_settings(env={"GREBENCH_DATA_DIR": str(tmp_path), "GREBENCH_NEAR_COPY_ESTIMATOR": ""})
    check = check_copies(store, "Paraphraser", off)
    assert getattr(check, "near_copies", ()) == ()


def _unworded(paper: PaperRecord, stand_in: str) -> str:
    """The benchmark's paraphrase (every content word a synonym, a thesaurus else distributional neighbours, 30 % of
    the sentences, reordered): the word-level checks let it through on these papers."""
    from benchmarks.copy_detection import NEIGHBOURS, Neighbours, paraphrased

    if not NEIGHBOURS:
        NEIGHBOURS.append(Neighbours([r.text for p in bundled_source("iclr2026").fetch() if isinstance(p, PaperRecord)
                                      for r in p.reviews][:2000], size=2000))
    return paraphrased(0.3, [stand_in])([r.text for r in paper.reviews], random.Random(paper.paper_id), [])


def test_flagged_reviews_are_unsealed_for_good_and_named_in_the_change_log(tmp_path: Path) -> None:
    db = _build(_unworded)
    settings = load_settings(env={"GREBENCH_DATA_DIR": str(tmp_path)})
    assert refuse_copied_generations(db, "Paraphraser", settings) is None  # evaluated, not refused
    assert refuse_copied_generations(db, "Elsewhere", settings) is None
    rows = db.rows("SELECT candidate, paper_id, status, sealed, flags_json FROM generations ORDER BY generation_id")
    flagged = {r["paper_id"] for r in rows if r["candidate"] == "Paraphraser" and not r["sealed"]}
    assert flagged  # the word-level checks pass these; the near-paper check finds at least one
    for r in rows:
        assert r["status"] == "ok"
        mark = json.loads(r["flags_json"] or "{}").get(NEAR_COPY_FLAG)
        if r["candidate"] == "Paraphraser" and r["paper_id"] in flagged:
            assert mark is not None and mark["estimator"] == "offline"
            assert f"reviews of paper {r['paper_id'].removesuffix('-disguised')} " in mark["evidence"]
        else:
            assert r["sealed"] and mark is None, r
    lines = [r["detail"] for r in db.rows("SELECT * FROM board_changes WHERE subject = 'Paraphraser'")]
    assert len(lines) == 1 and f"{len(flagged)} review(s) of Paraphraser count as written with public reviews in " \
        f"view ({len(flagged)} had counted as sealed)" in lines[0], lines
    assert not db.rows("SELECT * FROM board_changes WHERE subject = 'Elsewhere'")
    # once the disguises' own reviews are due, reseal seals what it may (the honest candidates' reviews, unsealed
    # here to see it), and never a flagged review; a second check writes nothing again
    db.con.execute("UPDATE papers SET reviews_public_at = ? WHERE paper_id LIKE '%-disguised'",
                   [utcnow() + timedelta(days=30)])
    db.con.execute("UPDATE generations SET sealed = false")
    assert reseal(db) == len(rows) - len(flagged)
    assert {r["paper_id"] for r in db.rows("SELECT paper_id FROM generations WHERE candidate = 'Paraphraser' AND "
                                           "NOT sealed")} == flagged
    assert refuse_copied_generations(db, "Paraphraser", settings) is None
    assert len(db.rows("SELECT * FROM board_changes WHERE subject = 'Paraphraser'")) == 1


def test_a_store_too_small_to_calibrate_flags_nothing_and_says_why_not_by_crashing(tmp_path: Path) -> None:
    """One public paper, the checked paper's near paper: no paper has a near paper of its own to calibrate the bar on,
    so the bar is infinite (nothing flagged) and the evaluation goes on (it crashed the queue job before)."""
    records = [p for p in bundled_source("iclr2026").fetch() if isinstance(p, PaperRecord) and len(p.reviews) >= 2]
    db = open_store(None)
    with db.transaction():
        db.upsert_paper(records[0])
        title, abstract = disguised(records[0].title, records[0].abstract or "", random.Random(3))
        db.upsert_paper(PaperRecord("new-paper", "Disguised/2027", title, "test", abstract=abstract,
                                    venue="Disguised 2027"))
    db.con.execute("INSERT INTO candidates (name, kind, params_json, updated_at) VALUES ('Small', 'submitted', '{}', "
                   "?)", [utcnow()])
    db.con.execute("INSERT INTO generations (generation_id, candidate, paper_id, prompt_version, params_json, status, "
                   "text, generated_at, sealed) VALUES ('Small/1', 'Small', 'new-paper', 'v1', '{}', 'ok', ?, ?, true)",
                   [records[5].reviews[0].text, utcnow()])  # an honest review (of a paper in no store)
    from grebench.scoring import EstimatorHandle
    from grebench.submissions._nearcopy import near_copy_findings

    settings = load_settings(env={"GREBENCH_DATA_DIR": str(tmp_path)})
    handle = EstimatorHandle("offline", settings)
    try:
        (found,) = near_copy_findings(db, handle, [("new-paper", "x " * 5, utcnow())])
    finally:
        handle.close()
    assert found is not None and found.near_id == records[0].paper_id  # read against it...
    assert found.bar == float("inf") and not found.copied  # ...with no bar to flag it by
    assert refuse_copied_generations(db, "Small", settings) is None  # evaluated to the end, not refused
    assert db.scalar("SELECT sealed FROM generations WHERE generation_id = 'Small/1'") is True


def _import_file(db: Store, candidate: str) -> bytes:
    """An import file (JSON Lines) of ``candidate``'s stored reviews, undated: dated by the import."""
    rows = db.rows("SELECT paper_id, text FROM generations WHERE candidate = ? ORDER BY paper_id", [candidate])
    return "".join(json.dumps({"paper_id": r["paper_id"], "review": r["text"]}) + "\n" for r in rows).encode()


def test_an_imported_file_is_read_too_and_its_flagged_reviews_do_not_count_as_sealed(tmp_path: Path) -> None:
    from grebench.bench import import_reviews
    from grebench.submissions import near_copies_of_import

    def near(name: str) -> Callable[[], Any]:
        return lambda: check_copies(db, name, settings, near_only=True)

    db = _build(_unworded)
    db.con.execute("UPDATE papers SET reviews_public_at = ? WHERE paper_id LIKE '%-disguised'",
                   [utcnow() + timedelta(days=30)])  # the disguises' own reviews are due: an import now is sealed
    settings = load_settings(env={"GREBENCH_DATA_DIR": str(tmp_path)})
    data = _import_file(db, "Paraphraser")
    summary = import_reviews(db, settings, "Uploaded", data, {"model": "m"}, source="upload")
    assert summary["sealed"] == 4
    after = near_copies_of_import(db, summary, "offline", near("Uploaded"))
    unsealed = {r["paper_id"] for r in db.rows("SELECT paper_id FROM generations WHERE candidate = 'Uploaded' AND "
                                               "NOT sealed")}
    assert unsealed and after["sealed"] == 4 - len(unsealed)
    assert after["contaminated"] == summary["contaminated"] + len(unsealed)  # no trusted cutoff: nothing else clean
    assert any("no longer count as sealed" in w and "near-paper copy check" in w for w in after["warnings"])
    # the same file again changes nothing, and the marks stand
    again = near_copies_of_import(db, import_reviews(db, settings, "Uploaded", data, {"model": "m"}, source="upload"),
                                  "offline", near("Uploaded"))
    assert not again["changed"] and (again["sealed"], again["contaminated"]) == (after["sealed"],
                                                                              after["contaminated"])
    reseal(db)
    assert {r["paper_id"] for r in db.rows("SELECT paper_id FROM generations WHERE candidate = 'Uploaded' AND "
                                           "NOT sealed")} == unsealed


def test_when_the_check_cannot_run_an_imported_file_counts_as_unsealed(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from grebench.bench import import_reviews
    from grebench.submissions import _nearcopy, near_copies_of_import

    db = _build()
    db.con.execute("UPDATE papers SET reviews_public_at = ? WHERE paper_id LIKE '%-disguised'",
                   [utcnow() + timedelta(days=30)])
    settings = load_settings(env={"GREBENCH_DATA_DIR": str(tmp_path)})
    summary = import_reviews(db, settings, "Uploaded", _import_file(db, "Elsewhere"), {"model": "m"}, source="up")
    assert summary["sealed"] == 4

    def broken(*_: object, **__: object) -> None:
        raise ConnectionError("the evaluation LM's server is down")

    monkeypatch.setattr(_nearcopy, "with_near_copies", broken)  # the LM the check builds fails
    after = near_copies_of_import(db, summary, "offline",
                                  lambda: check_copies(db, "Uploaded", settings, near_only=True))
    assert after["sealed"] == 0 and after["contaminated"] == summary["contaminated"] + 4
    assert any("the near-paper copy check failed" in w and "server is down" in w for w in after["warnings"])
    assert db.scalar("SELECT count(*) FROM generations WHERE candidate = 'Uploaded' AND sealed") == 0
    assert reseal(db) == 0  # never sealed again by the pipeline
    lines = [r["detail"] for r in db.rows("SELECT detail FROM board_changes WHERE subject = 'Uploaded'")]
    assert any("4 review(s) of Uploaded count as written with public reviews in view (4 had counted as sealed): the "
               "near-paper copy check under offline could not read them" in line for line in lines), lines

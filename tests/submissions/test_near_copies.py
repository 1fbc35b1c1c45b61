"""Issue 62, item 3: a review of an unlinked disguised resubmission that carries its earlier version's public reviews
is not counted sealed unchecked (the near-paper copy check, offline estimator, bundled ICLR 2026 papers)."""

from __future__ import annotations

import random
import re
from datetime import timedelta
from pathlib import Path

import pytest

from grebench.ingest import bundled_source
from grebench.settings import load_settings
from grebench.store import PaperRecord, Store, open_store, utcnow
from grebench.submissions import check_copies
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


@pytest.fixture(scope="module")
def store() -> Store:
    """70 ICLR 2026 papers with their public reviews, and disguised resubmissions of the first 4 (title and abstract
    synonymised, under review, not linked); three candidates review the disguises."""
    records = [p for p in bundled_source("iclr2026").fetch() if isinstance(p, PaperRecord) and len(p.reviews) >= 2]
    records = records[:70]
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
        stand_in = records[-1 - k].reviews[0].text
        public = paper.reviews_public_at
        assert public is not None
        for name, text, made in (("Paraphraser", _paraphrase(paper, stand_in, 0.5), utcnow()),
                                 ("Early", _paraphrase(paper, stand_in, 0.5), public - timedelta(days=1)),
                                 ("Elsewhere", stand_in, utcnow())):
            db.con.execute("INSERT INTO generations (generation_id, candidate, paper_id, prompt_version, params_json, "
                           "status, text, generated_at, sealed) VALUES (?, ?, ?, 'v1', '{}', 'ok', ?, ?, true)",
                           [f"{name}/{paper.paper_id}", name, f"{paper.paper_id}-disguised", text, made])
    return db


def test_a_paraphrase_of_the_earlier_versions_reviews_is_refused_naming_that_paper(store: Store,
                                                                                  tmp_path: Path) -> None:
    assert load_settings(env={"GREBENCH_DATA_DIR": str(tmp_path)}).submissions.near_copy_estimator == ""  # off
    settings = load_settings(env={"GREBENCH_DATA_DIR": str(tmp_path), "GREBENCH_NEAR_COPY_ESTIMATOR": "offline"})
    check = check_copies(store, "Paraphraser", settings)
    near = getattr(check, "near_copies", ())
    assert check.flagged and len(near) >= 3, check
    for found in near:  # each names its own disguise's original, and when its reviews became public
        original = found.paper_id.removesuffix("-disguised")
        assert f"reviews of paper {original} (ICLR 2026, public since " in found.detail, found.detail
        assert "possibly an earlier version of this paper" in found.detail
    assert "near-paper copy check under offline" in check.summary()
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

"""The exam of an LLM judge stops once the judge cannot pass, and no judge's verdict differs from the full exam's.

Judges here are small deterministic stand-ins (answers drawn from a seeded hash of the pair), so that thousands of
exams run in seconds; the real local judge's exam runs in tests/panel/test_local_judge.py.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass, field

import pytest

from grebench.panel._data import VenueData
from grebench.panel._exam import (
    ExamSets,
    certainly_fails,
    decided,
    exam_size,
    examine,
    examine_panel,
    grade,
    self_preference,
)
from grebench.panel._judges import LLM_JUDGE, REFERENCE_JUDGE, Judge, PaperView, ReviewView, Verdict
from grebench.progress import NoProgress


@dataclass
class Stand(Judge):
    """A judge that picks the first review shown with probability ``first``, else the better one (the review's
    number, its quality) with probability ``skill``, else a coin; a seeded hash of the pair makes it deterministic.
    ``asked`` counts distinct questions, as a model judge's cached answers are asked once."""

    name: str
    kind: str
    first: float
    skill: float
    seed: int = 0
    family: str | None = None
    description: str = ""
    seen: set[tuple[str, str, str]] = field(default_factory=set)

    @property
    def asked(self) -> int:
        return len(self.seen)

    def compare(self, paper: PaperView, a: ReviewView, b: ReviewView) -> Verdict:
        self.seen.add((paper.paper_id, a.text, b.text))
        rng = random.Random(f"{self.seed}:{self.name}:{paper.paper_id}:{a.text}:{b.text}")
        if rng.random() < self.first:
            pick = "one"
        elif rng.random() < self.skill:
            pick = "one" if int(a.text.split()[-1]) >= int(b.text.split()[-1]) else "two"
        else:
            pick = rng.choice(("one", "two"))
        return Verdict(pick, 0.5 + 0.5 * rng.random())


def _sets(rng: random.Random, pairs: int) -> ExamSets:
    """Consistency, easy and hard pairs of reviews of random quality; pertinence pairs whose first review (RA) is
    the better one mostly, as an on-topic review is."""
    def item(i: int, ra: int = 0) -> tuple[PaperView, ReviewView, ReviewView]:
        paper = PaperView(f"p{i}", f"paper {i}")
        return paper, ReviewView(f"review {rng.randrange(ra, 100)}"), ReviewView(f"review {rng.randrange(100 - ra)}")

    half = max(1, pairs // 2)
    return ExamSets([item(i) for i in range(pairs)], [item(100 + i, ra=40) for i in range(pairs)],
                    [item(200 + i) for i in range(half)], [item(300 + i) for i in range(half)])


def _verdicts(results: list[dict[str, object]]) -> dict[str, bool]:
    graded, _, _ = grade(results)  # type: ignore[arg-type]
    return {str(r["judge"]): bool(r["passed"]) for r in graded}


def test_a_judge_that_always_picks_the_first_review_is_failed_after_a_few_pairs() -> None:
    sets = _sets(random.Random(1), 12)
    refs = [Stand("sound", REFERENCE_JUDGE, 0.0, 1.0), Stand("position", REFERENCE_JUDGE, 1.0, 0.0)]
    biased = Stand("first", LLM_JUDGE, 1.0, 0.0)
    results = examine_panel([*refs, biased], sets, sets, NoProgress())
    mine = results[-1]
    # the others' mean consistency is 0.5: after 4 pairs it could still end at 8/12, after 8 at 4/12 at most; and
    # neither other judge's verdict turns on its pertinence, which is not asked
    assert [r["p_c"] for r in results[:2]] == [1.0, 0.0] and results[0]["p_p"] > 0.8
    assert mine["stopped"] and mine["details"]["asked"] == {"consistency": 8, "pertinence": 0}
    assert biased.asked == 16 < exam_size(sets)
    graded, eta_c, _ = grade(results)
    row = graded[-1]
    assert not row["passed"] and row["weight"] == 0.0 and row["p_c"] == 0.0 and row["p_p"] is None
    assert row["failed"] == ["consistency", "pertinence not asked", "self-confidence not asked"]
    assert eta_c is not None
    # the full exam, asked of a fresh copy of the same judge, fails it too, and passes the same other judges
    full = [examine(j, sets) for j in [*refs, Stand("first", LLM_JUDGE, 1.0, 0.0)]]
    assert _verdicts(full) == {"sound": True, "position": False, "first": False}
    assert _verdicts(full) == _verdicts(results)


def test_a_sound_llm_judge_is_asked_the_whole_exam_and_can_pass() -> None:
    sets = _sets(random.Random(2), 12)
    judge = Stand("sound-llm", LLM_JUDGE, 0.0, 1.0)
    results = examine_panel([Stand("position", REFERENCE_JUDGE, 1.0, 0.0), judge], sets, sets, NoProgress())
    assert not results[1].get("stopped") and judge.asked == exam_size(sets)
    assert results[1]["p_s"] is not None and _verdicts(results)["sound-llm"]


def test_no_verdict_differs_from_the_full_exam_across_many_random_panels(caplog: pytest.LogCaptureFixture) -> None:
    """The rule is about what the remaining answers *could* be, so it holds for any judges: 400 random panels of
    reference and LLM judges of every bias, including several LLM judges whose stopped shares move the thresholds
    the others are held to (those are asked the rest)."""
    caplog.set_level(logging.INFO, logger="grebench.panel._exam")
    stopped = saved = 0
    for seed in range(400):
        rng = random.Random(seed)
        sets = _sets(rng, rng.choice((2, 5, 8, 12)))

        def panel(seed: int = seed) -> list[Stand]:
            r = random.Random(seed)
            judges = [Stand(f"ref{i}", REFERENCE_JUDGE, r.random() * r.random(), r.random(), seed) for i in range(3)]
            return judges + [Stand(f"llm{i}", LLM_JUDGE, r.choice((0.0, 0.3, 0.8, 1.0)), r.random(), seed)
                             for i in range(r.choice((1, 2, 3)))]

        early_judges, full_judges = panel(), panel()
        early = examine_panel(early_judges, sets, sets, NoProgress())
        full = [examine(j, sets) for j in full_judges]
        assert _verdicts(early) == _verdicts(full), seed
        stopped += sum(bool(r.get("stopped")) for r in early)
        saved += sum(f.asked - e.asked for e, f in zip(early_judges, full_judges, strict=True))
    asked_again = sum("asked the rest" in r.getMessage() for r in caplog.records)
    assert stopped > 50 and saved > 0 and asked_again > 0  # it stops exams, saves answers, and falls back


def test_certainly_fails_and_decided_read_the_bounds() -> None:
    sure = {"a": ((1.0, 1.0), (1.0, 1.0)), "b": ((0.0, 0.2), (0.0, 1.0))}
    assert certainly_fails("b", sure) and not certainly_fails("a", sure) and decided("a", sure)
    # b might still end at 1.0 and 1.0: whether a passes then depends on where b ends
    open_ = {"a": ((0.6, 0.6), (0.6, 0.6)), "b": ((0.0, 1.0), (0.0, 1.0))}
    assert not certainly_fails("b", open_) and not decided("a", open_)


def test_self_preference_is_measured_only_for_judges_that_may_vote() -> None:
    paper = PaperView("p0", "paper 0")
    gens = {c: ReviewView(f"{c} review {q}", candidate=c) for c, q in (("mine", 3), ("human", 9), ("generic", 1))}
    data = VenueData("V", {"p0": paper}, {"mine": "fam", "human": None, "generic": None},
                     {"mine": "llm", "human": "human", "generic": "control"}, {"p0": gens})
    judge = Stand("j", LLM_JUDGE, 0.0, 1.0, family="fam")
    other = Stand("ref", REFERENCE_JUDGE, 0.0, 1.0)
    skipped = self_preference([judge, other], data, seed=1, voting=lambda name: False)
    assert skipped["j"]["bias"] is None and skipped["j"]["instances"] == 0 and "failed the exam" in \
        skipped["j"]["not_measured"]
    assert judge.asked == 0 and other.asked == 0
    measured = self_preference([judge, other], data, seed=1, voting=lambda name: True)
    assert measured["j"]["instances"] == 1 and measured["j"]["bias"] is not None and judge.asked == 4

"""A third-party plugin as another package would ship it: a toy venue source, estimator, control and judge.

Loaded only through the ``grebench`` entry-point group of a test distribution (tests/plugins/test_entry_points.py);
grebench itself knows nothing of it.  Each part is one registration.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

from grebench.bench.controls import NOT_REWARDED, ControlInput, register_control
from grebench.ingest import SOURCES, SourceFailure
from grebench.scoring import LogprobRequest, LogprobResult
from grebench.scoring.estimators import ESTIMATORS, EstimatorContext
from grebench.scoring.panel import JUDGES, JudgeContext, PaperView, ReviewView, Verdict
from grebench.store import PaperRecord, ReviewRecord

TOPICS = ("graphs", "vision", "speech", "robots", "proteins", "markets")
WORDS = re.compile(r"[a-z]+")


class ToySource:
    """Six papers of one toy venue, three reviews each, every review about its paper's topic."""

    name = "toy"

    def fetch(self, since: datetime | None = None, limit: int | None = None) -> Iterator[PaperRecord | SourceFailure]:
        for i, topic in enumerate(TOPICS[:limit]):
            pid = f"toy{i}"
            reviews = [ReviewRecord(review_id=f"{pid}r{j}", paper_id=pid, kind="official_review",
                                    text=f"Strengths:\nThe {topic} experiments are convincing and clear.\n"
                                         f"Weaknesses:\nThe {topic} baselines are weak; review {j} wants more.",
                                    sections=[], content={"review": str(j)}, rating="6")
                       for j in range(3)]
            yield PaperRecord(paper_id=pid, venue_id="Toy.cc/2030/Conference", venue="Toy 2030", venue_year=2030,
                              title=f"Learning {topic}", abstract=f"We study {topic}.", source="toy",
                              reviews_public_at=datetime(2030, 1, 1), reviews=reviews)


@SOURCES.register("toy", spec="toy", summary="six toy papers (plugin)")
def make_source(arg: str, settings: Any) -> ToySource:
    return ToySource()


class ToyEstimator:
    """log P(target) = -1 per target word, +0.5 per target word also in the first review (a copy model)."""

    def __init__(self, bonus: float) -> None:
        self.bonus = bonus
        self.id = f"toy:bonus={bonus:g}"

    def logprobs(self, requests: Sequence[LogprobRequest]) -> list[LogprobResult]:
        out = []
        for r in requests:
            target = WORDS.findall(r.target.lower())
            seen = set(WORDS.findall((r.first_review or "").lower()))
            out.append(LogprobResult(-float(len(target)) + self.bonus * sum(w in seen for w in target), len(target)))
        return out


@ESTIMATORS.register("toy", spec="toy[:BONUS]", summary="a copy-counting toy model (plugin)")
def make_estimator(arg: str, context: EstimatorContext) -> ToyEstimator:
    return ToyEstimator(float(arg) if arg else 0.5)


@register_control("toy-shout", kind="manipulation", expected=NOT_REWARDED, source="human",
                  description="The human review in capitals (plugin).")
def shout(inp: ControlInput) -> str:
    return inp.require_human().upper()


class ToyJudge:
    """Prefers the longer review (a plugin judge: takes the exam like any other)."""

    name, kind, family, description = "toy-judge", "reference", None, "plugin judge"

    def compare(self, paper: PaperView, review_a: ReviewView, review_b: ReviewView) -> Verdict:
        a, b = len(review_a.text), len(review_b.text)
        return Verdict("tie" if a == b else "one" if a > b else "two", 0.6, "longer")


JUDGES.add("toy-judge", lambda context: ToyJudge(), summary="plugin judge")


def _unused(context: JudgeContext) -> None:  # keeps the import used for type checkers reading this file
    return None

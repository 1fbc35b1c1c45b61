"""A third-party plugin as another package would ship it: a toy venue source, estimator, control, judge, candidate
kind, judge kind and metric.

Loaded only through the ``grebench`` entry-point group of a test distribution (tests/plugins/test_entry_points.py);
grebench itself knows nothing of it.  Each part is one registration, and what the rest of the product must know
about it (an estimator's label, a candidate kind's role, tag and colour, a judge kind's ability to debate, a
metric's label and synopsis) is said in that registration.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import date, datetime
from typing import Any

from grebench.bench import CANDIDATE_KINDS, Candidate
from grebench.bench.controls import NOT_REWARDED, ControlInput, register_control
from grebench.ingest import SOURCES, SourceFailure
from grebench.panel import JUDGE_KINDS, JUDGES, Judge, JudgeContext, PaperView, ReviewView, Verdict
from grebench.scoring import METRICS, LogprobRequest, LogprobResult, Metric, SynopsisInputs
from grebench.scoring.estimators import ESTIMATORS, EstimatorContext
from grebench.settings import Settings
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


@ESTIMATORS.register("toy", spec="toy[:BONUS]", summary="a copy-counting toy model (plugin)",
                     label=lambda estimator_id: f"toy copy model ({estimator_id.partition('=')[2]} per copied word)")
def make_estimator(arg: str, context: EstimatorContext) -> ToyEstimator:
    return ToyEstimator(float(arg) if arg else 0.5)


@register_control("toy-shout", kind="manipulation", expected=NOT_REWARDED, source="human",
                  description="The human review in capitals (plugin).")
def shout(inp: ControlInput) -> str:
    return inp.require_human().upper()


class ToyJudge(Judge):
    """Prefers the longer review (a plugin judge: takes the exam like any other)."""

    name, kind, family, description = "toy-judge", "reference", None, "plugin judge"

    def compare(self, paper: PaperView, review_a: ReviewView, review_b: ReviewView) -> Verdict:
        a, b = len(review_a.text), len(review_b.text)
        return Verdict("tie" if a == b else "one" if a > b else "two", 0.6, "longer")


JUDGES.add("toy-judge", lambda context: ToyJudge(), summary="plugin judge")


# -- a candidate kind: reviews from a model served by the plugin itself on 127.0.0.1 (OpenAI-compatible) ---------
class ToyWriterKind:
    """``kind = "toy-writer"``: a reviewer this plugin serves on loopback for the bench stage."""

    name = "toy-writer"

    def parse(self, raw: dict[str, Any], where: str, settings: Settings) -> Candidate:
        cutoff = raw.get("cutoff")
        return Candidate(name=raw["name"], kind=self.name, model="openai/toy-writer",
                         cutoff=cutoff if isinstance(cutoff, date) else date.fromisoformat(str(cutoff)),
                         params={"temperature": 0, "max_tokens": 512, "context_tokens": 8192})

    @contextmanager
    def serve(self, candidates: list[Candidate], settings: Settings) -> Iterator[list[Candidate]]:
        from grebench.llm import local_endpoints
        from tests.fakes.openai_server import FakeOpenAIServer

        server = FakeOpenAIServer().start()  # speaks the real protocol: grebench's own client calls it
        try:
            with local_endpoints([server.url]):
                yield [replace(c, api_base=server.url, endpoint_id="toy-writer") for c in candidates]
        finally:
            server.stop()


CANDIDATE_KINDS.add("toy-writer", ToyWriterKind(), spec="toy-writer", summary="a loopback toy reviewer (plugin)",
                    tag="toy writer", colour="#aa00aa")


# -- a judge kind whose judges debate ---------------------------------------------------------------------------
@dataclass
class ToyDebater(Judge):
    """Prefers the longer (or shorter) review; in a debate it keeps its view."""

    name: str
    prefers: str = "longer"
    kind: str = "llm"
    judge_kind: str = "toy-debater"
    family: str | None = None
    description: str = "plugin debating judge"

    def compare(self, paper: PaperView, review_a: ReviewView, review_b: ReviewView) -> Verdict:
        a, b = len(review_a.text), len(review_b.text)
        if self.prefers == "shorter":
            a, b = b, a
        return Verdict("tie" if a == b else "one" if a > b else "two", 0.6, f"{self.prefers} review")

    def debate(self, paper: PaperView, review_a: ReviewView, review_b: ReviewView,
               others: Sequence[tuple[str, Verdict]]) -> Verdict:
        return self.compare(paper, review_a, review_b)


class ToyDebaterKind:
    """``kind = "toy-debater"`` in a ``[[judges]]`` table."""

    name = "toy-debater"

    def parse(self, raw: dict[str, Any], where: str, context: JudgeContext) -> ToyDebater:
        return ToyDebater(raw["name"], str(raw.get("prefers", "longer")))


JUDGE_KINDS.add("toy-debater", ToyDebaterKind(), spec="toy-debater", summary="plugin debating judge", debates=True)


# -- a metric: the PMI given the paper's title -------------------------------------------------------------------
def title_synopses(inputs: SynopsisInputs) -> dict[str, str | None]:
    titles = {r["paper_id"]: r["title"] for r in inputs.store.rows("SELECT paper_id, title FROM papers")}
    return {p: titles[p] for p in inputs.papers if titles.get(p)}


METRICS.add("toy-title", Metric("toy-title", "Toy GEM-S (title)", "the paper's title", title_synopses))

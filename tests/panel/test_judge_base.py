"""Every judge subclasses :class:`grebench.panel.Judge` (issue 49): the panel reads its attributes instead of probing
with getattr, and a registered or configured judge that is not one is refused with what made it."""

from __future__ import annotations

from typing import Any

import pytest

from grebench.panel import Judge, PaperView, ReviewView, Verdict
from grebench.panel._judges import JUDGE_KINDS, JUDGES, JudgeContext, checked_judge
from grebench.panel._llm_judge import parse_judges
from grebench.panel._run import build_judges
from grebench.settings import Settings

PAPER = PaperView("p1", "Sparse attention", "We propose sparse attention kernels.")


class Plain:
    name, kind, family, description = "plain", "reference", None, "not a Judge subclass"

    def compare(self, paper: PaperView, a: ReviewView, b: ReviewView) -> Verdict:
        return Verdict("one", 1.0)


class Flaky(Judge):
    name, kind = "flaky", "reference"

    def compare(self, paper: PaperView, a: ReviewView, b: ReviewView) -> Verdict:
        if a.text == "bad":
            raise RuntimeError("no answer")
        return Verdict("one", 0.9)


def test_the_base_gives_the_attributes_the_panel_reads_and_keeps_a_failing_pair_as_its_error() -> None:
    judge = Flaky()
    assert (judge.model, judge.judge_kind, judge.needs_gem, judge.calls_made, judge.cached) == (None, None, False,
                                                                                              0, 0)
    answers = judge.compare_many([(PAPER, ReviewView("good"), ReviewView("x")), (PAPER, ReviewView("bad"),
                                                                                 ReviewView("x"))])
    assert answers[0] == Verdict("one", 0.9) and isinstance(answers[1], RuntimeError)


def test_a_judge_that_is_not_a_judge_subclass_is_refused_naming_what_made_it(settings: Settings) -> None:
    with pytest.raises(TypeError, match=r"judge 'plain' .* made a Plain, which does not subclass"):
        checked_judge(Plain(), "judge 'plain' (a plugin)")
    JUDGES.add("plain-plugin", lambda context: Plain(), summary="a judge of the wrong type")
    try:
        with pytest.raises(TypeError, match=r"judge 'plain-plugin' \(.*\) made a Plain"):
            build_judges(settings, None, None, local_judges=())  # type: ignore[arg-type]
    finally:
        JUDGES._entries.pop("plain-plugin")


def test_a_configured_kind_whose_judge_is_not_a_judge_is_refused(settings: Settings) -> None:
    class PlainKind:
        name = "plain-kind"

        def parse(self, raw: dict[str, Any], where: str, context: JudgeContext) -> Any:
            return Plain()

    JUDGE_KINDS.add("plain-kind", PlainKind())
    try:
        context = JudgeContext(settings, None, None, local_judges=())  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="judge kind 'plain-kind' \\(table 'x'\\) made a Plain"):
            parse_judges([{"name": "x", "kind": "plain-kind", "model": "openai/x"}], context)
    finally:
        JUDGE_KINDS._entries.pop("plain-kind")

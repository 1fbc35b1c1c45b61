"""Debate with scripted judges, the reference judges' answers, and machine metrics."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from grebench.panel import (
    GemJudge,
    Judge,
    LengthJudge,
    OverlapJudge,
    PaperView,
    PositionJudge,
    ReviewView,
    TfIdf,
    Verdict,
    measure,
    run_debate,
)
from grebench.panel._exam import ask
from grebench.settings import Settings
from grebench.store import Store

PAPER = PaperView("p1", "Sparse attention kernels", "We propose sparse attention kernels for long documents.")


class Scripted:
    """A debater that answers from a script, one entry per round (the last one repeats)."""

    def __init__(self, name: str, script: Sequence[str]) -> None:
        self.name, self.script, self.seen = name, list(script), []

    def debate(self, paper: PaperView, a: ReviewView, b: ReviewView, others: Sequence[tuple[str, Verdict]]) -> Verdict:
        self.seen.append(list(others))
        pref = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        return Verdict(pref, 0.9, f"{self.name} says {pref}")


def _initial(**prefs: str) -> dict[str, Verdict]:
    return {name: Verdict(p, 0.8, f"initial {p}") for name, p in prefs.items()}


def test_debate_resolves_when_a_judge_changes_its_mind() -> None:
    stubborn, convinced = Scripted("a", ["one"]), Scripted("b", ["one"])
    result = run_debate([stubborn, convinced], PAPER, ReviewView("x"), ReviewView("y"), _initial(a="one", b="two"), 3)
    assert result.resolved and {v.preference for v in result.final.values()} == {"one"}
    assert [(r, n) for r, n, _ in result.history] == [(1, "a"), (1, "b")]  # stopped after one round
    assert convinced.seen[0] == [("a", Verdict("one", 0.8, "initial one"))]  # saw the other's verdict and reason


def test_debate_that_never_converges_is_flagged_after_d_rounds() -> None:
    a, b, c = Scripted("a", ["one"]), Scripted("b", ["two", "one"]), Scripted("c", ["two"])
    result = run_debate([a, b, c], PAPER, ReviewView("x"), ReviewView("y"), _initial(a="one", b="two", c="two"), 2)
    assert not result.resolved
    assert max(r for r, _, _ in result.history) == 2 and len(result.history) == 6
    assert result.final["b"].preference == "one" and result.final["c"].preference == "two"


def test_agreeing_judges_do_not_debate() -> None:
    a = Scripted("a", ["two"])
    result = run_debate([a, Scripted("b", ["two"])], PAPER, ReviewView("x"), ReviewView("y"),
                        _initial(a="one", b="one"), 3)
    assert result.resolved and result.history == [] and a.seen == []


def test_reference_judges() -> None:
    long, short = ReviewView("word " * 30), ReviewView("word " * 10)
    assert PositionJudge().compare(PAPER, short, long).preference == "one"
    assert PositionJudge().compare(PAPER, long, short).preference == "one"
    verdict = LengthJudge().compare(PAPER, short, long)
    assert verdict.preference == "two" and verdict.confidence == pytest.approx(20 / 30)
    on_topic = ReviewView("The sparse attention kernels handle long documents well.")
    off_topic = ReviewView("The molecular graph network predicts energies of molecules, and more molecules, well.")
    overlap = OverlapJudge(TfIdf([PAPER.abstract, "graph networks for molecules and energies", "audio diffusion"]))
    assert overlap.compare(PAPER, off_topic, on_topic).preference == "two"
    assert overlap.compare(PAPER, on_topic, off_topic).preference == "one"


def test_gem_judge_uses_common_references_and_abstains_without_scores() -> None:
    scores = {"good": {"r1": 5.0, "r2": 3.0}, "bad": {"r1": 1.0, "r2": 1.0}, "ref1": {"r2": 0.0}}
    judge = GemJudge(lambda _pid, review: scores.get(review.text))
    verdict = judge.compare(PAPER, ReviewView("bad"), ReviewView("good"))
    assert verdict.preference == "two"
    assert verdict.confidence == pytest.approx(1 - 2.718281828459045 ** (-3.0 / 5))  # margin 4 - 1 = 3 nats
    # a reference review is compared on the other references only (never against itself)
    assert judge.compare(PAPER, ReviewView("good"), ReviewView("ref1", source_review_id="r1")).reason.endswith(
        "over 1 reference(s)")
    assert judge.compare(PAPER, ReviewView("good"), ReviewView("unknown")) == Verdict(
        "tie", 0.0, "no GEM score for both reviews on a common reference")


def test_family_guard_in_ask() -> None:
    class FamilyJudge(Judge):
        name, kind, family, description = "j", "llm", "x", ""

        def __init__(self) -> None:
            self.calls: list[str] = []

        def compare(self, paper: PaperView, a: ReviewView, b: ReviewView) -> Verdict:
            self.calls.append(a.text + b.text)
            return Verdict("one", 1.0)

    judge = FamilyJudge()
    items = [(PAPER, ReviewView("a", family="x"), ReviewView("b")), (PAPER, ReviewView("c"), ReviewView("d"))]
    assert ask(judge, items) == [None, Verdict("one", 1.0)]
    assert judge.calls == ["cd"]


def test_machine_metrics() -> None:
    review = ("<summary>Sparse attention kernels for documents.</summary>\n<strengths>1. Fast kernels.</strengths>\n"
              "<weaknesses>1. It is unclear.</weaknesses>\nWhy not compare more?")
    m = measure(review, PAPER.title, PAPER.abstract, common=["documents"])
    assert m["words"] == len(review.split())
    assert m["section_coverage"] == 1.0
    assert 0 < m["specificity"] < 1  # "It is unclear." names no paper term
    assert m["abstract_overlap"] == pytest.approx(4 / 5)  # sparse, attention, kernels, documents of 5 (long missing)
    bare = measure("Nice work.", PAPER.title, PAPER.abstract)
    assert bare["section_coverage"] == 0.0 and bare["specificity"] == 0.0 and bare["abstract_overlap"] == 0.0


def test_verdicts_debate_llm_disagreements_and_flag_the_unresolved(store: Store, settings: Settings) -> None:
    from grebench.panel._data import load_venue
    from grebench.panel._run import _pairs, _verdicts
    from grebench.store import utcnow
    from tests.panel.builders import VENUE, build_venue

    build_venue(store)
    data = load_venue(store, VENUE)
    pairs = [p for p in _pairs(data, 0, 1) if p[0] in ("paper0", "paper1")]
    answers = {"llm-a": "one", "llm-b": "two", "llm-c": "two", "overlap": "one"}
    for pid, a, b in pairs:
        gens = data.generations[pid]
        for judge, pref in answers.items():
            for order in ("ab", "ba"):
                flipped = pref if order == "ab" else {"one": "two", "two": "one"}[pref]
                store.con.execute("INSERT INTO panel_votes VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                  [VENUE, pid, a, b, gens[a].generation_id, gens[b].generation_id, judge, order,
                                   flipped, 0.9, "r", utcnow()])

    class LLM(Scripted):
        kind, judge_kind, family, description = "llm", "llm", None, ""

    # llm-b is convinced in round 1 on paper0; llm-c never moves: paper0 pairs stay split -> flagged
    judges = {"llm-a": LLM("llm-a", ["one"]), "llm-b": LLM("llm-b", ["one"]), "llm-c": LLM("llm-c", ["two"]),
              "overlap": OverlapJudge(TfIdf(["x"]))}
    weights = {"llm-a": 1.0, "llm-b": 1.0, "llm-c": 1.0, "overlap": 1.0}
    verdicts = _verdicts(store, settings.replace(debate_rounds=2), data, judges, weights, pairs)
    assert len(verdicts) == len(pairs) and all(v["debated"] and v["flagged"] for v in verdicts)
    # final: a, b, overlap for a; c against -> score (3 - 1) / 4
    assert {v["score"] for v in verdicts} == {0.5}
    rounds = store.rows("SELECT round, judge, preference FROM debates WHERE paper_id = 'paper0' AND candidate_a = ? "
                        "AND candidate_b = ? ORDER BY round, judge", [pairs[0][1], pairs[0][2]])
    assert [(r["round"], r["judge"]) for r in rounds] == [(1, "llm-a"), (1, "llm-b"), (1, "llm-c"),
                                                         (2, "llm-a"), (2, "llm-b"), (2, "llm-c")]
    # without the stubborn judge the debate resolves in one round and nothing is flagged
    del weights["llm-c"]
    resolved = _verdicts(store, settings, data, judges, weights, pairs)
    assert all(v["debated"] and not v["flagged"] and v["score"] == 1.0 for v in resolved)

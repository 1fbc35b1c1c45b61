"""ScaleEval-style debate for pairs on which the qualified LLM judges disagree.

Each round, every debating judge sees the other judges' current verdicts and reasons and answers again (it may keep
or change its mind).  The debate ends as soon as they agree, or after ``rounds`` rounds; a pair still split then is
flagged for human adjudication.  Verdicts here are always relative to (a, b): "one" means review a is better.
Reference judges never debate: they cannot read an argument.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from grebench.panel._judges import PaperView, ReviewView, Verdict


class Debater(Protocol):
    """A judge that can reconsider after reading the others' verdicts."""

    name: str

    def debate(self, paper: PaperView, review_a: ReviewView, review_b: ReviewView,
               others: Sequence[tuple[str, Verdict]]) -> Verdict:
        """A new verdict on (a, b), shown in that order."""
        ...


@dataclass
class DebateOutcome:
    """Final verdicts, every round's answers, and whether the judges ended up agreeing."""

    final: dict[str, Verdict]
    history: list[tuple[int, str, Verdict]] = field(default_factory=list)
    resolved: bool = False


def disagree(verdicts: Mapping[str, Verdict]) -> bool:
    """Whether at least two judges gave different preferences."""
    return len({v.preference for v in verdicts.values()}) > 1


def run_debate(debaters: Sequence[Debater], paper: PaperView, review_a: ReviewView, review_b: ReviewView,
               initial: Mapping[str, Verdict], rounds: int) -> DebateOutcome:
    """Debate up to ``rounds`` rounds; a judge whose call fails keeps its previous verdict."""
    current = {d.name: initial[d.name] for d in debaters if d.name in initial}
    outcome = DebateOutcome(final=dict(current), resolved=not disagree(current))
    for round_no in range(1, max(0, rounds) + 1):
        if not disagree(current):
            break
        snapshot = dict(current)
        for judge in debaters:
            if judge.name not in snapshot:
                continue
            others = [(name, v) for name, v in snapshot.items() if name != judge.name]
            try:
                verdict = judge.debate(paper, review_a, review_b, others)
            except Exception:  # a failed call: the judge stands by its verdict this round
                verdict = snapshot[judge.name]
            current[judge.name] = verdict
            outcome.history.append((round_no, judge.name, verdict))
    outcome.final = dict(current)
    outcome.resolved = not disagree(current)
    return outcome

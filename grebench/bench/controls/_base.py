"""What a control is, and the registry of controls.

A control is a review whose effect on the metric is known in advance: a degradation of the human candidate review
(the metric must penalise it), or a manipulation a gamer would try (the metric must not reward it).  Each control
is one object in :data:`CONTROLS` saying what it does, which way the metric must move, whether it needs an LLM, and
how to build it; the bench writes it, the validation reads its expectation, the judge exam uses the ``easy`` ones
(clearly worse than a real review: the self-confidence test) and the ``pertinence`` ones (restated paper content
that a judge must not prefer over the real review it was made from, or over a real review).
A new control is one module with one registration::

    @register_control("my-control", kind="manipulation", expected=NOT_REWARDED, source="human",
                      description="...")
    def my_control(inp: ControlInput) -> str: ...

and a line in the registry's built-in modules (or a plugin module in the ``grebench`` entry-point group).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from grebench.bench._prompt import PaperInput
from grebench.registry import Registry

PENALISED = "penalised"
NOT_REWARDED = "not rewarded"
PENALISED_OR_NEUTRAL = "penalised or neutral"
EXPECTATIONS = (PENALISED, NOT_REWARDED, PENALISED_OR_NEUTRAL)
Messages = Sequence[tuple[str, str]]


class ControlSkip(Exception):
    """A control cannot be built for this paper (no abstract, no human review, ...); the reason is recorded."""


@dataclass(frozen=True)
class ControlInput:
    """What a control may use for one paper: the paper, the human candidate review, another paper's review."""

    paper: PaperInput
    human: str | None = None
    human_review_id: str | None = None
    other: str | None = None          # the human candidate review of a different paper (seeded derangement)
    other_review_id: str | None = None
    seed: int = 0
    references: tuple[tuple[str, str], ...] = ()  # (review id, text) of the paper's references (the public reviews
    #                                                the human review is scored against)

    def rng(self, name: str) -> random.Random:
        """A random generator seeded by the control's name, the paper and the run seed (same inputs, same text)."""
        return random.Random(f"{self.seed}:{name}:{self.paper.paper_id}")

    def reference(self, name: str) -> tuple[str, str] | None:
        """One of the paper's references with a text, (review id, text), picked by the control's seeded generator."""
        usable = sorted((rid, text) for rid, text in self.references if text)
        return self.rng(name).choice(usable) if usable else None

    def require_human(self) -> str:
        """The human candidate review, or :class:`ControlSkip`."""
        if self.human is None:
            raise ControlSkip("human candidate review has no text")
        return self.human


@dataclass(frozen=True)
class Control:
    """One control.  ``build`` makes its text without an LLM; ``prompt`` makes the messages for ``control_model``.

    ``source``: which review the text is derived from — ``human`` (the held-out human candidate review), ``other``
    (another paper's), ``reference`` (one of the paper's references: a control *meant* to leak, see
    ``reference-copy``; :meth:`ControlInput.reference` picks it) or ``None`` (the paper alone); the generation
    records it, and the scoring refuses any other control derived from one of its own references.
    """

    name: str
    kind: Literal["degradation", "manipulation"]
    expected: str
    description: str
    source: Literal["human", "other", "reference"] | None = None
    build: Callable[[ControlInput], str] | None = None
    prompt: Callable[[ControlInput], Messages] | None = None
    version: str = "control-v1"
    exam_role: Literal["easy", "pertinence"] | None = None
    paper_d: float | None = None      # the GEM paper's Cohen's d for GEM-S with Llama-3.1-8B (methods.md §4)
    default: bool = True              # written by every bench run (else only when named)
    core: bool = False                # in the core set a default CPU run checks (``validation = core``)
    needs_abstract: bool = False      # built from the paper's abstract: a paper without one gets none
    #: the core control this one replaces in the core set of papers without abstracts (GEM's: :func:`core_controls`)
    stands_in_for: str | None = None
    #: a floor of the board (issue 63): what the control is in words ("a review of another paper"); every contestant
    #: is tested against it (``vs_floor``), and a board says when a contestant cannot be told apart from it
    floor: str | None = None

    @property
    def needs_llm(self) -> bool:
        """Whether the control is written by ``control_model``."""
        return self.prompt is not None

    def source_review_id(self, inp: ControlInput) -> str | None:
        """The id of the review this control's text is derived from."""
        if self.source == "reference":
            picked = inp.reference(self.name)
            return picked[0] if picked else None
        return {"human": inp.human_review_id, "other": inp.other_review_id}.get(self.source or "")


CONTROLS: Registry[Control] = Registry("control", builtins=("grebench.bench.controls._paper",
                                                            "grebench.bench.controls._gaming",
                                                            "grebench.bench.controls._copy",
                                                            "grebench.bench.controls._padding"))


def core_controls(abstracts: bool = True) -> list[str]:
    """The core set (``validation = core``): the few controls a default run on a CPU checks, chosen for what each
    tells a reader (docs/scoring.md#the-core-controls); every default control runs with ``validation = full``.

    ``abstracts`` False: GEM's core set, for papers without abstracts (an archive of reviews only, like the GEM
    authors' ICLR 2023 release): the core controls that need no abstract, and those standing in for the ones that
    do (``keyword-stuffing-title`` for ``keyword-stuffing``)."""
    core = [e.obj for e in CONTROLS if e.obj.core]
    if abstracts:
        return [c.name for c in core]
    replaced = {c.name for c in core if c.needs_abstract}
    return [c.name for c in core if not c.needs_abstract] + \
        [e.name for e in CONTROLS if e.obj.stands_in_for in replaced and not e.obj.core]


def floor_controls() -> dict[str, str]:
    """The floor controls (registered with ``floor=``), name → what each is in words, in registration order: the
    reviews that carry no information about the paper, which every contestant must be told apart from."""
    return {e.name: e.obj.floor for e in CONTROLS if e.obj.floor}


def default_controls(llm: bool = True, abstracts: bool = True) -> list[str]:
    """Every control a bench writes unless named (``validation = full``); ``llm`` False leaves out those written
    by ``control_model`` (a bench without one skips them); ``abstracts`` False those built from the abstract."""
    return [e.name for e in CONTROLS if e.obj.default and (llm or not e.obj.needs_llm)
            and (abstracts or not e.obj.needs_abstract)]


def _check(kind: str, expected: str) -> None:
    if kind not in ("degradation", "manipulation"):
        raise ValueError(f"control kind must be degradation or manipulation, got {kind!r}")
    if expected not in EXPECTATIONS:
        raise ValueError(f"control expectation must be one of {EXPECTATIONS}, got {expected!r}")


def register_control(name: str, *, kind: Literal["degradation", "manipulation"], expected: str, description: str,
                     source: Literal["human", "other", "reference"] | None = None, version: str = "control-v1",
                     exam_role: Literal["easy", "pertinence"] | None = None, paper_d: float | None = None,
                     default: bool = True, core: bool = False, needs_abstract: bool = False,
                     stands_in_for: str | None = None, floor: str | None = None
                     ) -> Callable[[Callable[[ControlInput], str]], Callable[[ControlInput], str]]:
    """Decorator: register a control built without an LLM from its builder function."""
    _check(kind, expected)

    def decorate(build: Callable[[ControlInput], str]) -> Callable[[ControlInput], str]:
        CONTROLS.add(name, Control(name, kind, expected, description, source, build=build, version=version,
                                   exam_role=exam_role, paper_d=paper_d, default=default, core=core,
                                   needs_abstract=needs_abstract, stands_in_for=stands_in_for, floor=floor),
                     summary=description)
        return build

    return decorate


def register_llm_control(name: str, *, kind: Literal["degradation", "manipulation"], expected: str, description: str,
                         version: str, source: Literal["human", "other"] | None = None,
                         paper_d: float | None = None, needs_abstract: bool = False
                         ) -> Callable[[Callable[[ControlInput], Messages]], Callable[[ControlInput], Messages]]:
    """Decorator: register a control written by ``control_model`` from its prompt function."""
    _check(kind, expected)

    def decorate(prompt: Callable[[ControlInput], Messages]) -> Callable[[ControlInput], Messages]:
        CONTROLS.add(name, Control(name, kind, expected, description, source, prompt=prompt, version=version,
                                   paper_d=paper_d, needs_abstract=needs_abstract), summary=description)
        return prompt

    return decorate

"""A local model as an Auto-PRE judge: one typed decision per ordered pair, answered by a server grebench runs.

The model reads the paper (title and abstract) and the two reviews in the order shown, and answers the question
"which review is better?" with a probability for each option from one forward pass (``transformers serve``'s
``/v1/systemone``; no text is generated, so nothing in a review can steer a free-text answer's format).  The
verdict is the more probable option; its confidence is that option's probability (methods.md §5: the probability
of the answer, as for an API judge with log-probs).  There is no tie option: the exam's consistency test (both
orders) is what catches a judge that always picks the first or the second review shown.

The server (:class:`grebench.runtime.LocalServer`) is started only when a decision is not in the call cache, once
per checkpoint for the whole panel run (:class:`grebench.runtime.LocalServers`, as for local candidates), and
stopped when the panel stage ends.  It runs without continuous batching: transformers answers a decision with one
forward pass outside it, so a batching KV cache would be memory held for nothing.  Calls are keyed by
``local:<checkpoint>:<dtype>``, not by the server's port, so a rerun finds the first run's answers.

A local judge is an LLM judge (``kind = 'llm'`` in the ``judges`` table): it takes the exam like any judge, is
subject to the family guard (never shown a review by a candidate of its own family, e.g. the same model as a
candidate) and to the per-paper cap ``panel_llm_pairs_per_paper``; ``exam_llm_pairs`` bounds its exam.  It does
not take part in debates (it writes no reasons).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grebench.llm import DecisionRequest, DecisionResult, LLMClient, fill, parse_endpoint
from grebench.models import model_family
from grebench.panel._judges import (
    JUDGE_KINDS,
    LLM_JUDGE,
    Judge,
    JudgeContext,
    PaperView,
    ReviewView,
    Verdict,
)
from grebench.panel._llm_judge import JudgeError
from grebench.runtime import LocalModel, LocalServers, resolve_local
from grebench.settings import Settings

DECISION_VERSION = "judge-decision-v2"  # v2: fenced texts
#: What the model reads of each review and of the abstract (≈ 700 and 350 tokens: a median ICLR review fits; the
#: cost of a decision on a CPU grows with its length).
MAX_REVIEW_CHARS = 3_000
MAX_ABSTRACT_CHARS = 1_500
QUESTION = "better_review"
INSTRUCTIONS = ("You are an area chair of a machine-learning conference. Which of the two reviews above is the "
                "better peer review of this paper: specific to this paper, technically correct, and useful to its "
                "authors?")
OPTIONS = (("one", "Review one is the better review"), ("two", "Review two is the better review"))
PLACEHOLDER_BASE = "http://127.0.0.1:0/v1"  # until the server starts (decide_many asks the cache first)
ALLOWED_KEYS = {"name", "kind", "model", "family", "description"}


def decision_state(paper: PaperView, one: ReviewView, two: ReviewView) -> str:
    """What the model reads: the paper, then the two reviews in the order shown (each cut to a bounded length),
    every text fenced with a boundary no review can forge (:func:`grebench.llm.fill`), filled in one pass."""
    abstract = (paper.abstract or "Not available.").strip()[:MAX_ABSTRACT_CHARS]
    text, _tag = fill("{{FENCE_NOTE}}\n\nPaper title:\n{{TITLE}}\n\nAbstract:\n{{ABSTRACT}}\n\n"
                      "=== Review one ===\n{{REVIEW_ONE}}\n\n=== Review two ===\n{{REVIEW_TWO}}",
                      {"TITLE": paper.title.strip(), "ABSTRACT": abstract,
                       "REVIEW_ONE": one.text.strip()[:MAX_REVIEW_CHARS],
                       "REVIEW_TWO": two.text.strip()[:MAX_REVIEW_CHARS]},
                      ["TITLE", "ABSTRACT", "REVIEW_ONE", "REVIEW_TWO"])
    return text


#: The judge kind of a model on this machine served by grebench (``kind = "local"`` in a ``[[judges]]`` table):
#: a panel with one releases its own evaluation LM before the judge's server starts.
LOCAL_JUDGE_KIND = "local"

@dataclass
class LocalJudge(Judge):
    """A catalogue model or a local checkpoint judging pairs through ``/v1/systemone`` decisions."""

    name: str
    model: str                 # the spec as configured (catalogue name or checkpoint path)
    client: LLMClient
    servers: LocalServers
    settings: Settings
    family: str | None = None
    description: str = ""
    kind: str = LLM_JUDGE      # its role in the judges table: an LLM judge (not a reference judge)
    judge_kind: str = LOCAL_JUDGE_KIND  # the JUDGE_KINDS entry that made it
    calls_made: int = 0
    cached: int = 0
    _resolved: LocalModel | None = field(default=None, repr=False)

    def _model(self) -> LocalModel:
        """The checkpoint, device and dtype, resolved once (a catalogue model is pulled on first use)."""
        if self._resolved is None:
            from grebench.models import ModelError

            try:
                self._resolved = resolve_local(self.settings, self.model)
            except ModelError as exc:
                raise JudgeError(f"judge {self.name}: {exc}") from None
        return self._resolved

    def _decide(self, items: Sequence[tuple[PaperView, ReviewView, ReviewView]]) -> list[DecisionResult]:
        """Decisions of the cache, and of the server (started only when one is not cached) for the rest."""
        model = self._model()
        requests = [DecisionRequest(model=f"openai/{model.path}", api_base=PLACEHOLDER_BASE,
                                    state=decision_state(p, a, b), question=QUESTION, instructions=INSTRUCTIONS,
                                    options=OPTIONS, purpose="judge-decision", prompt_version=DECISION_VERSION,
                                    endpoint_id=model.endpoint_id) for p, a, b in items]
        return self.client.decide_many(requests,
                                       server=lambda: self.servers.server(model, decisions_only=True).api_base)

    def compare(self, paper: PaperView, review_a: ReviewView, review_b: ReviewView) -> Verdict:
        """One decision, in the order given."""
        [answer] = self.compare_many([(paper, review_a, review_b)])
        if isinstance(answer, JudgeError):
            raise answer
        return answer

    def compare_many(self, items: Sequence[tuple[PaperView, ReviewView, ReviewView]]) -> list[Verdict | JudgeError]:
        """Many decisions, batched by the server; a failed one comes back as a :class:`JudgeError`."""
        if not items:
            return []
        out: list[Verdict | JudgeError] = []
        for result in self._decide(items):
            if result.cached:
                self.cached += 1
            else:
                self.calls_made += 1
            if not result.ok or result.choice is None or result.probability is None:
                out.append(JudgeError(f"judge {self.name}: {result.error or 'no answer'}"))
                continue
            probs = result.probabilities or {}
            out.append(Verdict(result.choice, float(result.probability),
                               f"P(one) = {probs.get('one', 0.0):.3f}, P(two) = {probs.get('two', 0.0):.3f}"))
        return out


def local_judge(name: str, spec: str, context: JudgeContext, family: str | None = None,
                description: str | None = None) -> LocalJudge:
    """A local judge for ``spec`` (a catalogue name or a checkpoint directory) sharing the context's servers."""
    servers = context.servers if context.servers is not None else LocalServers(context.settings)
    return LocalJudge(name=name, model=spec, client=context.client, servers=servers, settings=context.settings,
                      family=family or model_family(spec),
                      description=description or f"local model {spec} answering typed decisions ({DECISION_VERSION})")


class LocalJudgeKind:
    """``kind = "local"`` in a ``[[judges]]`` table: a model on this machine, served by grebench."""

    name = LOCAL_JUDGE_KIND

    def parse(self, raw: dict[str, Any], where: str, context: JudgeContext) -> Judge:
        """Validate one table; errors name the judge and the key."""
        e = parse_endpoint(raw, where, ALLOWED_KEYS, model_hint="a catalogue name such as 'smollm2-135m', or the path "
                           "of a local checkpoint directory")
        return local_judge(e.name, e.model, context, e.family, e.description)


JUDGE_KINDS.add(LOCAL_JUDGE_KIND, LocalJudgeKind(), spec=LOCAL_JUDGE_KIND,
                summary="a model on this machine answering typed decisions (transformers serve)")


def builtin_local_judges(context: JudgeContext) -> list[Judge]:
    """The job's local judges (``context.local_judges``, the resolved run's: catalogue names or checkpoint
    paths)."""
    return [local_judge(local_judge_name(spec), spec, context) for spec in context.local_judges]


def local_judge_name(spec: str) -> str:
    """A local judge's name: its catalogue name, or its checkpoint directory's name."""
    return Path(spec).name or spec

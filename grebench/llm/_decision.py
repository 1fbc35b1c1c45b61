"""The request and result records of one typed decision, and the checks on the server's reply.

A decision asks a served model one ``choice`` question about a state text (e.g. "which review is better?") and
gets a probability for every option from one forward pass, no generated text: ``transformers serve``'s
``/v1/systemone`` (System One request and answer shapes).  The request is keyed like a chat call, by its canonical
content: ``endpoint_id`` stands for the address when that changes between runs (a local server's random port).

A reply is used only when it answers exactly what was asked: an answer for the question, a probability in [0, 1]
for every option and for no other, summing to 1 (within :data:`SUM_TOLERANCE`).  Anything else is a
:class:`MalformedDecision` with the reason.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from grebench.llm._local import server_root

SUM_TOLERANCE = 1e-3


class MalformedDecision(ValueError):
    """A decision reply that does not answer the question asked."""


@dataclass(frozen=True)
class DecisionRequest:
    """One ``choice`` question about ``state``, answered with a probability per option.

    ``options`` are (label, description) pairs in the order the model sees them (labels are unique); ``model`` is
    the served model id (a litellm ``openai/`` prefix is accepted and dropped in the request body).
    """

    model: str
    api_base: str
    state: str
    question: str
    instructions: str
    options: tuple[tuple[str, str], ...]
    purpose: str
    prompt_version: str
    endpoint_id: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", tuple((str(label), str(text)) for label, text in self.options))
        labels = self.labels
        if len(labels) < 2 or len(set(labels)) != len(labels) or not all(label.strip() for label in labels):
            raise ValueError(f"a decision needs at least two options with distinct, non-empty labels, got {labels}")
        if not self.question.strip():
            raise ValueError("a decision needs a question name")

    @property
    def labels(self) -> list[str]:
        """The option labels, in order."""
        return [label for label, _ in self.options]

    @property
    def served_model(self) -> str:
        """The model id the server knows (without a litellm ``openai/`` prefix)."""
        return self.model[len("openai/"):] if self.model.startswith("openai/") else self.model

    @property
    def endpoint(self) -> str:
        """The endpoint as the cache key names it: ``endpoint_id``, else the server's root URL (``/v1`` or not)."""
        return self.endpoint_id or server_root(self.api_base)

    def body(self) -> dict[str, Any]:
        """The ``/v1/systemone`` request."""
        return {"model": self.served_model, "state": self.state,
                "questions": {self.question: {"type": "choice", "instructions": self.instructions,
                                              "criteria": dict(self.options)}}}

    @property
    def content_sha256(self) -> str:
        """Hash of what the model is shown (state, instructions, options): the ``messages_sha256`` of its row."""
        blob = json.dumps([self.state, self.instructions, [list(o) for o in self.options]], ensure_ascii=False)
        return hashlib.sha256(blob.encode()).hexdigest()

    def params_json(self) -> str:
        """The question and option labels as JSON (the ``params_json`` of its row)."""
        return json.dumps({"question": self.question, "options": self.labels, "type": "choice"}, sort_keys=True)

    def cache_key(self) -> str:
        """SHA-256 of the canonical request (the address only through :attr:`endpoint`; with ``endpoint_id`` the
        endpoint's name stands for the model too, as for chat calls)."""
        canonical = {"kind": "decision", "model": self.endpoint_id or self.model, "api_base": self.endpoint,
                     "state": self.state,
                     "question": self.question, "instructions": self.instructions,
                     "options": [list(o) for o in self.options], "purpose": self.purpose,
                     "prompt_version": self.prompt_version}
        return hashlib.sha256(json.dumps(canonical, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


@dataclass
class DecisionResult:
    """Outcome of one (possibly cached) decision: a probability per option and the chosen one, or the error."""

    status: str
    probabilities: dict[str, float] | None
    choice: str | None
    probability: float | None
    tokens_in: int | None
    latency_s: float | None
    error: str | None
    attempts: int
    cached: bool
    generated_at: datetime
    request_key: str = field(default="")

    @property
    def ok(self) -> bool:
        """Whether the decision has probabilities."""
        return self.status == "ok"


def choose(labels: list[str], probabilities: dict[str, float]) -> tuple[str, float]:
    """The most probable option (the first listed among equals) and its probability."""
    best = max(labels, key=lambda label: probabilities[label])
    return best, probabilities[best]


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str) if not isinstance(value, str) else value
    return text if len(text) <= 200 else text[:200] + "…"


def parse_reply(request: DecisionRequest, body: bytes) -> tuple[dict[str, float], int | None]:
    """(probability per option, input tokens) of a ``/v1/systemone`` reply, or :class:`MalformedDecision`."""
    try:
        data = json.loads(body)
    except ValueError:
        raise MalformedDecision(f"the decision reply is not JSON: {_short(body.decode('utf-8', 'replace'))}") from None
    answers = data.get("answers") if isinstance(data, dict) else None
    if not isinstance(answers, dict):
        raise MalformedDecision(f"the decision reply has no answers: {_short(data)}")
    answer = answers.get(request.question)
    if not isinstance(answer, dict):
        raise MalformedDecision(f"the decision reply has no answer for question {request.question!r} "
                                f"(answered: {', '.join(map(repr, answers)) or 'nothing'})")
    raw = answer.get("probabilities")
    if not isinstance(raw, dict):
        raise MalformedDecision(f"the answer to {request.question!r} has no probabilities: {_short(answer)}")
    labels = request.labels
    asked = ", ".join(labels)
    unknown = [k for k in raw if k not in labels]
    if unknown:
        raise MalformedDecision(f"the answer to {request.question!r} names unknown option(s) "
                                f"{', '.join(map(repr, unknown))} (asked: {asked})")
    missing = [label for label in labels if label not in raw]
    if missing:
        raise MalformedDecision(f"the answer to {request.question!r} has no probability for option(s) "
                                f"{', '.join(map(repr, missing))} (asked: {asked})")
    probabilities: dict[str, float] = {}
    for label in labels:
        value = raw[label]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or not 0.0 <= value <= 1.0:
            raise MalformedDecision(f"the probability of option {label!r} is not a number in [0, 1]: {_short(value)}")
        probabilities[label] = float(value)
    total = sum(probabilities.values())
    if abs(total - 1.0) > SUM_TOLERANCE:
        raise MalformedDecision(f"the probabilities of {request.question!r} sum to {total:.6g}, not 1")
    choice = answer.get("choice")
    if choice is not None and choice not in labels:
        raise MalformedDecision(f"the answer to {request.question!r} chose unknown option {_short(choice)!r} "
                                f"(asked: {asked})")
    usage = data.get("usage")
    tokens = usage.get("input_tokens") if isinstance(usage, dict) else None
    return probabilities, tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else None

"""LLM judges: the product's own comparison prompt (``judge-v2``) through the shared, cached LLM client.

Confidence (methods.md §5): the probability p of the answer token ("one"/"two"/"tie") when the provider returns
log-probs (uncertainty = -log p); otherwise the verbal label on the answer's Confidence line, very low .. very high =
1 .. 5, mapped to 0.5 + (level - 1) / 8.  Both scales then lie in [0.5, 1] (p of a binary choice is rarely below
0.5), so one judge's confidences stay comparable when some answers come with log-probs and some without.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from grebench.llm import ChatRequest, ChatResult, LLMClient, endpoint_tables, fill, parse_endpoint, table_name
from grebench.panel._judges import (
    JUDGE_KINDS,
    LLM_JUDGE,
    Judge,
    JudgeContext,
    PaperView,
    ReviewView,
    Verdict,
    can_debate,
    checked_judge,
)

PROMPT_VERSION = "judge-v2"  # v2: untrusted text fenced (grebench.llm.fill)
DEBATE_PROMPT_VERSION = "judge-debate-v2"
LEVELS = {"very low": 1, "low": 2, "medium": 3, "high": 4, "very high": 5}
ALLOWED_KEYS = {"name", "kind", "model", "api_base", "api_key_env", "family", "params", "description"}
_ANSWER = re.compile(r"^\W*(?:answer\s*:\s*)?\W*(one|two|tie)\b", re.IGNORECASE)
_TOKEN = re.compile(r"^\W*(one|two|tie)(?![a-z])", re.IGNORECASE)
_CONF = re.compile(r"confidence\s*:\s*\**\s*(very low|very high|low|medium|high)", re.IGNORECASE)
_REASON = re.compile(r"reason\s*:\s*(.+)", re.IGNORECASE | re.DOTALL)
MAX_REVIEW_CHARS = 12_000
MAX_ABSTRACT_CHARS = 3_000


class JudgeError(RuntimeError):
    """A judge could not answer (failed call, unparseable reply); the vote is skipped and the failure recorded.

    ``unreachable``: the judge's endpoint could not be reached at all (nothing listens, the name does not resolve,
    TLS failed): a judge whose every answer failed so was not examined, which is not the same as failing the exam.
    ``cause``: the call's own error, without the judge's name."""

    def __init__(self, message: str, *, unreachable: bool = False, cause: str | None = None) -> None:
        super().__init__(message)
        self.unreachable = unreachable
        self.cause = cause or message


def _template(name: str) -> str:
    return resources.files("grebench.panel").joinpath(f"prompts/{name}").read_text(encoding="utf-8")


def _messages(paper: PaperView, one: ReviewView, two: ReviewView, show_metrics: bool,
              others: str | None = None) -> list[tuple[str, str]]:
    """System and user message; every text from outside (title, abstract, reviews, other judges' reasons) is fenced
    and the template is filled in one pass (:func:`grebench.llm.fill`)."""
    text = _template("judge_v2.txt")
    if others is not None:
        text = text.rstrip("\n") + "\n\n" + _template("debate_v2.txt")
    metrics = ""
    if show_metrics and (one.metrics or two.metrics):
        metrics = ("\n[Machine measurements, for reference only]\n"
                   f"Review one: {json.dumps(dict(one.metrics), sort_keys=True)}\n"
                   f"Review two: {json.dumps(dict(two.metrics), sort_keys=True)}\n")
    values = {"TITLE": paper.title.strip(),
              "ABSTRACT": (paper.abstract or "Not available.").strip()[:MAX_ABSTRACT_CHARS],
              "METRICS": metrics, "REVIEW_ONE": one.text.strip()[:MAX_REVIEW_CHARS],
              "REVIEW_TWO": two.text.strip()[:MAX_REVIEW_CHARS]}
    untrusted = ["TITLE", "ABSTRACT", "REVIEW_ONE", "REVIEW_TWO"]
    if others is not None:
        values["OTHERS"] = others
        untrusted.append("OTHERS")
    filled, _tag = fill(text, values, untrusted)
    system, user = filled.split("=== user ===", 1)
    return [("system", system.replace("=== system ===", "").strip()), ("user", user.strip())]


def parse_reply(text: str, logprobs: list[dict[str, Any]] | None) -> Verdict:
    """Preference from the first line, confidence from the answer token's probability or the verbal label."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    match = _ANSWER.match(first)
    if match is None:
        raise JudgeError(f"unparseable judge reply (first line {first[:80]!r}): expected one, two or tie")
    preference = match.group(1).lower()
    reason_match = _REASON.search(text)
    reason = reason_match.group(1).strip()[:1000] if reason_match else ""
    for entry in logprobs or []:
        token_match = _TOKEN.match(str(entry.get("token") or ""))
        if token_match is not None and token_match.group(1).lower() == preference and entry.get("logprob") is not None:
            return Verdict(preference, float(math.exp(min(0.0, float(entry["logprob"])))), reason)
    label = _CONF.search(text)
    level = LEVELS[label.group(1).lower()] if label else 3
    return Verdict(preference, 0.5 + (level - 1) / 8, reason)


@dataclass
class LLMJudge(Judge):
    """A judge backed by one LLM, configured as a ``[[judges]]`` table; every call is cached by the client."""

    name: str
    model: str
    client: LLMClient
    family: str | None = None
    api_base: str | None = None
    api_key_env: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""
    show_metrics: bool = False
    kind: str = LLM_JUDGE      # its role in the judges table: an LLM judge (not a reference judge)
    judge_kind: str = "llm"    # the JUDGE_KINDS entry that made it
    calls_made: int = 0
    cached: int = 0

    def _request(self, messages: Sequence[tuple[str, str]], version: str) -> ChatRequest:
        params = {"temperature": 0, "max_tokens": 200, "logprobs": True, "top_logprobs": 5, **dict(self.params)}
        return ChatRequest(model=self.model, messages=tuple(messages), purpose="judge", prompt_version=version,
                           api_base=self.api_base, api_key_env=self.api_key_env, params=tuple(params.items()))

    def _count(self, result: ChatResult) -> None:
        if result.cached:
            self.cached += 1
        else:
            self.calls_made += 1

    def _verdict(self, result: ChatResult) -> Verdict:
        self._count(result)
        if not result.ok or result.text is None:
            cause = result.error or "no reply"
            raise JudgeError(f"judge {self.name}: {cause}", unreachable=result.unreachable, cause=cause)
        return parse_reply(result.text, result.logprobs)

    def compare(self, paper: PaperView, review_a: ReviewView, review_b: ReviewView) -> Verdict:
        """Ask the LLM once, in the order given."""
        request = self._request(_messages(paper, review_a, review_b, self.show_metrics), PROMPT_VERSION)
        return self._verdict(self.client.complete(request))

    def compare_many(self, items: Sequence[tuple[PaperView, ReviewView, ReviewView]]) -> list[Verdict | JudgeError]:
        """Many comparisons concurrently (bounded per provider by the client); failures come back as errors."""
        requests = [self._request(_messages(p, a, b, self.show_metrics), PROMPT_VERSION) for p, a, b in items]
        out: list[Verdict | JudgeError] = []
        for result in self.client.complete_many(requests):
            try:
                out.append(self._verdict(result))
            except JudgeError as exc:
                out.append(exc)
        return out

    def debate(self, paper: PaperView, review_a: ReviewView, review_b: ReviewView,
               others: Sequence[tuple[str, Verdict]]) -> Verdict:
        """Answer again after reading the other judges' verdicts and reasons (ScaleEval)."""
        lines = "\n".join(f"- {name}: {v.preference} ({v.reason or 'no reason given'})" for name, v in others)
        messages = _messages(paper, review_a, review_b, self.show_metrics, others=lines)
        return self._verdict(self.client.complete(self._request(messages, DEBATE_PROMPT_VERSION)))


class LLMJudgeKind:
    """``kind = "llm"`` (the default) in a ``[[judges]]`` table: a litellm model with the product's prompt."""

    name = "llm"

    def parse(self, raw: dict[str, Any], where: str, context: JudgeContext) -> Judge:
        """Validate one table; errors name the judge and the key."""
        e = parse_endpoint(raw, where, ALLOWED_KEYS)
        return LLMJudge(name=e.name, model=e.model, client=context.client, family=e.family, api_base=e.api_base,
                        api_key_env=e.api_key_env, params=e.params,
                        description=e.description or f"LLM judge {e.model} ({PROMPT_VERSION})",
                        show_metrics=context.settings.panel.judges_see_machine_metrics)


JUDGE_KINDS.add("llm", LLMJudgeKind(), spec="llm", summary="a litellm model judging with the product's prompt",
                debates=True)


def parse_judges(raw: Any, context: JudgeContext) -> list[Judge]:
    """Validate the ``[[judges]]`` tables of the settings file with the parser of each table's ``kind``."""
    out: list[Judge] = []
    for i, entry in enumerate(endpoint_tables(raw, "judges")):
        name = table_name(entry, f"[[judges]] #{i + 1}")
        kind = entry.get("kind", "llm")
        if not isinstance(kind, str) or kind not in JUDGE_KINDS:
            raise ValueError(f"judge {name!r}: kind must be one of {', '.join(JUDGE_KINDS.names())}, got {kind!r}")
        judge = checked_judge(JUDGE_KINDS.get(kind).obj.parse(entry, f"judge {name!r}", context),
                              f"judge kind {kind!r} (table {name!r})")
        if can_debate(judge) and not callable(getattr(judge, "debate", None)):
            raise TypeError(f"judge kind {kind!r} is registered with debates=True but its judge {name!r} has no "
                            "debate method")
        out.append(judge)
    return out

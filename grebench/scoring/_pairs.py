"""GEM's pair rule, once: what a (text, reference) pair becomes for one metric.

A text is scored against each reference of its paper through two log-prob requests: the conditional one (the
reference given the text's judgment lines, or its raw text for a raw metric, and the metric's synopsis) and the
marginal one (the reference given the synopsis alone); PMI = conditional − marginal.  A reference that is missing,
was not preprocessed or has no judgment lines is not scored against.  The score stage (:func:`run_scoring`) and
:func:`score_texts` (texts that are no stored generation) both build their requests here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from grebench.scoring._preprocess import Judgment, text_sha256
from grebench.scoring._request import GEM_PROMPT_VERSION, LogprobRequest, LogprobResult


class Skips:
    """Counts of what was not scored, by metric and reason (reported in the summary)."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[str, str, str]] = Counter()

    def add(self, metric: str, what: str, reason: str, n: int = 1) -> None:
        """Count ``n`` things (``what``) of ``metric`` not scored for ``reason``."""
        self.counts[(metric, what, reason)] += n

    def report(self) -> list[dict[str, Any]]:
        """The counts as summary rows."""
        return [{"metric": m, "what": w, "reason": r, "count": n} for (m, w, r), n in sorted(self.counts.items())]


@dataclass
class PairRule:
    """The pair rule of one metric: raw texts, or the judgment lines ``lines`` (by text sha256) of a preprocessor."""

    metric: str
    raw: bool
    lines: Mapping[str, Judgment]
    skips: Skips = field(default_factory=Skips)

    def text(self, text: str, role: str) -> str | Literal[False] | None:
        """What ``text`` is scored as: the raw text, its judgment-line text ('' for a candidate review without
        lines, None for a reference without), or False when its preprocessing did not succeed (counted)."""
        if self.raw:
            return text
        j = self.lines.get(text_sha256(text))
        if j is None or j.status != "ok":
            reason = j.error if j is not None and j.error else "not preprocessed"
            self.skips.add(self.metric, "pairs", f"{role} {j.status if j else 'missing'}: {reason}"[:200])
            return False
        return j.text if j.lines else ("" if role == "candidate review" else None)

    def requests(self, paper_id: str, synopsis: str | None, text: str | None, references: Sequence[str],
                 reviews: Mapping[str, str], own_text: str | None = None
                 ) -> Iterator[tuple[str, LogprobRequest, LogprobRequest]]:
        """(reference id, conditional, marginal) for ``text`` (what :meth:`text` made of it) against each reference
        that can be scored; ``reviews`` holds reference texts by review id.  ``own_text``: a reference whose text is
        this one is left out (a human review is never scored against itself)."""
        own = None if own_text is None else text_sha256(own_text)
        for ref in references:
            if ref not in reviews:
                self.skips.add(self.metric, "pairs", "reference review not in the store")
                continue
            if own is not None and text_sha256(reviews[ref]) == own:
                continue
            ref_text = self.text(reviews[ref], "reference")
            if not ref_text:
                if ref_text is None:
                    self.skips.add(self.metric, "pairs", "reference has no judgment lines")
                continue
            yield (ref, LogprobRequest(paper_id, synopsis, text or None, ref_text, GEM_PROMPT_VERSION),
                   LogprobRequest(paper_id, synopsis, None, ref_text, GEM_PROMPT_VERSION))


def pmi(conditional: LogprobResult, marginal: LogprobResult) -> float:
    """GEM's pointwise mutual information of one pair: log P(y | x, s) − log P(y | s)."""
    return float(conditional.logprob - marginal.logprob)

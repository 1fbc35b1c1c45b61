"""Copy evidence from the evaluation LM: how much better a candidate predicts a public review than honest reviews of
the same paper do (issue 62).

The lexical detector (:mod:`grebench.bench._copies`) reads words; a paraphrase (every content word a synonym, the
sentences reordered) keeps none of a review's word pairs but all of its information, and information is what the
evaluation LM reads.  For a candidate review x of a paper with synopsis s (the abstract) and each public review r of
that paper, judgment line by judgment line (the rules preprocessor's lines,
:func:`grebench.scoring.rules_judgment_lines`):

    gain(x, r) = Σ_l max(0, log P(l | x, s) − log P(l | s)) / Σ_l −log P(l | s)

the share of r's information, line by line, that x makes more predictable than the paper alone does.  A line counts
only where x helps it (a copy of a third of r's sentences is not cancelled by the other two thirds), and the marginal
``log P(l | s)`` does not depend on x: it is computed once per public review.

The bar is **relative and calibrated on honest pairs**:

* ``scale(r)`` = the median gain on r of the paper's *honest* reviews (its other public reviews, and any honest
  candidate the caller adds: the human baseline, the built-in models), but never below ``typical``, the median of
  that over all public reviews of the calibration papers (a review every honest reviewer predicts poorly does not make
  every candidate a copy);
* ``z(x, r)`` = gain(x, r) / scale(r): the information x carries about r in units of what an honest review carries;
* the review's statistic ``Z(x)`` = the mean of z over the paper's public reviews (a copy spread over every review,
  a little of each, adds up; one whole review copied is far above 1 on that review alone);

and x is flagged when ``Z(x) ≥ bar``: the bar is the conformal ``1 − fp`` quantile of the same statistic over every
honest public review of the calibration papers scored against the paper's *other* public reviews (its own left out of
its scales), times :data:`BAR_MARGIN`, so that honest reviews are flagged at about ``fp`` or less
(:data:`TARGET_FP`, 0.5 %) with whatever estimator the caller passes.  Calibrate on the papers being checked (one
season, one venue): the statistic's spread depends on how many honest reviews a paper has (a bar calibrated on ICLR
2026's four or five reviews a paper flags 1.6 % of ICLR 2020's three with the offline estimator; calibrated on half of
the same sample's papers it flags at most 0.5 % of the other half, ``tests/scoring/test_lm_copy.py``).  Nothing here
reads a word: the same rule holds for the offline word model and for a real LM (SmolLM2 by default), only its numbers
differ.

Cost per checked review: one conditional request per judgment line of each public review of its paper (about 4
reviews x 15 lines: 60 short requests); the marginals are shared by every candidate of the paper.  Calibration costs
the same per honest review, once per (estimator, sample).  Requests go to ``logprobs`` when the caller gives one (the
product's copy check puts the store's log-prob cache in front: :class:`grebench.scoring.CachedLogprobs`, so a second
check over the same store computes only the new reviews' requests), else straight to the estimator.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from grebench.scoring._request import LogprobRequest, LogprobResult
from grebench.scoring.estimators import Estimator

#: The share of honest reviews the bar may flag (the issue's target: at most 0.5 %).
TARGET_FP = 0.005
#: The calibrated quantile is raised by this factor: a calibration sample's top quantile is itself noisy (the
#: benchmark measures the rate on the sample the bar was *not* calibrated on: docs/security.md).
BAR_MARGIN = 1.1
#: Fewer honest statistics than this cannot place a 1 − fp quantile: the bar is then the largest one, times
#: :data:`SMALL_SAMPLE_MARGIN`.
SMALL_SAMPLE_MARGIN = 1.5

#: How a check's requests are answered: the estimator's ``logprobs``, or that behind a cache.
Logprobs = Callable[[Sequence[LogprobRequest]], list[LogprobResult]]


@dataclass(frozen=True)
class PaperReviews:
    """One paper as the LM check reads it: its synopsis and each public review's judgment lines."""

    paper_id: str
    synopsis: str | None
    reviews: Mapping[str, Sequence[str]]  # public review id -> its judgment lines


@dataclass(frozen=True)
class LMCopyEvidence:
    """What the LM check found in one candidate review: its statistic, the bar, and the public review it carries
    most of (in units of an honest review's information about it)."""

    paper_id: str
    statistic: float
    bar: float
    gains: Mapping[str, float]   # public review id -> gain(x, r)
    z: Mapping[str, float]       # public review id -> z(x, r)

    @property
    def copied(self) -> bool:
        return self.statistic >= self.bar

    @property
    def reference(self) -> str | None:
        return max(self.z, key=lambda r: self.z[r]) if self.z else None

    def describe(self) -> str:
        """``predicts the public reviews 4.1x as well as an honest review does (bar 2.3x), most of all R (9.0x)``."""
        top = self.reference
        most = f", most of all {top} ({self.z[top]:.1f}x)" if top is not None else ""
        return (f"predicts its paper's public reviews {self.statistic:.1f}x as well as an honest review of the paper "
                f"does (bar {self.bar:.1f}x){most}")


def line_gain(conditionals: Sequence[float], marginals: Sequence[float]) -> float:
    """gain = Σ max(0, conditional − marginal) / Σ −marginal over one review's lines (0 when it costs nothing)."""
    cost = float(sum(-m for m in marginals))
    if cost <= 0:
        return 0.0
    return float(sum(max(0.0, c - m) for c, m in zip(conditionals, marginals, strict=True))) / cost


def conformal_bar(values: Sequence[float], fp: float = TARGET_FP) -> float:
    """The bar that flags at most ``fp`` of honest statistics like ``values``: their ⌈(n + 1)(1 − fp)⌉-th smallest
    (a split-conformal quantile) times :data:`BAR_MARGIN`, or the largest times :data:`SMALL_SAMPLE_MARGIN` when
    there are too few to place it."""
    vals = sorted(v for v in values if math.isfinite(v))
    if not vals:
        return math.inf
    k = math.ceil((len(vals) + 1) * (1 - fp))
    if k > len(vals):
        return vals[-1] * SMALL_SAMPLE_MARGIN
    return vals[k - 1] * BAR_MARGIN


@dataclass
class LMCopyCheck:
    """The LM copy check over a set of papers with one estimator: :meth:`calibrate` on the papers' honest reviews,
    then :meth:`check` candidate reviews (judgment lines) of those papers.

    ``honest`` adds honest candidates per paper (judgment lines of the human baseline, the built-in models) to the
    scales; a paper's public reviews always count as honest candidates against each other.

    ``logprobs`` answers every request (marginals, calibration, checks) when given: the estimator's behind the
    store's log-prob cache (:class:`grebench.scoring.CachedLogprobs`); without it the estimator is asked directly."""

    estimator: Estimator
    papers: Mapping[str, PaperReviews]
    honest: Mapping[str, Sequence[Sequence[str]]] = field(default_factory=dict)
    fp: float = TARGET_FP
    logprobs: Logprobs | None = None
    requests: int = 0  # conditional requests sent so far (the cost)
    _marginals: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    _honest: dict[str, list[dict[str, float]]] = field(default_factory=dict)  # paper -> gains of each honest review
    _own: dict[str, list[str | None]] = field(default_factory=dict)  # paper -> the public review each honest one is
    typical: float = 0.0
    bar: float = math.inf
    calibration: list[float] = field(default_factory=list)
    calibration_papers: list[str] = field(default_factory=list)  # the paper of each calibration statistic

    # -- log-probabilities ---------------------------------------------------------------------------------------
    def _ask(self, requests: Sequence[LogprobRequest]) -> list[LogprobResult]:
        if not requests:
            return []
        return (self.logprobs or self.estimator.logprobs)(requests)

    def _marginals_of(self, paper_ids: Sequence[str]) -> None:
        todo = [(pid, rid, line) for pid in paper_ids for rid, lines in self.papers[pid].reviews.items()
                if (pid, rid) not in self._marginals for line in lines]
        results = self._ask([LogprobRequest(pid, self.papers[pid].synopsis, None, line) for pid, _, line in todo])
        for (pid, rid, _), res in zip(todo, results, strict=True):
            self._marginals.setdefault((pid, rid), []).append(res.logprob)
        for pid in paper_ids:
            for rid, lines in self.papers[pid].reviews.items():
                if not lines:
                    self._marginals[(pid, rid)] = []

    def gains(self, items: Sequence[tuple[str, Sequence[str], str | None]]) -> list[dict[str, float]]:
        """gain(x, r) of each (paper id, candidate judgment lines, public review id to leave out or None) against
        every other public review of its paper, in one batch of requests."""
        self._marginals_of(sorted({pid for pid, _, _ in items}))
        todo: list[tuple[int, str, LogprobRequest]] = []
        for k, (pid, lines, own) in enumerate(items):
            paper = self.papers[pid]
            first = "\n".join(lines) or None
            for rid, ref_lines in paper.reviews.items():
                if rid != own:
                    todo += [(k, rid, LogprobRequest(pid, paper.synopsis, first, line)) for line in ref_lines]
        results = self._ask([req for _, _, req in todo])
        self.requests += len(todo)
        conds: list[dict[str, list[float]]] = [{} for _ in items]
        for (k, rid, _), res in zip(todo, results, strict=True):
            conds[k].setdefault(rid, []).append(res.logprob)
        out: list[dict[str, float]] = []
        for k, (pid, _, own) in enumerate(items):
            out.append({rid: line_gain(conds[k].get(rid, []), self._marginals[(pid, rid)])
                        for rid in self.papers[pid].reviews if rid != own})
        return out

    # -- calibration ---------------------------------------------------------------------------------------------
    def calibrate(self) -> float:
        """Score every honest review of the papers against the paper's other public reviews, set ``typical`` and the
        bar (see the module docstring); returns the bar."""
        items: list[tuple[str, Sequence[str], str | None]] = []
        for pid, paper in self.papers.items():
            items += [(pid, lines, rid) for rid, lines in paper.reviews.items()]
            items += [(pid, lines, None) for lines in self.honest.get(pid, ())]
        found = self.gains(items)
        for (pid, _, own), gains in zip(items, found, strict=True):
            self._honest.setdefault(pid, []).append(gains)
            self._own.setdefault(pid, []).append(own)
        medians = [m for pid in self.papers for rid in self.papers[pid].reviews
                   if (m := self._median(pid, rid, None)) is not None]
        self.typical = float(np.median(medians)) if medians else 0.0
        honest = [(pid, self._statistic(pid, gains, own)[0]) for (pid, _, own), gains in zip(items, found, strict=True)
                  if own is not None and len(gains) > 0]
        self.calibration = [v for _, v in honest]
        self.calibration_papers = [pid for pid, _ in honest]
        self.bar = conformal_bar(self.calibration, self.fp)
        return self.bar

    def _median(self, pid: str, rid: str, leave_out: int | None) -> float | None:
        vals = [g[rid] for i, g in enumerate(self._honest.get(pid, [])) if i != leave_out and rid in g]
        return float(np.median(vals)) if vals else None

    def _scale(self, pid: str, rid: str, leave_out: int | None) -> float:
        return max(self._median(pid, rid, leave_out) or 0.0, self.typical)

    def _statistic(self, pid: str, gains: Mapping[str, float], own: str | None) -> tuple[float, dict[str, float]]:
        leave_out = None
        if own is not None:  # an honest review in calibration: its own gains never set its scales
            leave_out = self._own[pid].index(own)
        z = {rid: (g / s if (s := self._scale(pid, rid, leave_out)) > 0 else 0.0) for rid, g in gains.items()}
        return (float(np.mean(list(z.values()))) if z else 0.0), z

    # -- checking --------------------------------------------------------------------------------------------------
    def check(self, items: Sequence[tuple[str, Sequence[str]]]) -> list[LMCopyEvidence]:
        """The evidence for each (paper id, candidate judgment lines); :meth:`calibrate` first."""
        if not self._honest:
            raise RuntimeError("LMCopyCheck.check before calibrate")
        found = self.gains([(pid, lines, None) for pid, lines in items])
        out = []
        for (pid, _), gains in zip(items, found, strict=True):
            stat, z = self._statistic(pid, gains, None)
            out.append(LMCopyEvidence(pid, round(stat, 4), round(self.bar, 4),
                                      {r: round(v, 4) for r, v in gains.items()},
                                      {r: round(v, 4) for r, v in z.items()}))
        return out

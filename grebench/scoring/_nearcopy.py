"""Copies of *another* paper's public reviews, read by information: the near-paper check (issue 62, item 3).

A resubmission disguised by a rewritten title and abstract may never be linked to its earlier version, whose reviews
are public; a review of it can then carry those reviews, paraphrased, and still count as sealed.  The LM copy check
(:class:`~grebench.scoring.LMCopyCheck`) reads a review against its own paper's public reviews; this reads it against
the public reviews of the K papers nearest to its paper (the caller picks them: :mod:`grebench.submissions._nearcopy`).

For a candidate review x of paper P and a near paper N with public reviews R_N, the per-review numbers are the LM
copy check's **with N as the paper**: ``gain(x, r)`` conditioned on N's synopsis, divided by what N's own honest
reviews carry about r (``scale(r)``), averaged over R_N: ``Z_N(x)``.  N's synopsis, not P's: the marginals
``log P(l | s_N)`` and the scales are then N's alone, computed once and shared by every candidate that reads N (and
by the calibration); P's abstract is the disguising author's text, and conditioning on it would let the disguise set
the baseline the copy is measured against.  In those units an honest review of N reads about 1, and an honest
review of *another* paper, which knows nothing of N's reviews but their topic, reads far less.

The statistic of x is ``S(x) = max_N Z_N(x)`` over its near papers, and the bar is **calibrated on honest reviews of
other papers against their own near papers**: the conformal ``1 − fp`` quantile (:func:`conformal_bar`, times its
margin) of ``S`` over every public review h of the calibration papers Q, each against Q's near papers picked the
same way (Q's own versions left out), so the max over K papers is in the bar.  P's own reviews are not the baseline:
a sealed review is checked before they are public, and once they are, an honest review of a true resubmission carries
its earlier version's reviews too (that is the resubmission, not the model).

A review at or above the bar carries N's reviews beyond what honest reviews of other papers do: a copy, or a review of
an earlier version of the same work (an unlinked resubmission).  Nothing here reads a word.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from grebench.scoring._lmcopy import TARGET_FP, LMCopyCheck, LMCopyEvidence, PaperReviews, conformal_bar
from grebench.scoring.estimators import Estimator


@dataclass(frozen=True)
class NearCopyEvidence:
    """What the near-paper check found in one candidate review: the near paper whose reviews it carries most of (in
    units of an honest review of that paper), the statistic, the bar, and every near paper's number."""

    paper_id: str
    near_id: str | None
    statistic: float
    bar: float
    by_paper: Mapping[str, float]  # near paper id -> Z_N(x)
    reference: str | None = None   # the near paper's public review x carries most of

    @property
    def copied(self) -> bool:
        return self.near_id is not None and self.statistic >= self.bar

    def describe(self) -> str:
        """``carries the public reviews of paper Y 3.1x as much as an honest review of Y does (bar 0.9x ...)``."""
        ref = f", most of all {self.reference}" if self.reference else ""
        return (f"carries the public reviews of paper {self.near_id} {self.statistic:.2f}x as much as an honest review "
                f"of that paper does{ref} (bar {self.bar:.2f}x: what honest reviews of other papers reach against "
                f"their {len(self.by_paper)} nearest papers' reviews at most)")


@dataclass
class NearCopyCheck:
    """The near-paper check with one estimator over a set of papers whose public reviews are read (the near papers
    of the checked and of the calibration papers): :meth:`calibrate` on honest reviews against their papers' near
    papers, then :meth:`check` candidates against theirs."""

    estimator: Estimator
    papers: Mapping[str, PaperReviews]  # every near paper: its synopsis and public reviews' judgment lines
    fp: float = TARGET_FP
    bar: float = float("inf")
    calibration: list[float] = field(default_factory=list)
    calibrated: bool = False  # calibrate() ran (with no honest statistic the bar stays infinite: nothing is flagged)
    _lm: LMCopyCheck | None = None

    @property
    def requests(self) -> int:
        """Conditional requests sent so far (the cost)."""
        return self._lm.requests if self._lm is not None else 0

    def _scales(self) -> LMCopyCheck:
        if self._lm is None:  # each near paper's honest reviews against each other: the units of Z_N
            self._lm = LMCopyCheck(self.estimator, self.papers, fp=self.fp)
            self._lm.calibrate()
        return self._lm

    def statistics(self, items: Sequence[tuple[str, Sequence[str], Sequence[str]]]) -> list[NearCopyEvidence]:
        """For each (paper id, candidate judgment lines, its near paper ids): Z_N against each near paper (one batch
        of requests), the largest, and the current bar."""
        lm = self._scales()
        flat = [(near, lines) for _, lines, nears in items for near in nears if near in self.papers]
        found: list[LMCopyEvidence] = lm.check(flat) if flat else []
        out, at = [], 0
        for pid, _, nears in items:
            mine = found[at:at + sum(1 for n in nears if n in self.papers)]
            at += len(mine)
            top = max(mine, key=lambda e: e.statistic, default=None)
            out.append(NearCopyEvidence(pid, top.paper_id if top else None, top.statistic if top else 0.0,
                                        round(self.bar, 4), {e.paper_id: e.statistic for e in mine},
                                        top.reference if top else None))
        return out

    def calibrate(self, honest: Sequence[tuple[str, Sequence[str], Sequence[str]]]) -> float:
        """The bar from honest (paper id, review judgment lines, the paper's near paper ids): the conformal
        ``1 − fp`` quantile of their statistics, times the margin; returns it."""
        self.calibration = [e.statistic for e in self.statistics(honest) if e.near_id is not None]
        self.bar = conformal_bar(self.calibration, self.fp)
        self.calibrated = True
        return self.bar

    def check(self, items: Sequence[tuple[str, Sequence[str], Sequence[str]]]) -> list[NearCopyEvidence]:
        """The evidence for each (paper id, candidate judgment lines, near paper ids); :meth:`calibrate` first."""
        if not self.calibrated:
            raise RuntimeError("NearCopyCheck.check before calibrate")
        return self.statistics(items)

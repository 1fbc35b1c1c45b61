"""Statistics over papers: bootstrap confidence intervals and rank intervals, and the one paired test.

Papers are the unit of resampling (a candidate's score on a paper is already the mean over its references), so
the intervals say how much the ranking would move on another draw of papers from the same venue.  Whether two
candidates differ is one test for the whole product, :func:`paired_test` (a sign-flip permutation test of the mean
per-paper difference, exact up to 16 papers): boards, validation, the site and the app all read its p, printed by
:func:`format_p`, which never shows a p below what the test can reach on that many papers (3 papers: 0.25).  All
functions are pure and seeded, vectorised with numpy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np


def _weights(n_papers: int, samples: int, seed: int) -> np.ndarray:
    """Bootstrap replicate weights: row b counts how often each paper was drawn in replicate b."""
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n_papers, size=(samples, n_papers))
    weights = np.zeros((samples, n_papers), dtype=np.float64)
    np.add.at(weights, (np.repeat(np.arange(samples), n_papers), draws.ravel()), 1.0)
    return weights


def bootstrap_ci(values: Sequence[float] | np.ndarray, samples: int = 2000, seed: int = 0,
                 levels: Sequence[float] = (0.90, 0.95)) -> dict[str, float]:
    """Mean of per-paper values and percentile bootstrap CIs (keys ci90_low, ci90_high, ci95_low, ...)."""
    x = np.asarray(values, dtype=np.float64)
    out: dict[str, float] = {"score": float(x.mean()) if x.size else float("nan")}
    if x.size == 0:
        for level in levels:
            out[f"ci{round(level * 100)}_low"] = out[f"ci{round(level * 100)}_high"] = float("nan")
        return out
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, size=(samples, x.size))].mean(axis=1)
    for level in levels:
        tail = (1.0 - level) / 2 * 100
        low, high = np.percentile(means, [tail, 100 - tail])
        out[f"ci{round(level * 100)}_low"] = float(low)
        out[f"ci{round(level * 100)}_high"] = float(high)
    return out


#: The significance level every verdict of the product uses (boards, validation, the site, the app).
ALPHA = 0.05
#: Up to this many papers the sign-flip test enumerates every sign pattern (2^16 = 65,536): the exact p.
EXACT_MAX_PAPERS = 16
#: Above it, this many seeded random sign patterns (Monte Carlo): p = (1 + as extreme) / (1 + patterns), so it never
#: reads below 1 / 20,001.  Fixed, not a setting: every caller of :func:`paired_test` gets the same p for the same
#: per-paper values, so a board row and a validation row of one control cannot disagree.
MONTE_CARLO_PATTERNS = 20_000
_MONTE_CARLO_SEED = 20200426


@dataclass(frozen=True)
class PairedTest:
    """The paired test of two candidates over the papers both were scored on, with the paper as the unit.

    ``diff``: mean over papers of a - b; ``p``: the two-sided p of the sign-flip permutation test of that mean (under
    the null each paper's difference is as likely to have either sign); ``p_min``: the smallest p this test can give
    on ``papers`` papers (2^(1-n) exact, 1/(patterns+1) by Monte Carlo): no p is ever shown below it; ``exact``:
    whether every sign pattern was enumerated."""

    diff: float
    p: float
    papers: int
    p_min: float
    exact: bool

    @property
    def can_decide(self) -> bool:
        """Whether this many papers can reach p < :data:`ALPHA` at all (6 papers or more)."""
        return self.p_min < ALPHA

    @property
    def method(self) -> str:
        """The test in words (pages and reports say which was run)."""
        if self.exact:
            return f"exact sign-flip test over all {2 ** self.papers:,} sign patterns of {self.papers} papers"
        return f"sign-flip test, {MONTE_CARLO_PATTERNS:,} seeded random sign patterns of {self.papers} papers"


def smallest_p(papers: int) -> float:
    """The smallest two-sided p the sign-flip test can give on ``papers`` papers: 2^(1-n) when it enumerates every
    pattern (the observed signs and their mirror are always as extreme), 1 / (patterns + 1) by Monte Carlo."""
    if papers <= 0:
        return 1.0
    if papers <= EXACT_MAX_PAPERS:
        return min(1.0, 2.0 ** (1 - papers))
    return max(2.0 ** (1 - papers), 1.0 / (MONTE_CARLO_PATTERNS + 1))


def papers_to_decide(alpha: float = ALPHA) -> int:
    """The fewest papers on which the sign-flip test can reach p < ``alpha`` (6 at 0.05)."""
    n = 1
    while smallest_p(n) >= alpha:
        n += 1
    return n


def paired_test(differences: Sequence[float] | np.ndarray) -> PairedTest:
    """The two-sided sign-flip permutation test of the mean of per-paper ``differences`` (see :class:`PairedTest`).

    Exact (every one of the 2^n sign patterns) up to :data:`EXACT_MAX_PAPERS` papers, else Monte Carlo over
    :data:`MONTE_CARLO_PATTERNS` seeded patterns.  A pattern counts as extreme when its |mean| reaches the
    observed |mean| up to a relative 1e-9, so ties of floating-point sums are ties on every CPU."""
    d = np.asarray(differences, dtype=np.float64)
    n = int(d.size)
    if n == 0:
        return PairedTest(float("nan"), float("nan"), 0, 1.0, True)
    observed = abs(float(d.mean()))
    exact = n <= EXACT_MAX_PAPERS
    if exact:
        patterns = ((np.arange(2 ** n)[:, None] >> np.arange(n)[None, :]) & 1) * 2.0 - 1.0
    else:
        rng = np.random.default_rng(_MONTE_CARLO_SEED)
        patterns = rng.integers(0, 2, size=(MONTE_CARLO_PATTERNS, n)) * 2.0 - 1.0
    means = np.abs(patterns @ d) / n
    extreme = int(np.count_nonzero(means >= observed * (1 - 1e-9) - 1e-12))
    p = extreme / len(patterns) if exact else (1 + extreme) / (1 + len(patterns))
    return PairedTest(float(d.mean()), float(min(1.0, p)), n, smallest_p(n), exact)


def format_p(p: float | None, papers: int | None = None) -> str:
    """A p as every page and command prints it: ``p = 0.25``, ``p = 0.0039``, ``p < 0.001``; never below the
    smallest p the test can reach on ``papers`` papers (a stored p from before the sign-flip test is raised to
    it); ``p = —`` for none."""
    if p is None or not np.isfinite(p):
        return "p = —"
    if papers:
        p = max(p, smallest_p(papers))
    if p < 0.001:
        return "p < 0.001"
    return "p = 1" if p >= 1 else f"p = {p:.2g}"


def paired_difference(a: Mapping[str, float], b: Mapping[str, float], samples: int = 2000,
                      seed: int = 0) -> dict[str, float]:
    """Mean of a - b over the papers both were scored on, its paired bootstrap 95% CI, and the two-sided p of the
    sign-flip test (:func:`paired_test`, the one test of the product: validation uses it too)."""
    common = sorted(set(a) & set(b))
    if not common:
        return {"diff": float("nan"), "ci95_low": float("nan"), "ci95_high": float("nan"), "p": float("nan"),
                "papers": 0}
    d = np.array([a[p] - b[p] for p in common], dtype=np.float64)
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, d.size, size=(samples, d.size))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    test = paired_test(d)
    return {"diff": test.diff, "ci95_low": float(low), "ci95_high": float(high), "p": test.p,
            "papers": len(common)}


def rank_intervals(per_paper: Mapping[str, Mapping[str, float]], samples: int = 2000,
                   seed: int = 0) -> dict[str, dict[str, float]]:
    """Each candidate's rank (1 = best) and its 2.5/97.5 percentile over bootstrap replicates of the paper set.

    Candidates may be scored on different papers (contamination filters); a replicate draws from the union of
    papers and each candidate's mean uses the drawn papers it has.  Ties share the better rank.
    """
    names = sorted(per_paper)
    papers = sorted({p for scores in per_paper.values() for p in scores})
    if not names or not papers:
        return {}
    index = {p: i for i, p in enumerate(papers)}
    values = np.zeros((len(names), len(papers)))
    mask = np.zeros((len(names), len(papers)))
    for row, name in enumerate(names):
        for paper, value in per_paper[name].items():
            values[row, index[paper]] = value
            mask[row, index[paper]] = 1.0
    weights = _weights(len(papers), samples, seed)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = (weights @ (values * mask).T) / (weights @ mask.T)  # samples × candidates
        point = (values * mask).sum(axis=1) / mask.sum(axis=1)
    means = np.where(np.isnan(means), -np.inf, means)
    ranks = 1 + (means[:, None, :] > means[:, :, None]).sum(axis=2)  # samples × candidates
    point_ranks = 1 + (point[None, :] > point[:, None]).sum(axis=1)
    out = {}
    for col, name in enumerate(names):
        low, high = np.percentile(ranks[:, col], [2.5, 97.5])
        out[name] = {"rank": int(point_ranks[col]), "rank_low": float(low), "rank_high": float(high)}
    return out

"""Bootstrap over papers: confidence intervals, paired differences and rank intervals.

Papers are the unit of resampling (a candidate's score on a paper is already the mean over its references), so
the intervals say how much the ranking would move on another draw of papers from the same venue.  All functions
are pure and seeded, vectorised with numpy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

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


def paired_difference(a: Mapping[str, float], b: Mapping[str, float], samples: int = 2000,
                      seed: int = 0) -> dict[str, float]:
    """Mean of a - b over the papers both were scored on, with a paired bootstrap 95% CI and two-sided p."""
    common = sorted(set(a) & set(b))
    if not common:
        return {"diff": float("nan"), "ci95_low": float("nan"), "ci95_high": float("nan"), "p": float("nan"),
                "papers": 0}
    d = np.array([a[p] - b[p] for p in common], dtype=np.float64)
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, d.size, size=(samples, d.size))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    # two-sided p from the bootstrap distribution of the mean difference, shifted to the null of no difference
    centred = means - d.mean()
    p = (np.count_nonzero(np.abs(centred) >= abs(d.mean())) + 1) / (samples + 1)
    return {"diff": float(d.mean()), "ci95_low": float(low), "ci95_high": float(high), "p": float(min(1.0, p)),
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

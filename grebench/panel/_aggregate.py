"""Pure aggregation: votes → weighted pair verdicts → Bradley–Terry strengths with bootstrap CIs → agreement.

Everything here is a function of plain values (no store), seeded where random, so it is tested on hand-made cases.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Literal, TypedDict

import numpy as np


def answer_value(preference: str, order_ab: str) -> float:
    """+1 when the answer favours review a, -1 for b, 0 for a tie, whatever order the pair was shown in."""
    sign = {"one": 1.0, "two": -1.0, "tie": 0.0}[preference]
    return sign if order_ab == "ab" else -sign


def judge_score(answers: Sequence[tuple[str, str]]) -> float:
    """One judge's score for a pair: its (preference, order) answers averaged over both orders, in [-1, 1]."""
    if not answers:
        raise ValueError("no answers")
    return float(np.mean([answer_value(p, o) for p, o in answers]))


class PanelVerdict(TypedDict):
    """The panel's verdict on one pair (a ``panel_verdicts`` row): the weighted score, its outcome, whether the
    judges debated it and whether the debate left it unresolved."""

    venue_id: str
    paper_id: str
    candidate_a: str
    candidate_b: str
    score: float
    outcome: int
    debated: bool
    flagged: bool


#: A column of ``panel_verdicts``: a key of :class:`PanelVerdict`.
VerdictColumn = Literal["venue_id", "paper_id", "candidate_a", "candidate_b", "score", "outcome", "debated", "flagged"]


class PanelRanking(TypedDict):
    """A candidate's Bradley-Terry strength with its bootstrap CI and rank range (:func:`rank_with_bootstrap`)."""

    candidate: str
    strength: float
    rank: int | None
    ci95_low: float | None
    ci95_high: float | None
    rank_low: int | None
    rank_high: int | None


class Disagreement(TypedDict):
    """A pair where the panel and GEM-S disagree (:func:`agreement`)."""

    paper_id: str
    candidate_a: str
    candidate_b: str
    panel_score: float
    gem_diff: float


class Agreement(TypedDict):
    """How the panel's ranking agrees with GEM-S (:func:`agreement`)."""

    kendall_tau: float | None
    pair_agreement: float | None
    n_pairs: int
    candidates: int
    disagreements: list[Disagreement]


def weighted_vote(scores: Mapping[str, float], weights: Mapping[str, float]) -> float:
    """The panel's score for a pair: sum(w_j s_j) / sum(w_j) over the judges that answered; 0 when none did."""
    total = sum(weights[j] for j in scores if weights.get(j, 0.0) > 0)
    if total <= 0:
        return 0.0
    return float(sum(weights[j] * s for j, s in scores.items() if weights.get(j, 0.0) > 0) / total)


def outcome(score: float, eps: float = 1e-9) -> int:
    """ScaleEval outcome: 1 (a better), 0 (tie), -1 (b better)."""
    return 1 if score > eps else -1 if score < -eps else 0


def bradley_terry(names: Sequence[str], wins: np.ndarray, prior: float = 0.01, max_iter: int = 10_000,
                  tol: float = 1e-12) -> np.ndarray:
    """Bradley–Terry log-strengths (mean 0) by Hunter's MM algorithm.

    ``wins[i, j]`` = (possibly fractional) wins of i over j.  ``prior`` adds that many virtual wins each way to every
    pair, so separated data (one candidate never loses) still has a finite maximum; with ``prior=0`` the result
    solves the plain MLE equations  W_i = sum_j n_ij p_i / (p_i + p_j).
    """
    k = len(names)
    w = np.asarray(wins, dtype=np.float64)
    if w.shape != (k, k):
        raise ValueError(f"wins must be {k}x{k}")
    return bradley_terry_many(w[None], prior, max_iter, tol)[0]


def bradley_terry_many(wins: np.ndarray, prior: float = 0.01, max_iter: int = 10_000, tol: float = 1e-12,
                       start: np.ndarray | None = None) -> np.ndarray:
    """:func:`bradley_terry` for a stack of win matrices ``(s, k, k)`` at once (bootstrap samples), vectorised.

    Newton's method on the (concave) log-likelihood with step halving reaches the MLE in a few dozen steps even on
    nearly separated data, where Hunter's MM algorithm needs thousands; MM (:func:`_mm_many`) takes over for any
    matrix whose comparison graph is not connected (no unique MLE for Newton to find).  ``start`` (log strengths,
    shape ``(k,)`` or ``(s, k)``) warm-starts every fit, e.g. from the fit on all data.
    """
    w = np.asarray(wins, dtype=np.float64)
    s, k = w.shape[0], w.shape[1]
    if prior > 0:
        w = w + prior * (1 - np.eye(k))
    theta = np.zeros((s, k)) if start is None else np.array(np.broadcast_to(start, (s, k)), dtype=np.float64)
    theta -= theta.mean(axis=1, keepdims=True)
    done = np.zeros(s, dtype=bool)
    n = w + np.transpose(w, (0, 2, 1))
    ones = np.ones((k, k))
    for _ in range(100):
        active = np.flatnonzero(~done)
        if active.size == 0:
            break
        t, nn, ww = theta[active], n[active], w[active]
        sig = 1.0 / (1.0 + np.exp(t[:, None, :] - t[:, :, None]))      # P(i beats j)
        grad = ww.sum(axis=2) - (nn * sig).sum(axis=2)
        curv = nn * sig * (1.0 - sig)
        neg_hess = np.eye(k) * curv.sum(axis=2)[:, :, None] - curv
        try:
            step = np.linalg.solve(neg_hess + ones, grad[:, :, None])[:, :, 0]
        except np.linalg.LinAlgError:
            break
        base = _loglik(ww, t)
        scale = np.ones(active.size)
        for _ in range(30):  # halve the step until the likelihood does not drop
            worse = _loglik(ww, t + scale[:, None] * step) < base - 1e-12 * np.abs(base)
            if not worse.any():
                break
            scale[worse] /= 2
        theta[active] = t + scale[:, None] * step
        theta[active] -= theta[active].mean(axis=1, keepdims=True)
        done[active] = np.max(np.abs(scale[:, None] * step), axis=1) < max(tol, 1e-12)
    if not done.all():
        rest = np.flatnonzero(~done)
        theta[rest] = _mm_many(w[rest], max_iter, tol, theta[rest])
    return theta - theta.mean(axis=1, keepdims=True)


def _loglik(w: np.ndarray, theta: np.ndarray) -> np.ndarray:
    diff = theta[:, :, None] - theta[:, None, :]
    return np.sum(w * -np.logaddexp(0.0, -diff), axis=(1, 2))


def _mm_many(w: np.ndarray, max_iter: int, tol: float, start: np.ndarray) -> np.ndarray:
    """Hunter's MM iterations (prior already added to ``w``); each matrix stops once its own step is below tol."""
    n = w + np.transpose(w, (0, 2, 1))
    total_wins = w.sum(axis=2)
    p = np.exp(start - start.mean(axis=1, keepdims=True))
    active = np.arange(w.shape[0])
    for _ in range(max_iter):
        if active.size == 0:
            break
        cur = p[active]
        denom = (n[active] / (cur[:, :, None] + cur[:, None, :])).sum(axis=2)
        positive = denom > 0
        new = np.where(positive, total_wins[active] / np.where(positive, denom, 1.0), cur)
        new = np.maximum(new, 1e-300)
        new /= np.exp(np.mean(np.log(new), axis=1, keepdims=True))
        step = np.max(np.abs(np.log(new) - np.log(cur)), axis=1)
        p[active] = new
        active = active[step >= tol]
    logp = np.log(p)
    return logp - logp.mean(axis=1, keepdims=True)


def win_matrix(names: Sequence[str], verdicts: Sequence[Mapping[str, Any]]) -> np.ndarray:
    """Fractional wins from pair scores: a gets (1 + score) / 2 of a win over b, b the rest."""
    index = {n: i for i, n in enumerate(names)}
    w = np.zeros((len(names), len(names)))
    for v in verdicts:
        i, j = index[v["candidate_a"]], index[v["candidate_b"]]
        share = (1.0 + float(v["score"])) / 2.0
        w[i, j] += share
        w[j, i] += 1.0 - share
    return w


def ranks_of(strengths: np.ndarray) -> np.ndarray:
    """Rank 1 = strongest; ties share the better rank (rows ranked separately for a 2-d array)."""
    x = np.asarray(strengths, dtype=np.float64)
    return 1 + np.sum(x[..., None, :] > x[..., :, None] + 1e-12, axis=-1)


def rank_with_bootstrap(verdicts: Sequence[Mapping[str, Any]], samples: int, seed: int,
                        prior: float = 0.01, ranked: Collection[str] | None = None) -> list[PanelRanking]:
    """Strengths on all verdicts, with 95% percentile CIs and rank ranges from a bootstrap over papers.

    All resamples are fitted together (:func:`bradley_terry_many`), warm-started from the fit on all verdicts.
    ``ranked`` names the contestants: only they get ranks (among themselves); every other candidate (a control,
    judged as an anchor) keeps its strength and CI as a reference row with rank None.
    """
    names = sorted({v["candidate_a"] for v in verdicts} | {v["candidate_b"] for v in verdicts})
    if not names:
        return []
    strengths = bradley_terry(names, win_matrix(names, verdicts), prior)
    keep = np.array([ranked is None or n in ranked for n in names])
    ranks = np.zeros(len(names), dtype=np.int64)
    ranks[keep] = ranks_of(strengths[keep])
    by_paper: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for v in verdicts:
        by_paper[v["paper_id"]].append(v)
    papers = sorted(by_paper)
    per_paper = np.stack([win_matrix(names, by_paper[p]) for p in papers])
    boot_s = boot_r = None
    if samples > 0:
        rng = np.random.default_rng(seed)
        draws = rng.integers(0, len(papers), size=(samples, len(papers)))
        counts = np.stack([np.bincount(d, minlength=len(papers)) for d in draws]).astype(np.float64)
        boot_s = bradley_terry_many(np.einsum("sp,pij->sij", counts, per_paper), prior, max_iter=2000, tol=1e-8,
                                    start=strengths)
        boot_r = np.zeros(boot_s.shape, dtype=np.int64)
        boot_r[:, keep] = ranks_of(boot_s[:, keep])
    out = []
    for i, name in enumerate(names):
        ci_low = ci_high = None
        rank_low = rank_high = None
        if boot_s is not None and boot_r is not None:
            ci_low, ci_high = float(np.percentile(boot_s[:, i], 2.5)), float(np.percentile(boot_s[:, i], 97.5))
            rank_low = int(np.floor(np.percentile(boot_r[:, i], 2.5))) if keep[i] else None
            rank_high = int(np.ceil(np.percentile(boot_r[:, i], 97.5))) if keep[i] else None
        out.append(PanelRanking(candidate=name, strength=float(strengths[i]), rank=int(ranks[i]) if keep[i] else None,
                                ci95_low=ci_low, ci95_high=ci_high, rank_low=rank_low, rank_high=rank_high))
    return sorted(out, key=lambda r: (r["rank"] is None, r["rank"] or 0, -r["strength"], r["candidate"]))


#: Decimals kept of a strength or a score before ranks are compared (:func:`agreement`): far above the floating-point
#: noise of their computation, far below any difference that means something.
TIE_DECIMALS = 6


def agreement(verdicts: Sequence[Mapping[str, Any]], gem_per_paper: Mapping[tuple[str, str], float],
              panel_strength: Mapping[str, float], gem_score: Mapping[str, float],
              top: int = 10) -> Agreement:
    """Kendall tau of the two rankings, per-pair sign agreement, and the largest disagreements.

    ``gem_per_paper[(candidate, paper_id)]`` is the candidate's GEM-S on that paper (mean over references).  A pair
    counts when the panel's outcome and the GEM-S difference are both non-zero.
    """
    from scipy.stats import kendalltau

    common = sorted(set(panel_strength) & set(gem_score))
    tau = None
    if len(common) >= 2:
        # ties are ties on every machine: Bradley-Terry's iterations leave candidates with the same record equal only
        # to about 1e-10, and in which direction depends on the CPU's floating-point kernels (a 2-core AVX2 EPYC
        # broke ties an AMX Xeon kept, and published tau 0.615 for 0.646)
        result = kendalltau([round(panel_strength[c], TIE_DECIMALS) for c in common],
                            [round(gem_score[c], TIE_DECIMALS) for c in common])
        tau = None if np.isnan(result.statistic) else float(result.statistic)
    agree = counted = 0
    disagreements: list[Disagreement] = []
    for v in verdicts:
        ga = gem_per_paper.get((v["candidate_a"], v["paper_id"]))
        gb = gem_per_paper.get((v["candidate_b"], v["paper_id"]))
        if ga is None or gb is None or outcome(v["score"]) == 0 or ga == gb:
            continue
        counted += 1
        if np.sign(ga - gb) == outcome(v["score"]):
            agree += 1
        else:
            disagreements.append({"paper_id": v["paper_id"], "candidate_a": v["candidate_a"],
                                  "candidate_b": v["candidate_b"], "panel_score": float(v["score"]),
                                  "gem_diff": float(ga - gb)})
    disagreements.sort(key=lambda d: -abs(d["panel_score"]) * abs(d["gem_diff"]))
    return {"kendall_tau": tau, "pair_agreement": agree / counted if counted else None, "n_pairs": counted,
            "candidates": len(common), "disagreements": disagreements[:top]}

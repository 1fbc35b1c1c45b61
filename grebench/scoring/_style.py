"""The style-controlled view of a board: what a contestant scores beyond the human baseline at the same style.

A metric that reads judgment lines should not reward length or layout, but a board cannot prove it by assumption, so
beside the headline score each contestant gets a style-controlled score, fitted openly (docs/scoring.md).  Per
(contestant, paper) the score's difference to the human baseline's on that paper is regressed on the difference of
their style features (:data:`FEATURES`: words, list items, headings, markdown density) in one pooled least-squares
fit with one intercept per contestant (a fixed effect) and shared style coefficients, as LMArena's style control
does; a contestant's style-controlled score is its intercept, its difference to the human baseline at zero style
difference.  The features are divided by their standard deviations (not centred: zero must stay "the human review's
style", which is what the intercept means), so coefficients read per SD of the style difference.  Intervals are a
percentile bootstrap over papers with the board's samples and seed (the papers of a replicate drawn as
:func:`grebench.scoring._aggregate.rank_intervals` draws them).  Pure functions; the texts are read from the
generations the board's scores were made from.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import TypedDict, cast

import numpy as np

from grebench.scoring._aggregate import _weights
from grebench.scoring._metrics import metric_preprocessor
from grebench.store import Store

#: The style features, in the order of the fit's columns and of every table that shows them.  Length is counted in
#: words (whitespace-separated): the store has token counts for LLM generations only, none for the human reviews.
FEATURES = ("length_words", "list_items", "headings", "markdown_density")
#: Characters counted as markdown markup (per 100 characters of the review: ``markdown_density``).
MARKUP = frozenset("*_#`|~")
_LIST_ITEM = re.compile(r"^[ \t]*(?:[-*+•]|\d{1,3}[.)])[ \t]+\S", re.MULTILINE)
# an ATX heading (`## Strengths`) or a line that is bold and nothing else (`**Strengths:**`), as LLMs head sections
_HEADING = re.compile(r"^[ \t]{0,3}(?:#{1,6}[ \t]+\S.*|\*\*[^*\n]+\*\*:?[ \t]*)$", re.MULTILINE)
METHOD = ("pooled least squares (numpy.linalg.lstsq) over (contestant, paper) rows: the contestant's score minus "
          "the human baseline's on the paper, on the differences of the style features (candidate minus the human "
          "baseline's review of that paper) divided by their standard deviations (not centred), with one intercept "
          "per contestant and shared coefficients; the style-controlled score is the intercept; 95% CIs: percentile "
          "bootstrap resampling papers")


class StyleScore(TypedDict):
    """A contestant's style-controlled score: its difference to the human baseline at zero style difference (nats),
    with the 95% bootstrap CI over papers."""

    score: float
    ci_low: float
    ci_high: float


class StyleCoefficient(TypedDict):
    """One shared coefficient: nats of score difference per standard deviation of the feature's difference (None:
    the feature does not vary within any contestant's papers, so the fit cannot tell it from the intercepts)."""

    coefficient: float | None
    ci_low: float | None
    ci_high: float | None


class StyleControl(TypedDict):
    """What a board publishes once about its style-controlled view: the features, the fitted coefficients with
    their CIs, the mean and the SD of each feature's difference (the SD is the one the feature was divided by), the
    rows and papers fitted, the bootstrap and the method in words."""

    features: list[str]
    coefficients: dict[str, StyleCoefficient]
    feature_means: dict[str, float]
    feature_sds: dict[str, float]
    n_rows: int
    n_papers: int
    contestants: int
    bootstrap_samples: int
    seed: int
    method: str


class StyleFit(TypedDict):
    """:func:`style_control`: the board's part and each fitted contestant's score."""

    board: StyleControl
    scores: dict[str, StyleScore]


class _TextRow(TypedDict):
    candidate: str
    paper_id: str
    text: str | None


def _finite(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def _bootstrap_fits(weights: np.ndarray, owner: np.ndarray, n_owners: int, x: np.ndarray,
                    y: np.ndarray) -> np.ndarray:
    """The fixed-effects fit of every bootstrap replicate at once (replicate × (intercepts, coefficients)): the
    weighted least squares of ``y`` on one intercept per owner and ``x``, through the within transformation
    (Frisch-Waugh-Lovell: the coefficients from the deviations from each owner's weighted means, each intercept its
    mean of ``y`` less its mean of ``x`` times them), so a replicate costs sums, not a solve of the whole design (2 s
    a board with a loop of ``lstsq``).  An owner none of whose rows was drawn has no intercept (NaN)."""
    onehot = (owner[:, None] == np.arange(n_owners)[None, :]).astype(np.float64)  # row × owner
    k = x.shape[1]
    n_w = weights @ onehot  # replicate × owner: the weight of each owner's rows
    s_y = weights @ (onehot * y[:, None])  # replicate × owner
    if k == 0:  # no feature varies: each intercept is its owner's weighted mean
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(n_w > 0, s_y / np.where(n_w > 0, n_w, 1.0), np.nan)
    s_x = (weights @ (onehot[:, :, None] * x[:, None, :]).reshape(len(y), -1)).reshape(-1, n_owners, k)
    s_xx = (weights @ (x[:, :, None] * x[:, None, :]).reshape(len(y), -1)).reshape(-1, k, k)
    s_xy = weights @ (x * y[:, None])  # replicate × k
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = np.where(n_w > 0, 1.0 / n_w, 0.0)
        scatter = s_xx - np.einsum("boi,boj,bo->bij", s_x, s_x, inv)  # within-owner scatter of x
        cross = s_xy - np.einsum("boi,bo,bo->bi", s_x, s_y, inv)
        beta = np.einsum("bij,bj->bi", np.linalg.pinv(scatter), cross)
        intercepts = np.where(n_w > 0, (s_y - np.einsum("boi,bi->bo", s_x, beta)) * inv, np.nan)
    return np.hstack([intercepts, beta])


def style_features(text: str | None) -> tuple[float, float, float, float]:
    """A review's style features, in :data:`FEATURES` order: words, list items (``-``, ``*``, ``+``, ``•`` or
    ``1.`` / ``1)`` at a line's start), headings (markdown ``#`` headings and lines that are bold only), and
    markdown markup characters (:data:`MARKUP`) per 100 characters."""
    if not text:
        return 0.0, 0.0, 0.0, 0.0
    markup = sum(1 for ch in text if ch in MARKUP)
    return (float(len(text.split())), float(len(_LIST_ITEM.findall(text))), float(len(_HEADING.findall(text))),
            100.0 * markup / len(text))


def paper_features(store: Store, metric: str, estimator_id: str, preprocessor: str) -> dict[str, dict[str, tuple[
        float, ...]]]:
    """candidate → {paper → style features} of the reviews a table's scores were made from (the mean over the
    generations scored, where a candidate has several on a paper)."""
    rows = cast(list[_TextRow], store.rows(
        """SELECT DISTINCT s.candidate, s.paper_id, s.generation_id, g.text FROM scores s
           JOIN generations g ON g.generation_id = s.generation_id
           WHERE s.metric = ? AND s.estimator = ? AND s.preprocessor = ?""",
        [metric, estimator_id, metric_preprocessor(metric, preprocessor)]))
    found: dict[tuple[str, str], list[tuple[float, float, float, float]]] = defaultdict(list)
    for r in rows:
        found[(r["candidate"], r["paper_id"])].append(style_features(r["text"]))
    out: dict[str, dict[str, tuple[float, ...]]] = defaultdict(dict)
    for (name, paper), values in found.items():
        out[name][paper] = tuple(float(v) for v in np.mean(np.asarray(values), axis=0))
    return dict(out)


def style_control(per_paper: Mapping[str, Mapping[str, float]], features: Mapping[str, Mapping[str, Sequence[float]]],
                  baseline: str, contestants: Sequence[str], samples: int = 2000, seed: int = 0) -> StyleFit | None:
    """The style-controlled view of one board (see the module's docstring): each of ``contestants`` on the papers it
    shares with ``baseline`` (both with features); None when no row can be fitted."""
    base, base_features = per_paper.get(baseline) or {}, features.get(baseline) or {}
    names, papers, ys, diffs, owners = [], [], [], [], []
    for name in sorted(set(contestants) - {baseline}):
        own, own_features = per_paper.get(name) or {}, features.get(name) or {}
        shared = sorted(p for p in own if p in base and p in own_features and p in base_features)
        if not shared:
            continue
        names.append(name)
        for p in shared:
            owners.append(len(names) - 1)
            papers.append(p)
            ys.append(own[p] - base[p])
            diffs.append(np.asarray(own_features[p], dtype=np.float64) - np.asarray(base_features[p], dtype=np.float64))
    if not names:
        return None
    y, d, owner = np.asarray(ys), np.vstack(diffs), np.asarray(owners)
    sds = d.std(axis=0)
    z = d / np.where(sds > 0, sds, 1.0)
    # a feature that never varies within a contestant's papers is a sum of intercepts: not identified, left out
    within = np.array([any(np.ptp(z[owner == i, k]) > 0 for i in range(len(names))) for k in range(len(FEATURES))])
    design = np.hstack([(owner[:, None] == np.arange(len(names))[None, :]).astype(np.float64), z[:, within]])
    point = np.linalg.lstsq(design, y, rcond=None)[0]
    paper_ids = sorted(set(papers))
    column = np.searchsorted(paper_ids, papers)
    weights = _weights(len(paper_ids), samples, seed)[:, column]  # replicate × row: how often its paper was drawn
    fits = _bootstrap_fits(weights, owner, len(names), z[:, within], y)
    with np.errstate(all="ignore"):
        low, high = np.nanpercentile(fits, [2.5, 97.5], axis=0)
    scores: dict[str, StyleScore] = {name: {"score": float(point[i]), "ci_low": float(low[i]),
                                            "ci_high": float(high[i])} for i, name in enumerate(names)}
    coefficients: dict[str, StyleCoefficient] = {}
    col = len(names)
    for k, feature in enumerate(FEATURES):
        if within[k]:
            coefficients[feature] = {"coefficient": _finite(point[col]), "ci_low": _finite(low[col]),
                                     "ci_high": _finite(high[col])}
            col += 1
        else:
            coefficients[feature] = {"coefficient": None, "ci_low": None, "ci_high": None}
    board: StyleControl = {
        "features": list(FEATURES), "coefficients": coefficients,
        "feature_means": {f: float(m) for f, m in zip(FEATURES, d.mean(axis=0), strict=True)},
        "feature_sds": {f: float(s) for f, s in zip(FEATURES, sds, strict=True)},
        "n_rows": len(y), "n_papers": len(paper_ids), "contestants": len(names), "bootstrap_samples": samples,
        "seed": seed, "method": METHOD}
    return {"board": board, "scores": scores}

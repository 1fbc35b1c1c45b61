"""The information view of a copy: a paper's references explained far beyond what the human review explains.

The lexical detector (:mod:`grebench.bench._copies`) reads words; a copy rewritten beyond its reach (a paraphrase
by another LLM, a translation round trip, words moved apart) still carries the references' information, and GEM-S
measures exactly that.  For a (candidate, paper, reference) score, the **share** of the reference's information the
candidate explains is ``max(pmi, 0) / -marginal``: the log-probability the candidate's lines add to the reference's
lines, over what the reference's lines cost given the abstract alone.

The view is **relative and summed** (issue 48): a copy spread over three or four references explains each of them a
little (0.06-0.10 each with the offline word model, under any absolute floor) but all of them together far more than
the human review of that paper does.  For each paper and scored setup (estimator, preprocessor, metric):

* ``candidate`` = the sum over the paper's references of the candidate's shares;
* ``human`` = the sum over the same references of the human baseline's shares;
* ``typical`` = the median of ``human`` over the papers of that setup (a paper whose human review explains almost
  nothing does not make every candidate an outlier);

and the paper is flagged when ``candidate >= HUMAN_FACTOR * max(human, typical)``.  No absolute floor: the bar is
the human review's, on that paper and in that setup.  A flag holds a submission for the operator (approval refuses
with the evidence); the pipeline runs the view again whenever scores change (:func:`grebench.submissions.recheck_held`),
so a flag raised after approval holds it again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from grebench.store import Store

#: A paper is flagged when the candidate explains at least this many times the human review's summed share (or the
#: setup's typical human share, if larger).  Measured with the offline estimator on 10 papers of each bundled sample
#: (``benchmarks/copy_detection.py``, a small run on a shared machine): a reviewer's own review scored as a candidate
#: against the paper's other references reaches at most 2.0 times the bar (median 0.45; 68 reviews); the content
#: words of every review in 9 rows, a median of 2.3 times; 30 % of every review after another paper's reviews, 6.6
#: times.  The offline word model reads word salad poorly, so the lexical evidence and the prose test carry those
#: cases; this view is the line for paraphrases (an LM reads a paraphrase's information, the words do not).
HUMAN_FACTOR = 3.0
#: The human baseline's candidate name (:data:`grebench.bench.HUMAN`; not imported, to keep this module a leaf).
HUMAN = "human"


@dataclass(frozen=True)
class InformationFlag:
    """One paper whose references the candidate explains far beyond what the human review of the paper does."""

    paper_id: str
    reference_review_id: str  # the reference it explains most of
    metric: str
    share: float              # summed over the paper's references
    human_share: float | None  # the human review's, over the same references
    typical: float | None = None  # the setup's median human summed share
    references: int = 0

    def describe(self) -> str:
        """``paper: explains 31% of its 3 references' information under gem-s, most of R (the human review: 4%; a
        typical paper's human review: 5%)``."""
        human = "no human baseline" if self.human_share is None else f"the human review: {self.human_share:.0%}"
        typical = "" if self.typical is None else f"; a typical paper's human review: {self.typical:.0%}"
        return (f"{self.paper_id}: explains {self.share:.0%} of its {self.references} references' information under "
                f"{self.metric}, most of {self.reference_review_id} ({human}{typical})")


def information_flags(store: Store, candidate: str, metric: str = "gem-s") -> list[InformationFlag]:
    """Every paper whose stored scores of ``candidate`` under ``metric`` explain its references far beyond the human
    review (see the module docstring), across every scored setup; empty when nothing is scored yet."""
    rows = store.rows(
        "WITH shares AS (SELECT candidate, estimator, preprocessor, paper_id, reference_review_id, "
        "  greatest(pmi, 0) / -marginal AS share FROM scores WHERE metric = ? AND marginal < 0 "
        "  AND candidate IN (?, ?)), "
        "human AS (SELECT estimator, preprocessor, paper_id, reference_review_id, share FROM shares "
        "  WHERE candidate = ?), "
        "human_sum AS (SELECT estimator, preprocessor, paper_id, sum(share) AS share FROM human GROUP BY ALL), "
        "typical AS (SELECT estimator, preprocessor, median(share) AS typical FROM human_sum GROUP BY ALL), "
        "mine AS (SELECT s.estimator, s.preprocessor, s.paper_id, sum(s.share) AS share, "
        "  sum(h.share) AS human_share, count(h.share) AS matched, count(*) AS refs, "
        "  arg_max(s.reference_review_id, s.share) AS top FROM shares s LEFT JOIN human h "
        "  USING (estimator, preprocessor, paper_id, reference_review_id) WHERE s.candidate = ? GROUP BY ALL) "
        "SELECT m.*, t.typical FROM mine m LEFT JOIN typical t USING (estimator, preprocessor) "
        "ORDER BY m.share DESC, m.paper_id",
        [metric, candidate, HUMAN, HUMAN, candidate])
    flags: list[InformationFlag] = []
    seen: set[str] = set()
    for r in rows:
        human = float(r["human_share"]) if r["matched"] else None
        typical = None if r["typical"] is None else float(r["typical"])
        bar = max(human or 0.0, typical or 0.0)
        if r["paper_id"] in seen or bar <= 0 or float(r["share"]) < HUMAN_FACTOR * bar:
            continue  # (no human score in the setup: nothing to compare with)
        seen.add(r["paper_id"])
        flags.append(InformationFlag(r["paper_id"], r["top"], metric, round(float(r["share"]), 4),
                                     None if human is None else round(human, 4),
                                     None if typical is None else round(typical, 4), int(r["refs"])))
    return flags


#: The submission-level test (issue 62): a submission is held when its per-paper information is shifted above
#: :data:`SHIFT_FACTOR` times the honest reviewers' (the human baseline and the built-in models) on the same papers,
#: one-sided p below :data:`SHIFT_ALPHA` (Bonferroni over the scored setups).  Per-paper flags let a copy through
#: wherever it stays under :data:`HUMAN_FACTOR`; summed over the submission, copying a little on many papers cannot
#: hide.  The factor leaves room for a candidate genuinely better than the honest reviewers of the sample
#: (docs/security.md measures both sides: honest submissions and tailored copies).
SHIFT_FACTOR = 1.1
SHIFT_ALPHA = 0.01
#: Added to every information value (in units of the sample's median honest information) before its logarithm: a
#: paper where everyone explains (almost) nothing is no evidence either way.
SHIFT_FLOOR = 0.05
#: Fewer papers than this are never tested (the sign-flip test cannot reach SHIFT_ALPHA below 8 papers).
SHIFT_MIN_PAPERS = 8


@dataclass(frozen=True)
class ShiftTest:
    """The submission-level test over ``papers`` papers: the mean of log(candidate / (SHIFT_FACTOR x the honest
    reviewers' geometric mean)), its one-sided p, and the papers that carry the excess (where the candidate explains
    more than SHIFT_FACTOR times the *best* honest reviewer; largest first)."""

    papers: int
    mean_log_excess: float
    p: float
    excess_papers: tuple[str, ...]
    setup: str = ""
    ratio: float = float("nan")  # the candidate's information over the honest reviewers' (geometric mean, no factor)

    @property
    def held(self) -> bool:
        return self.papers >= SHIFT_MIN_PAPERS and self.p < SHIFT_ALPHA

    def describe(self) -> str:
        """``information shift test (offline / rules): 40 papers, 1.9x the honest reviewers' information on the same
        papers (bar 1.25x, alpha 0.01), one-sided p < 0.001; the excess on 12 papers: P1, P2, ...``."""
        from grebench.scoring._aggregate import format_p

        shown = ", ".join(self.excess_papers[:8]) + (", ..." if len(self.excess_papers) > 8 else "")
        where = f" ({self.setup})" if self.setup else ""
        return (f"information shift test{where}: {self.papers} papers, {self.ratio:.2f}x the honest reviewers' "
                f"information on the same papers (bar {SHIFT_FACTOR:g}x, alpha {SHIFT_ALPHA:g}), one-sided "
                f"{format_p(self.p, self.papers)}" + (f"; the excess on {len(self.excess_papers)} papers: {shown}"
                                                      if self.excess_papers else ""))


def _logs(candidate: dict[str, float], honest: dict[str, list[float]]
          ) -> tuple[list[str], Callable[[float], float]]:
    """The papers both have, and the per-paper log the shift and sealed-gap tests compare:
    ``log(value / scale + SHIFT_FLOOR)``, the scale the median honest value on those papers (a typical honest
    review's information)."""
    import math

    common = sorted(p for p in candidate if honest.get(p))
    middle = sorted(v for p in common for v in honest[p])
    scale = (middle[len(middle) // 2] if middle else 0.0) or 1.0

    def log(v: float) -> float:
        return math.log(max(v, 0.0) / scale + SHIFT_FLOOR)

    return common, log


Shares = dict[tuple[str, str], tuple[dict[str, float], dict[str, list[float]], set[str]]]


def stored_shares(store: Store, candidate: str, metric: str = "gem-s") -> Shares:
    """Per scored setup (estimator, preprocessor): ``candidate``'s summed GEM-S share of each paper's references,
    the honest reviewers' (candidates of kind ``human`` or ``llm``) on each paper, and the papers where the
    candidate's scored generation is sealed (``generations.sealed``, read now); one query for the shift and
    sealed-gap tests."""
    rows = store.rows(
        "SELECT s.candidate, s.estimator, s.preprocessor, s.paper_id, "
        "  sum(greatest(s.pmi, 0) / -s.marginal) AS share, coalesce(bool_and(g.sealed), false) AS sealed "
        "FROM scores s JOIN candidates c ON c.name = s.candidate "
        "LEFT JOIN generations g ON g.generation_id = s.generation_id "
        "WHERE s.metric = ? AND s.marginal < 0 AND (s.candidate = ? OR c.kind IN ('human', 'llm')) GROUP BY ALL",
        [metric, candidate])
    setups: Shares = {}
    for r in rows:
        mine, honest, sealed = setups.setdefault((r["estimator"], r["preprocessor"]), ({}, {}, set()))
        if r["candidate"] == candidate:
            mine[r["paper_id"]] = float(r["share"])
            if r["sealed"]:
                sealed.add(r["paper_id"])
        else:
            honest.setdefault(r["paper_id"], []).append(float(r["share"]))
    return setups


def shift_test(candidate: dict[str, float], honest: dict[str, list[float]], setup: str = "") -> ShiftTest:
    """The one-sided sign-flip test (:func:`grebench.scoring.paired_test`, the paper as the unit) of per-paper
    ``log(candidate + floor) − mean(log(honest + floor)) − log(SHIFT_FACTOR)`` over the papers both have: is the
    candidate's information shifted above the honest reviewers' on the same papers by more than the factor?"""
    import math

    from grebench.scoring._aggregate import paired_test

    common, log = _logs(candidate, honest)
    if not common:
        return ShiftTest(0, float("nan"), 1.0, (), setup)
    d = {p: log(candidate[p]) - sum(log(v) for v in honest[p]) / len(honest[p]) for p in common}
    test = paired_test([v - math.log(SHIFT_FACTOR) for v in d.values()])
    p = test.p / 2 if test.diff > 0 else 1 - test.p / 2
    over = {p: log(candidate[p]) - log(max(honest[p])) for p in common}
    excess = tuple(sorted((k for k in common if over[k] > math.log(SHIFT_FACTOR)), key=lambda k: (-over[k], k)))
    return ShiftTest(len(common), round(test.diff, 4), float(p), excess, setup,
                     round(math.exp(sum(d.values()) / len(d)), 4))


def information_shift(store: Store, candidate: str, metric: str = "gem-s") -> ShiftTest | None:
    """:func:`shift_test` of ``candidate``'s stored scores against the honest reviewers' (the human baseline and the
    built-in models: candidates of kind ``human`` or ``llm``) in each scored setup; the most significant, its p
    multiplied by the number of setups tested (Bonferroni).  None when nothing is scored."""
    setups = stored_shares(store, candidate, metric)
    tests = [shift_test(mine, honest, f"{est} / {pre}") for (est, pre), (mine, honest, _) in sorted(setups.items())
             if mine]
    tests = [t for t in tests if t.papers]
    if not tests:
        return None
    best = min(tests, key=lambda t: t.p)
    return ShiftTest(best.papers, best.mean_log_excess, min(1.0, best.p * len(tests)), best.excess_papers, best.setup,
                     best.ratio)


#: The sealed-gap test (issue 62): a submitted model reviews two kinds of paper, those whose reviews were still
#: hidden when it wrote (sealed: nothing to copy) and those whose reviews were already public (vouched for by its
#: declared cutoff once the operator approves it).  An honest model's information relative to the honest reviewers
#: of the same papers does not depend on whether the reviews were public when it wrote; a copy's does, whatever its
#: wording, because the copied information exists only where the reviews were public.  The test asks whether the
#: model's per-paper information (as :func:`shift_test` measures it) is higher on its public papers than on its
#: sealed ones by more than :data:`GAP_FACTOR`, one-sided p below :data:`GAP_ALPHA`, with at least
#: :data:`GAP_MIN_PAPERS` papers of each kind.  It bounds what copying buys by the model's *own* sealed level, which
#: no rewording raises; the shift test bounds it by the honest reviewers'.
GAP_FACTOR = 1.1
GAP_ALPHA = 0.01
GAP_MIN_PAPERS = 8
#: Random relabellings of the two-sample permutation test (seeded: the same values give the same p everywhere).
GAP_PERMUTATIONS = 20_000
_GAP_SEED = 20261207


@dataclass(frozen=True)
class GapTest:
    """The sealed-gap test of one submitted model: papers of each kind, the mean log excess of its public papers'
    information over its sealed papers' (relative to the honest reviewers of each paper), its one-sided p, and the
    public papers that carry the excess (above the sealed papers' median by more than the factor; largest first)."""

    public: int
    sealed: int
    mean_log_gap: float
    p: float
    excess_papers: tuple[str, ...]
    setup: str = ""

    @property
    def ratio(self) -> float:
        """exp(mean log gap): its information on public papers over that on sealed papers (each relative to the
        honest reviewers of the paper; 1.0 for an honest model)."""
        import math

        return math.exp(self.mean_log_gap) if math.isfinite(self.mean_log_gap) else float("nan")

    @property
    def testable(self) -> bool:
        return self.public >= GAP_MIN_PAPERS and self.sealed >= GAP_MIN_PAPERS

    @property
    def held(self) -> bool:
        return self.testable and self.p < GAP_ALPHA

    def describe(self) -> str:
        """``sealed-gap test (offline / rules): on its 20 papers whose reviews were public when it wrote, 2.41x its
        information on its 20 sealed papers, relative to the honest reviewers of each (bar 1.1x, alpha 0.01),
        one-sided p < 0.001; the excess on 14 papers: P1, ...``."""
        from grebench.scoring._aggregate import format_p

        where = f" ({self.setup})" if self.setup else ""
        if not self.testable:
            return (f"sealed-gap test{where}: not yet testable: {self.sealed} sealed and {self.public} public papers "
                    f"scored (it needs {GAP_MIN_PAPERS} of each)")
        shown = ", ".join(self.excess_papers[:8]) + (", ..." if len(self.excess_papers) > 8 else "")
        return (f"sealed-gap test{where}: on its {self.public} papers whose reviews were public when it wrote, "
                f"{self.ratio:.2f}x its information on its {self.sealed} sealed papers, relative to the honest "
                f"reviewers of each (bar {GAP_FACTOR:g}x, alpha {GAP_ALPHA:g}), one-sided "
                f"{format_p(self.p, self.public + self.sealed)}"
                + (f"; the excess on {len(self.excess_papers)} papers: {shown}" if self.excess_papers else ""))


def relative_information(candidate: dict[str, float], honest: dict[str, list[float]]) -> dict[str, float]:
    """Per paper both have: log(candidate + floor) − mean log(honest + floor), in units of the median honest value
    (:func:`shift_test`'s per-paper value before its factor)."""
    common, log = _logs(candidate, honest)
    return {p: log(candidate[p]) - sum(log(v) for v in honest[p]) / len(honest[p]) for p in common}


def gap_test(candidate: dict[str, float], honest: dict[str, list[float]], sealed: set[str] | frozenset[str],
             setup: str = "") -> GapTest:
    """The one-sided two-sample permutation test of ``mean(d[public]) − mean(d[sealed]) > log(GAP_FACTOR)`` where
    ``d`` is :func:`relative_information` and a paper is sealed when it is in ``sealed`` (the model wrote before the
    paper's reviews were public).  Under the null the public papers' values, less ``log(GAP_FACTOR)``, are
    exchangeable with the sealed ones'; :data:`GAP_PERMUTATIONS` seeded relabellings give p = (1 + as extreme) /
    (1 + relabellings)."""
    import math

    import numpy as np

    d = relative_information(candidate, honest)
    pub = sorted(p for p in d if p not in sealed)
    sea = sorted(p for p in d if p in sealed)
    if not pub or not sea:
        return GapTest(len(pub), len(sea), float("nan"), 1.0, (), setup)
    a = np.array([d[p] for p in pub]) - math.log(GAP_FACTOR)
    b = np.array([d[p] for p in sea])
    observed = float(a.mean() - b.mean())
    pooled = np.concatenate([a, b])
    rng = np.random.default_rng(_GAP_SEED)
    extreme, done = 0, 0
    chunk = max(1, min(GAP_PERMUTATIONS, 2_000_000 // pooled.size))  # about 16 MB of relabellings at a time
    while done < GAP_PERMUTATIONS:
        k = min(chunk, GAP_PERMUTATIONS - done)
        perms = rng.permuted(np.tile(pooled, (k, 1)), axis=1)
        stats = perms[:, :a.size].mean(axis=1) - perms[:, a.size:].mean(axis=1)
        extreme += int(np.count_nonzero(stats >= observed * (1 - 1e-9) - 1e-12))
        done += k
    p = (1 + extreme) / (1 + GAP_PERMUTATIONS)
    level = float(np.median(b)) + math.log(GAP_FACTOR)
    excess = tuple(sorted((k for k in pub if d[k] > level), key=lambda k: (-d[k], k)))
    return GapTest(len(pub), len(sea), round(observed + math.log(GAP_FACTOR), 4), float(p), excess, setup)


def sealed_gap(store: Store, candidate: str, metric: str = "gem-s") -> GapTest | None:
    """:func:`gap_test` of ``candidate``'s stored scores in each scored setup: its per-paper information against the
    honest reviewers' (candidates of kind ``human`` or ``llm``), a paper sealed when the generation scored there was
    (``generations.sealed``, read now: a link found later unseals it); the most significant test, its p multiplied
    by the number of setups tested (Bonferroni).  None when nothing is scored."""
    setups = stored_shares(store, candidate, metric)
    tests = [gap_test(mine, honest, sealed, f"{est} / {pre}")
             for (est, pre), (mine, honest, sealed) in sorted(setups.items()) if mine]
    tests = [t for t in tests if t.public or t.sealed]
    if not tests:
        return None
    testable = [t for t in tests if t.testable]
    if not testable:
        return max(tests, key=lambda t: (min(t.sealed, t.public), t.setup))
    best = min(testable, key=lambda t: t.p)
    return GapTest(best.public, best.sealed, best.mean_log_gap, min(1.0, best.p * len(testable)), best.excess_papers,
                   best.setup)

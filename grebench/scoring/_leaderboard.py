"""The leaderboard: a pure function of ``scores`` rows for one (metric, estimator, preprocessor).

Per candidate and paper the PMI is averaged over the references; the benchmark score is the mean over papers, with
bootstrap CIs over papers, a rank interval, and a paired comparison with the human baseline.  LLM candidates count
only on papers they cannot have seen reviewed (clean by training cutoff, or sealed: generated before the reviews
were public); the human baseline and the controls count on every paper.  An LLM with no clean paper at all (e.g. a
model trained after every paper's reviews were public) is not hidden: it gets a row scored on its contaminated
papers, with ``clean_papers = 0`` and no rank (:func:`is_contaminated_row`): shown in a labelled band below the
ranking, never ranked with the clean candidates.  A contestant that did not review the board's sample (it failed on
papers it was due to review) is shown too, ``complete`` false and no rank (:mod:`grebench.scoring._coverage`):
failing on the papers it would do badly on must not buy a rank.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from typing import Any, NotRequired, TypedDict, TypeVar, cast

from grebench.bench import (
    BASELINE,
    CONTESTANT,
    CONTROL_KIND,
    CONTROLS,
    HUMAN,
    HUMAN_KIND,
    REFERENCE,
    floor_controls,
    is_clean,
    is_vouched,
    kind_info,
)
from grebench.scoring._aggregate import ALPHA, bootstrap_ci, format_p, paired_difference, rank_intervals
from grebench.scoring._coverage import DEFAULT_MAX_MISSING_SHARE, coverage
from grebench.scoring._metrics import metric_preprocessor
from grebench.scoring._style import StyleControl, StyleScore, paper_features, style_control
from grebench.store import PUBLIC_SINCE_VIEW, Store


class ScoredTable(TypedDict):
    """A (metric, estimator, preprocessor) combination with scores (:func:`available_tables`)."""

    metric: str
    estimator: str
    preprocessor: str
    pairs: int
    candidates: int


class CandidateFacts(TypedDict):
    """What :func:`per_paper_scores` tells of a candidate beside its per-paper scores: pairs, sealed and
    no-lines papers counted on its clean papers, every paper it was scored on, its kind, role and vouching."""

    pairs: int
    sealed: int
    papers_scored: int
    kind: str | None
    role: str
    no_lines: int
    vouched: bool | None


class PaperScores(TypedDict):
    """:func:`per_paper_scores`: candidate → {paper → mean PMI over references} on its clean papers (and on its
    contaminated ones), with each candidate's facts."""

    scores: dict[str, dict[str, float]]
    info: dict[str, CandidateFacts]
    contaminated: dict[str, dict[str, float]]


class _PaperScoreRow(TypedDict):
    candidate: str
    paper_id: str
    pmi: float
    pairs: int
    kind: str | None
    cutoff: date | None
    candidate_params: str | None
    public_at: datetime | None
    sealed: bool | None
    no_lines: bool | None


class FloorTest(TypedDict):
    """A row against one floor control (:func:`grebench.bench.floor_controls`), by the board's paired test over the
    papers both were scored on: the mean difference (row minus control), its p, how many papers, and whether it is
    told apart from the control (p < :data:`ALPHA`)."""

    diff: float
    p: float
    papers: int
    distinguishable: bool


class RowFields(TypedDict):
    """The fields of a candidate's row on a board, as :func:`leaderboard` computes them and ``board_rows`` stores
    them (field names are a stable contract: see docs/scoring.md)."""

    candidate: str
    kind: str | None
    role: str
    score: float
    ci90_low: float
    ci90_high: float
    ci95_low: float
    ci95_high: float
    papers: int
    pairs: int
    rank: int | None
    rank_low: float | None
    rank_high: float | None
    clean_papers: int
    contaminated_papers: int
    vouched: bool | None
    due_papers: int | None
    missing_papers: int | None
    complete: bool | None
    sealed_share: float | None
    diff_vs_human: float | None
    p_vs_human: float | None
    # the style-controlled view (:mod:`grebench.scoring._style`): a contestant's difference to the human baseline
    # at zero style difference, with its 95% CI (None: not a contestant, or no paper shared with the baseline)
    style_score: float | None
    style_ci95_low: float | None
    style_ci95_high: float | None
    # the row against each floor control present on the board (control name → test; None: a control, or no floor
    # control on the board)
    vs_floor: dict[str, FloorTest] | None


class LeaderboardRow(RowFields):
    """One row of :func:`leaderboard`: its fields and the board's setup."""

    metric: str
    estimator: str
    preprocessor: str


class StoredRow(RowFields):
    """A ``board_rows`` row: its fields, its board and the candidate's mean cost and latency per review."""

    board_id: str
    cost_usd: float | None
    latency_s: float | None


class BoardRow(StoredRow, LeaderboardRow):
    """A board's row as :func:`grebench.scoring.stored_boards` gives it: the stored row with its board's setup and
    its style-controlled score as one value (``style_controlled``: :func:`style_controlled`)."""

    style_controlled: NotRequired[StyleScore | None]
    #: the word the pages use for the row: ``ranked``, ``reference`` (a control, the human baseline), ``incomplete``,
    #: ``contaminated`` (:func:`rank_word`)
    status: NotRequired[str]


class RankedBoard(TypedDict):
    """:func:`ranked_board`: the rows, best first, and the board's style-controlled fit (None: nothing to fit)."""

    rows: list[LeaderboardRow]
    style_control: StyleControl | None


def style_controlled(row: Mapping[str, Any]) -> StyleScore | None:
    """A row's style-controlled score as leaderboard.json and ``grebench leaderboard --json`` give it,
    ``{"score", "ci_low", "ci_high"}`` (None: the row has none, or was stored before the view existed)."""
    if row.get("style_score") is None:
        return None
    low, high = row.get("style_ci95_low"), row.get("style_ci95_high")
    return {"score": float(row["style_score"]), "ci_low": math.nan if low is None else float(low),
            "ci_high": math.nan if high is None else float(high)}


def _kind(name: str, stored: str | None) -> str | None:
    """The stored kind; a candidate missing from ``candidates`` (an old export) by its name (None: unknown, a
    contestant)."""
    if stored:
        return stored
    return HUMAN_KIND if name == HUMAN else CONTROL_KIND if name in CONTROLS else None


def available_tables(store: Store) -> list[ScoredTable]:
    """The (metric, estimator, preprocessor) combinations that have scores, with their row counts."""
    return cast(list[ScoredTable], store.rows(
        """SELECT metric, estimator, preprocessor, count(*) AS pairs, count(DISTINCT candidate) AS
                         candidates FROM scores GROUP BY ALL ORDER BY metric, estimator, preprocessor"""))


# A pair scored with x = ∅ (no judgment lines) has conditional = marginal exactly (the same request); its PMI is
# replaced by the reference's floor: the lowest PMI on that reference of a review with lines from the reference set
# (the human baseline and the controls, which every store scores on every paper), at most 0.  Never a submitted or
# imported candidate's: then importing one review that scores badly would move every published row that gets the
# floor (a control such as `empty`), and what a board says of the reference set would depend on who else entered.
# Use with FLOOR_JOIN (parameters: metric, estimator, preprocessor) and scores aliased `s`.
FLOORED_PMI = "CASE WHEN s.conditional = s.marginal THEN least(0.0, coalesce(f.floor, 0.0)) ELSE s.pmi END"
_REFERENCE_SET = f"SELECT name FROM candidates WHERE kind IN ('{HUMAN_KIND}', '{CONTROL_KIND}')"
_FLOORS = f"""SELECT paper_id, reference_review_id, min(pmi) AS floor FROM scores
              WHERE metric = ? AND estimator = ? AND preprocessor = ? AND conditional <> marginal
                AND candidate IN ({_REFERENCE_SET})
              GROUP BY paper_id, reference_review_id"""
FLOOR_JOIN = f"""LEFT JOIN ({_FLOORS}) f
                 ON f.paper_id = s.paper_id AND f.reference_review_id = s.reference_review_id"""


def reference_floors(store: Store, metric: str, estimator_id: str, preprocessor: str) -> dict[tuple[str, str], float]:
    """The floor of each (paper, reference) as :data:`FLOORED_PMI` applies it: the lowest PMI of a reference-set
    review (human baseline, controls) with judgment lines, at most 0 (a pair without a floor gets 0)."""
    return {(p, r): min(0.0, float(v)) for p, r, v in store.con.execute(
        _FLOORS, [metric, estimator_id, preprocessor]).fetchall()}


def per_paper_scores(store: Store, metric: str, estimator_id: str, preprocessor: str) -> PaperScores:
    """candidate → {paper → mean PMI over references}, plus pair counts, kinds and clean/sealed papers.

    A review with no judgment lines (empty, or nothing a judgment can be read from) is scored with x = ∅, so its
    conditional request *is* the marginal one and its PMI is exactly 0 — which would put saying nothing above every
    review that misleads on some reference.  Such a review carries no information about the paper: on each reference
    it gets the floor instead, the lowest PMI of a reference-set review (the human baseline, the controls) with
    judgment lines (at most 0): :data:`FLOORED_PMI`.
    """
    preprocessor = metric_preprocessor(metric, preprocessor)
    rows = cast(list[_PaperScoreRow], store.rows(
        f"""SELECT s.candidate, s.paper_id, avg({FLOORED_PMI}) AS pmi, count(*) AS pairs, any_value(c.kind) AS kind,
                  any_value(c.cutoff) AS cutoff, any_value(c.params_json) AS candidate_params,
                  any_value(p.public_since) AS public_at,
                  bool_or(coalesce(g.sealed, false)) AS sealed, bool_and(s.conditional = s.marginal) AS no_lines
           FROM scores s LEFT JOIN candidates c ON c.name = s.candidate
           LEFT JOIN {PUBLIC_SINCE_VIEW} p ON p.paper_id = s.paper_id
           LEFT JOIN generations g ON g.generation_id = s.generation_id
           {FLOOR_JOIN}
           WHERE s.metric = ? AND s.estimator = ? AND s.preprocessor = ?
           GROUP BY s.candidate, s.paper_id ORDER BY s.candidate, s.paper_id""",
        [metric, estimator_id, preprocessor, metric, estimator_id, preprocessor]))
    scores: dict[str, dict[str, float]] = defaultdict(dict)
    contaminated: dict[str, dict[str, float]] = defaultdict(dict)
    info: dict[str, CandidateFacts] = defaultdict(lambda: {"pairs": 0, "sealed": 0, "papers_scored": 0, "kind": None,
                                                           "role": CONTESTANT, "no_lines": 0, "vouched": None})
    for r in rows:
        name = r["candidate"]
        kind = _kind(name, r["kind"])
        facts = kind_info(kind)
        entry = info[name]
        entry["kind"], entry["role"] = kind, facts.role
        entry["vouched"] = is_vouched(kind, r["cutoff"], r["candidate_params"])
        entry["papers_scored"] += 1
        if not facts.always_clean and not (r["sealed"] or is_clean(r["cutoff"], r["public_at"], kind)):
            contaminated[name][r["paper_id"]] = float(r["pmi"])  # not ranked; shown only when nothing is clean
            continue
        scores[name][r["paper_id"]] = float(r["pmi"])
        entry["no_lines"] += int(bool(r["no_lines"]))
        entry["pairs"] += int(r["pairs"])
        entry["sealed"] += int(bool(r["sealed"]))
    return {"scores": dict(scores), "info": dict(info), "contaminated": dict(contaminated)}


def is_incomplete_row(row: Mapping[str, Any]) -> bool:
    """Whether a leaderboard row is a contestant that did not review the board's sample (no rank); a row stored
    before completeness was recorded (``complete`` NULL) is not."""
    role = row.get("role") or kind_info(row.get("kind")).role
    return role == CONTESTANT and row.get("rank") is None and row.get("complete") is False


def is_contaminated_row(row: Mapping[str, Any]) -> bool:
    """Whether a leaderboard row is a contestant shown on contaminated papers only (no rank)."""
    role = row.get("role") or kind_info(row.get("kind")).role
    return (role == CONTESTANT and row.get("rank") is None and not row.get("clean_papers")
            and not is_incomplete_row(row))


#: The one word for an unranked row, in the rank column of the site, the app and the CLI (and leaderboard.json's
#: ``status``): a contestant with no clean paper, and a control (a reference point of the metric, never ranked).
CONTAMINATED = "contaminated"
INCOMPLETE = "incomplete"
REFERENCE_WORD = "reference"
#: Why a contaminated row is not ranked, true for every way a paper is clean: a trusted training cutoff before the
#: paper's reviews were public, or a review written/received before then (sealed).  An untrusted import has no
#: cutoff at all, so blaming "the model's training cutoff" would be false for it.
CONTAMINATED_NOTE = ("contaminated: on every paper of this board the human reviews were already public before the "
                     "candidate's review was written or received, and no trusted training cutoff predates them, so it "
                     "may have seen them; scored for reference, never ranked.")


#: Why an incomplete row is not ranked.
INCOMPLETE_NOTE = ("incomplete: the candidate has no review of some papers of this board's sample that it was due to "
                   "review (it failed or stopped on them, or was not run on them); a row that could choose its papers "
                   "by failing on the rest is never ranked; scored for reference on the papers it answered.")


def rank_word(row: Mapping[str, Any]) -> str | None:
    """What the rank column says for a row without a rank (None for a ranked row): :data:`INCOMPLETE` for a
    contestant that did not review the board's sample, :data:`CONTAMINATED` for a contestant with no clean paper,
    :data:`REFERENCE_WORD` for a control and for the human baseline (a reference line, issue 63), ``not ranked``
    otherwise."""
    if row.get("rank") is not None:
        return None
    if is_incomplete_row(row):
        return INCOMPLETE
    if is_contaminated_row(row):
        return CONTAMINATED
    role = row.get("role") or kind_info(row.get("kind")).role
    return REFERENCE_WORD if role in (REFERENCE, BASELINE) else "not ranked"


def board_floors() -> dict[str, str]:
    """The floor controls every row is tested against (:func:`grebench.bench.floor_controls`), name → what each is
    in words: for the layers above scoring, which do not import the bench."""
    return floor_controls()


def is_baseline_row(row: Mapping[str, Any]) -> bool:
    """Whether a row is the human baseline: a reference line with its score, never ranked (issue 63)."""
    return (row.get("role") or kind_info(row.get("kind")).role) == BASELINE


def floor_tests(per_paper: Mapping[str, float], floors: Mapping[str, Mapping[str, float]], samples: int = 2000,
                seed: int = 0) -> dict[str, FloorTest]:
    """A row's per-paper scores against each floor control's, by the board's paired test
    (:func:`grebench.scoring.paired_difference`); a floor sharing no paper with the row is left out."""
    out: dict[str, FloorTest] = {}
    for name, floor in floors.items():
        diff = paired_difference(per_paper, floor, samples=samples, seed=seed)
        if diff["papers"]:
            out[name] = {"diff": diff["diff"], "p": diff["p"], "papers": int(diff["papers"]),
                         "distinguishable": bool(diff["p"] < ALPHA)}
    return out


def _papers(n: Any) -> str:
    return f"{n} paper" + ("" if n == 1 else "s")


def board_findings(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """What a board can and cannot tell, in words (the site, the app and the CLI print them): each contestant (and
    the human baseline) that the board's paired test cannot tell apart from a floor control, or that scores
    significantly below one; and each control that scores above the human baseline (significantly or not).  Rows
    stored before the floor comparison (no ``vs_floor``) say nothing of the floors."""
    words = floor_controls()
    out: list[str] = []
    for r in rows:
        role = r.get("role") or kind_info(r.get("kind")).role
        if role == REFERENCE:
            continue
        who = "The human baseline" if role == BASELINE else f"{r['candidate']}"
        for control, test in (r.get("vs_floor") or {}).items():
            what = words.get(control, "a floor control")
            p = format_p(test.get("p"), test.get("papers"))
            if not test.get("distinguishable"):
                out.append(f"{who} ({float(r['score']):.2f}) cannot be told apart from {what} (`{control}`): "
                           f"{float(test['diff']):+.2f} nats on {_papers(test['papers'])}, {p}.")
            elif float(test["diff"]) < 0:
                out.append(f"{who} ({float(r['score']):.2f}) scores below {what} (`{control}`): "
                           f"{float(test['diff']):+.2f} nats on {_papers(test['papers'])}, {p}.")
    human = next((r for r in rows if (r.get("role") or kind_info(r.get("kind")).role) == BASELINE), None)
    for r in rows:
        role = r.get("role") or kind_info(r.get("kind")).role
        diff = r.get("diff_vs_human")
        if human is None or role != REFERENCE or diff is None or not math.isfinite(float(diff)) or float(diff) <= 0:
            continue
        p_human = r.get("p_vs_human")
        significant = p_human is not None and math.isfinite(float(p_human)) and float(p_human) < ALPHA
        out.append(f"Control `{r['candidate']}` ({float(r['score']):.2f}) scores above the human baseline "
                   f"({float(human['score']):.2f}): {float(diff):+.2f} nats, {format_p(p_human, r.get('papers'))}"
                   + ("." if significant else ", not significant."))
    return out


def rank_bounds(row: Mapping[str, Any]) -> tuple[int, int] | None:
    """A ranked row's 95% rank interval as whole ranks (None when it has no interval: unranked, or history kept
    before intervals were): the 2.5th percentile rounded down and the 97.5th rounded up, so that the shown interval
    never looks narrower than the bootstrap's (a percentile between two ranks is interpolated)."""
    low, high = row.get("rank_low"), row.get("rank_high")
    if row.get("rank") is None or low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
        return None
    return math.floor(float(low)), math.ceil(float(high))


def rank_range(row: Mapping[str, Any]) -> str | None:
    """A ranked row's 95% rank interval as the site, the app and the CLI write it, ``1–3`` (an en dash; ``1–1``
    for a rank no resample changes); None without one (:func:`rank_bounds`)."""
    bounds = rank_bounds(row)
    return None if bounds is None else f"{bounds[0]}–{bounds[1]}"


_Row = TypeVar("_Row", bound=Mapping[str, Any])


def place_baseline(rows: list[_Row]) -> list[_Row]:
    """The human baseline's row moved among the ranked rows, before the first ranked row it scores above (after
    them all when it scores below every one): a reference line at its score, not a rank."""
    human = [r for r in rows if r.get("role") == BASELINE and r.get("rank") is None]
    if not human:
        return rows
    rest = [r for r in rows if r is not human[0]]
    at = next((i for i, r in enumerate(rest) if r.get("rank") is None or r["score"] < human[0]["score"]),
              len(rest))
    return [*rest[:at], human[0], *rest[at:]]


def leaderboard(store: Store, metric: str, estimator_id: str, preprocessor: str, samples: int = 2000,
                seed: int = 20200426, max_missing_share: float = DEFAULT_MAX_MISSING_SHARE) -> list[LeaderboardRow]:
    """Rows of the leaderboard, best first (field names are a stable contract: see docs/scoring.md):
    :func:`ranked_board`'s rows."""
    return ranked_board(store, metric, estimator_id, preprocessor, samples, seed, max_missing_share)["rows"]


def ranked_board(store: Store, metric: str, estimator_id: str, preprocessor: str, samples: int = 2000,
                 seed: int = 20200426, max_missing_share: float = DEFAULT_MAX_MISSING_SHARE) -> RankedBoard:
    """The rows of the leaderboard, best first, and its style-controlled fit (:mod:`grebench.scoring._style`).

    Ranks (and rank intervals) are computed among the ranked candidates only — LLMs, submitted models and imported
    reviews.  The human baseline is a reference line (``rank`` None, issue 63), listed among the ranked rows at its
    score; controls are reference rows with ``rank`` None, listed after them by score: a control is a yardstick of
    the metric, never a contestant.  Every contestant and the baseline carry ``vs_floor``: the board's paired test
    against each floor control on the board (:func:`grebench.bench.floor_controls`).  A contestant that misses more
    than ``max_missing_share`` of the board papers it was due to review (none for a submitted model or imported
    reviews) is not ranked either (:func:`grebench.scoring._coverage.coverage`).
    """
    data = per_paper_scores(store, metric, estimator_id, preprocessor)
    scores, info = data["scores"], data["info"]
    board_papers = {p for per_paper in (*scores.values(), *data["contaminated"].values()) for p in per_paper}
    covered = coverage(store, board_papers, {name: info[name]["kind"] for name in info}, max_missing_share)
    ranked = {name: per_paper for name, per_paper in scores.items() if info[name]["role"] not in (REFERENCE, BASELINE)
              and (info[name]["role"] != CONTESTANT or name not in covered or covered[name]["complete"])}
    ranks: dict[str, Mapping[str, float | None]] = dict(rank_intervals(ranked, samples=samples, seed=seed))
    for name in scores:
        ranks.setdefault(name, {"rank": None, "rank_low": None, "rank_high": None})
    human = scores.get(HUMAN)
    rows: list[LeaderboardRow] = []
    shown = dict(scores)
    for name, per_paper in data["contaminated"].items():
        if not scores.get(name):  # no clean paper: its contaminated papers, in the unranked band
            shown[name] = per_paper
            ranks[name] = {"rank": None, "rank_low": None, "rank_high": None}
    contestants = [name for name, per_paper in shown.items() if per_paper and info[name]["role"] == CONTESTANT]
    style = style_control(shown, paper_features(store, metric, estimator_id, preprocessor), HUMAN, contestants,
                          samples=samples, seed=seed) if human else None
    styled = style["scores"] if style else {}
    floors = {name: scores[name] for name in floor_controls() if scores.get(name)}
    for name, per_paper in shown.items():
        if not per_paper:
            continue
        controlled = styled.get(name)
        clean = len(scores.get(name) or {})
        ci = bootstrap_ci(list(per_paper.values()), samples=samples, seed=seed)
        diff = paired_difference(per_paper, human, samples=samples, seed=seed) if human and name != HUMAN else None
        if diff is not None and not diff["papers"]:  # no paper in common with the human baseline: no difference
            diff = None
        cov = covered.get(name)
        rank = ranks[name]["rank"]
        rows.append({
            "candidate": name, "kind": info[name]["kind"], "role": info[name]["role"], "metric": metric,
            "estimator": estimator_id,
            "preprocessor": metric_preprocessor(metric, preprocessor),
            "score": ci["score"], "ci90_low": ci["ci90_low"], "ci90_high": ci["ci90_high"],
            "ci95_low": ci["ci95_low"], "ci95_high": ci["ci95_high"],
            "papers": len(per_paper), "pairs": info[name]["pairs"],
            "rank": None if rank is None else int(rank), "rank_low": ranks[name]["rank_low"],
            "rank_high": ranks[name]["rank_high"],
            "clean_papers": clean, "contaminated_papers": info[name]["papers_scored"] - clean,
            # whether the operator vouches for the cutoff (None: baseline, references); unvouched: sealed papers only
            "vouched": info[name]["vouched"],
            # whether it reviewed the board's sample (papers it was due to review, how many it has no review of)
            "due_papers": cov["due_papers"] if cov else None, "missing_papers": cov["missing_papers"] if cov else None,
            "complete": cov["complete"] if cov else None,
            # sealing is about LLMs writing before the reviews were public: no meaning for texts built from them
            "sealed_share": None if info[name]["role"] != CONTESTANT else info[name]["sealed"] / len(per_paper),
            "diff_vs_human": diff["diff"] if diff else None, "p_vs_human": diff["p"] if diff else None,
            "style_score": controlled["score"] if controlled else None,
            "style_ci95_low": controlled["ci_low"] if controlled else None,
            "style_ci95_high": controlled["ci_high"] if controlled else None,
            "vs_floor": None if info[name]["role"] == REFERENCE or not floors else
            floor_tests(per_paper, floors, samples=samples, seed=seed),
        })
    # ranked rows, then the contaminated band, then the controls (reference rows), each by score; the human
    # baseline's reference line sits among the ranked rows at its score
    rows.sort(key=lambda r: (r["rank"] is None, r["role"] == REFERENCE, r["rank"] or 0, -r["score"], r["candidate"]))
    rows = place_baseline(rows)
    return {"rows": rows, "style_control": style["board"] if style else None}

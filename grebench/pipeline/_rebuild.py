"""Rebuild a snapshot's published numbers from its own records (issue 34 §3: ``grebench snapshot rebuild DIR``).

The snapshot is imported into an empty temporary store; its scores and boards are set aside as *published*; the
scores are made again with every recorded setup (the estimator and preprocessor specs of ``scored_setups``, the
metrics the scores carry, the recorded paper sample), the boards are computed again with the recorded bootstrap
samples and seed, and both are compared with what was published: per score group and per board, the largest
difference and whether it is within what the estimator promises (:meth:`EstimatorInfo.tolerance_for`).  A setup
that builds an estimator with another id (other weights, another dtype) cannot reproduce its numbers and fails.

Judgment lines from an LLM preprocessor come from the snapshot (they cannot be asked again); the deterministic
``rules`` lines are made again here.  Nothing outside the temporary directory is written.
"""

from __future__ import annotations

import tempfile
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypedDict, cast

from grebench.pipeline._sample import adopt_snapshot_sample
from grebench.scoring import (
    RAW_PREPROCESSOR,
    RULES_ID,
    EstimatorHandle,
    StoredBoard,
    StoredRow,
    compute_boards,
    resolve_preprocessor,
    run_scoring,
)
from grebench.settings import Settings
from grebench.store import Store, import_snapshot, open_store

#: Board-row fields compared exactly (counts and ranks) and within the tolerance (numbers).
EXACT_FIELDS: tuple[Literal["rank", "papers", "pairs", "clean_papers", "contaminated_papers", "kind"], ...] = (
    "rank", "papers", "pairs", "clean_papers", "contaminated_papers", "kind")
NUMBER_FIELDS: tuple[Literal["score", "ci90_low", "ci90_high", "ci95_low", "ci95_high", "rank_low", "rank_high",
                             "diff_vs_human", "p_vs_human", "sealed_share"], ...] = (
    "score", "ci90_low", "ci90_high", "ci95_low", "ci95_high", "rank_low", "rank_high",
                 "diff_vs_human", "p_vs_human", "sealed_share")
_SCORE_KEY = ("metric", "estimator", "preprocessor", "candidate", "paper_id", "reference_review_id")


class _SetupIds(TypedDict):
    estimator_spec: str
    preprocessor_spec: str
    estimator_id: str
    preprocessor_id: str


class RebuildSetup(_SetupIds):
    """A recorded setup whose scores the snapshot holds, with the metrics those scores carry."""

    metrics: list[str]


class ScoreCheck(TypedDict):
    """One score group (metric, estimator, preprocessor) made again and compared (:func:`_compare_scores`)."""

    what: str
    metric: str
    estimator: str
    preprocessor: str
    n: int
    missing: int
    extra: int
    max_diff: float
    worst: str | None
    tolerance: float
    ok: bool


class BoardCheck(TypedDict):
    """One board computed again and compared (:func:`_compare_boards`)."""

    what: str
    board_id: str
    metric: str
    estimator: str
    preprocessor: str
    scope: str
    rows: int
    max_diff: float
    tolerance: float
    problems: list[str]
    ok: bool


class RebuildReport(TypedDict):
    """:func:`rebuild_snapshot`: whether the published numbers were made again, per setup, score group and board."""

    ok: bool
    setups: list[RebuildSetup]
    scores: list[ScoreCheck]
    boards: list[BoardCheck]
    problems: list[str]


def _tolerance(estimator_id: str) -> float:
    from grebench.scoring.estimators import estimator_info

    return estimator_info(estimator_id).tolerance_for(estimator_id)


def _published(store: Store) -> tuple[dict[tuple[Any, ...], float], list[StoredBoard]]:
    scores = {tuple(r[k] for k in _SCORE_KEY): float(r["pmi"]) for r in store.rows(
        f"SELECT {', '.join(_SCORE_KEY)}, pmi FROM scores")}
    boards = cast(list[StoredBoard], store.rows("SELECT * FROM boards ORDER BY board_id"))
    return scores, boards


def _board_rows(store: Store) -> dict[str, dict[str, StoredRow]]:
    out: dict[str, dict[str, StoredRow]] = defaultdict(dict)
    for r in cast(list[StoredRow], store.rows("SELECT * FROM board_rows")):
        out[r["board_id"]][r["candidate"]] = r
    return out


def _setups(store: Store) -> list[RebuildSetup]:
    """Every recorded setup whose scores the snapshot holds, with the metrics those scores carry."""
    setups: list[RebuildSetup] = []
    for s in cast(list[_SetupIds], store.rows("SELECT DISTINCT estimator_spec, preprocessor_spec, estimator_id, "
                                              "preprocessor_id FROM scored_setups ORDER BY ALL")):
        metrics = [r["metric"] for r in store.rows(
            "SELECT DISTINCT metric FROM scores WHERE estimator = ? AND preprocessor IN (?, ?) ORDER BY metric",
            [s["estimator_id"], s["preprocessor_id"], RAW_PREPROCESSOR])]
        if metrics:
            setups.append({**s, "metrics": metrics})
    return setups


def _compare_scores(published: dict[tuple[Any, ...], float], rebuilt: dict[tuple[Any, ...], float]
                    ) -> list[ScoreCheck]:
    """One result per (metric, estimator, preprocessor): scores missing or extra, the largest difference, the
    score that differs most (named)."""
    groups: dict[tuple[Any, ...], ScoreCheck] = {}
    for key in sorted(set(published) | set(rebuilt), key=str):
        group = groups.setdefault(key[:3], {"what": "scores", "metric": key[0], "estimator": key[1],
                                            "preprocessor": key[2], "n": 0, "missing": 0, "extra": 0,
                                            "max_diff": 0.0, "worst": None, "tolerance": _tolerance(key[1]),
                                            "ok": False})  # said below, once every score is compared
        group["n"] += 1
        if key not in rebuilt:
            group["missing"] += 1
            group["worst"] = group["worst"] or f"{_name(key)}: not made again"
        elif key not in published:
            group["extra"] += 1
            group["worst"] = group["worst"] or f"{_name(key)}: made again, never published"
        else:
            diff = abs(published[key] - rebuilt[key])
            if diff > group["max_diff"]:
                group["max_diff"] = diff
                group["worst"] = f"{_name(key)}: published {published[key]:.9g}, rebuilt {rebuilt[key]:.9g}"
    for g in groups.values():
        g["ok"] = not g["missing"] and not g["extra"] and g["max_diff"] <= g["tolerance"]
    return list(groups.values())


def _name(key: tuple[Any, ...]) -> str:
    return f"score of {key[3]} on paper {key[4]} against review {key[5]} ({key[0]})"


def _compare_boards(boards: list[StoredBoard], published: dict[str, dict[str, StoredRow]],
                    rebuilt: dict[str, dict[str, StoredRow]]) -> list[BoardCheck]:
    out: list[BoardCheck] = []
    for b in boards:
        tol = _tolerance(b["estimator"])
        was, now = published.get(b["board_id"], {}), rebuilt.get(b["board_id"], {})
        problems: list[str] = []
        worst = 0.0
        for cand in sorted(set(was) | set(now)):
            if cand not in now or cand not in was:
                problems.append(f"{cand}: {'missing from' if cand not in now else 'new in'} the rebuilt board")
                continue
            for f in EXACT_FIELDS:
                if was[cand].get(f) != now[cand].get(f):
                    problems.append(f"{cand}: {f} published {was[cand].get(f)}, rebuilt {now[cand].get(f)}")
            for n in NUMBER_FIELDS:
                a, c = was[cand].get(n), now[cand].get(n)
                if (a is None) != (c is None):
                    problems.append(f"{cand}: {n} published {a}, rebuilt {c}")
                elif a is not None and c is not None and abs(float(a) - float(c)) > worst:
                    worst = abs(float(a) - float(c))
                    if worst > tol:
                        problems.append(f"{cand}: {n} published {float(a):.9g}, rebuilt {float(c):.9g}")
        out.append({"what": "board", "board_id": b["board_id"], "metric": b["metric"], "estimator": b["estimator"],
                    "preprocessor": b["preprocessor"], "scope": b["scope"], "rows": len(was), "max_diff": worst,
                    "tolerance": tol, "problems": problems, "ok": not problems})
    return out


def rebuild_snapshot(snapshot_dir: Path, settings: Settings, manifest_sha256: str | None = None,
                     log: Callable[[str], None] | None = None) -> RebuildReport:
    """Rebuild a snapshot's numbers and compare them with the published ones (see the module docstring):
    ``{"ok", "setups", "scores": [per group], "boards": [per board], "problems"}``.  Raises
    :class:`grebench.store.SnapshotError` for a snapshot that does not verify."""
    say = log or (lambda _line: None)
    with tempfile.TemporaryDirectory(prefix="grebench-rebuild-") as tmp:
        work = settings.replace(data_dir=str(Path(tmp) / "data"))
        store = open_store(Path(tmp) / "rebuild.duckdb")
        try:
            import_snapshot(store, snapshot_dir, manifest_sha256,
                            max_expansion=settings.limits.snapshot_import_max_expansion,
                            max_decoded_bytes=settings.limits.snapshot_import_max_mb * 1024 ** 2)
            return _rebuild(store, work, say)
        finally:
            store.close()


def _rebuild(store: Store, settings: Settings, say: Callable[[str], None]) -> RebuildReport:
    published, boards = _published(store)
    published_rows = _board_rows(store)
    setups = _setups(store)
    problems: list[str] = [] if setups else ["the snapshot records no scored setup (scored_setups): nothing says "
                                             "which estimator spec made its scores"]
    sample = adopt_snapshot_sample(store).paper_ids  # the papers the published scores were made on (None: all)
    with store.transaction() as con:  # the published numbers are set aside above: these are made again
        con.execute("DELETE FROM scores")
        con.execute("DELETE FROM logprob_cache")
        con.execute("DELETE FROM judgments WHERE preprocessor = ?", [RULES_ID])  # deterministic: made again
    for s in setups:
        say(f"scoring {', '.join(s['metrics'])} with {s['estimator_spec']} / {s['preprocessor_spec']}")
        handle = EstimatorHandle(s["estimator_spec"], settings)  # this setup's estimator: built here, closed here
        try:
            summary = run_scoring(store, settings, None, s["metrics"], handle=handle,
                                  preprocessor=resolve_preprocessor(s["preprocessor_spec"], settings, store),
                                  paper_ids=sample)
        finally:
            handle.close()
        if summary["estimator"] != s["estimator_id"]:
            problems.append(f"{s['estimator_spec']} builds {summary['estimator']} here, the scores were made with "
                            f"{s['estimator_id']}: another model, dtype or fit cannot give the same numbers")
    rebuilt = {tuple(r[k] for k in _SCORE_KEY): float(r["pmi"]) for r in store.rows(
        f"SELECT {', '.join(_SCORE_KEY)}, pmi FROM scores")}
    runs = {(b["bootstrap_samples"], b["seed"]) for b in boards}
    for samples, seed in sorted(runs) or [(settings.scoring.bootstrap_samples, settings.seed)]:
        compute_boards(store, settings.replace(bootstrap_samples=samples, seed=seed))
        if len(runs) > 1:
            problems.append("the boards were computed with several bootstrap settings: only the last is compared")
    score_results = _compare_scores(published, rebuilt)
    board_results = _compare_boards(boards, published_rows, _board_rows(store))
    ok = not problems and all(r["ok"] for r in score_results + board_results) and bool(board_results)
    if not board_results:
        problems.append("the snapshot publishes no board")
    return {"ok": ok, "setups": setups, "scores": score_results, "boards": board_results, "problems": problems}

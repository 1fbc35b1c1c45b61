"""Leaderboards, computed once at the end of scoring and stored: the site, the app and the CLI only read them.

One board per (venue-year, metric, estimator, preprocessor) and scope: ``all`` (an LLM counts on papers that are
clean by its training cutoff or sealed) and ``sealed`` (an LLM counts only where its review was written before the
reviews were public).  Rows come from :func:`grebench.scoring.leaderboard` (bootstrap over papers, rank
intervals, paired difference with the human baseline) plus the mean cost and latency of the candidate's reviews.
The whole set is rewritten in one transaction, so a reader never sees half of a recomputation.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, TypedDict, cast

from grebench import stop
from grebench.bench import BASELINE, REFERENCE, kinds_with_role
from grebench.progress import NoProgress, Progress
from grebench.scoring._labels import label_parts, store_labels
from grebench.scoring._leaderboard import (
    BoardRow,
    StoredRow,
    place_baseline,
    rank_word,
    ranked_board,
    style_controlled,
)
from grebench.scoring._metrics import headline_metric, metric_preprocessor
from grebench.settings import Settings, StageInputs
from grebench.store import Store, code_files, fingerprint, utcnow

# v3: sample_json holds its venue's share of the paper sample; v4: rows say `vouched`; v5: rows say whether they
# cover the board's sample (`due_papers`, `missing_papers`, `complete`), an incomplete contestant is not ranked;
# v6: the style-controlled view (rows' `style_score` and its CI, the board's `style_control_json`);
# v7: the human baseline is a reference line, not ranked; rows carry their test against the floor controls
# (`vs_floor_json`, issue 63)
BOARD_VERSION = "boards-v7"
SCOPES = ("all", "sealed")
ROW_COLUMNS = ("board_id", "candidate", "kind", "role", "rank", "rank_low", "rank_high", "score", "ci90_low",
               "ci90_high", "ci95_low", "ci95_high", "papers", "pairs", "clean_papers", "contaminated_papers",
               "sealed_share", "diff_vs_human", "p_vs_human", "cost_usd", "latency_s", "vouched", "due_papers",
               "missing_papers", "complete", "style_score", "style_ci95_low", "style_ci95_high", "vs_floor_json")
BOARD_COLUMNS = ("board_id", "venue_id", "venue", "metric", "estimator", "preprocessor", "scope", "papers",
                 "papers_eligible", "sample_json", "human_score", "human_ci95_low", "human_ci95_high",
                 "bootstrap_samples", "seed", "computed_at", "style_control_json")
_HERE = Path(__file__).parent


def board_id(venue_id: str, metric: str, estimator: str, preprocessor: str, scope: str = "all") -> str:
    """A file-name-safe, readable and unique id (the site's page name); ``all`` boards keep the plain name."""
    parts = [venue_id, metric, estimator, preprocessor] + ([] if scope == "all" else [scope])
    text = "-".join(parts)
    clean = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-").lower()[:80] or "x"
    return f"{clean}-{hashlib.sha256(text.encode()).hexdigest()[:6]}"


@contextmanager
def venue_scope(store: Store, venue_id: str | None, sealed_only: bool = False) -> Iterator[Store]:
    """A store whose scores, generations and papers are limited to one venue (temporary views on a cursor).

    ``sealed_only`` keeps, for LLM candidates, only generations made before the reviews were public.
    """
    if venue_id is None and not sealed_only:
        yield store
        return
    cur = store.con.cursor()
    db = '"{}"'.format(str(store.scalar("SELECT current_database()")).replace('"', '""'))  # a quoted identifier
    # the venue is a value: bound into a temporary table of the scope's paper ids, never pasted into SQL
    cur.execute(f"CREATE OR REPLACE TEMP TABLE scope_paper_ids AS SELECT paper_id FROM {db}.main.papers "
                "WHERE ? IS NULL OR venue_id = ?", [venue_id, venue_id])
    papers = "SELECT paper_id FROM temp.main.scope_paper_ids"
    # kinds built from the human reviews (the baseline, the controls) count whether sealed or not
    cur.execute("CREATE OR REPLACE TEMP TABLE scope_unsealed_kinds AS SELECT unnest(?::VARCHAR[]) AS kind",
                [kinds_with_role(BASELINE, REFERENCE)])
    sealed = "" if not sealed_only else (
        f" AND (generation_id IN (SELECT generation_id FROM {db}.main.generations WHERE sealed) OR "
        f"candidate IN (SELECT name FROM {db}.main.candidates WHERE kind IN "
        "(SELECT kind FROM temp.main.scope_unsealed_kinds)))")
    try:
        cur.execute(f"CREATE TEMP VIEW papers AS SELECT * FROM {db}.main.papers WHERE paper_id IN ({papers})")
        cur.execute(f"CREATE TEMP VIEW generations AS SELECT * FROM {db}.main.generations "
                    f"WHERE paper_id IN ({papers})")
        cur.execute(f"CREATE TEMP VIEW scores AS SELECT * FROM {db}.main.scores WHERE paper_id IN ({papers})"
                    + sealed)
        yield Store(cur)
    finally:
        cur.close()


class _Cost(TypedDict):
    candidate: str
    cost_usd: float | None
    latency_s: float | None


class _Setup(TypedDict):
    venue_id: str
    venue: str | None
    metric: str
    estimator: str
    preprocessor: str


class _ScoredSetup(TypedDict):
    estimator_spec: str
    preprocessor_spec: str
    estimator_id: str
    scored_at: datetime


class StoredBoard(TypedDict):
    """A ``boards`` row: a board's setup, scope, papers, sample, the human baseline's band and its bootstrap."""

    board_id: str
    venue_id: str
    venue: str | None
    metric: str
    estimator: str
    preprocessor: str
    scope: str
    papers: int
    papers_eligible: int | None
    sample_json: str | None
    human_score: float | None
    human_ci95_low: float | None
    human_ci95_high: float | None
    bootstrap_samples: int
    seed: int
    computed_at: datetime
    style_control_json: str | None


class SampleFacts(TypedDict):
    """What a board covers (:func:`sample_facts`)."""

    papers: int
    eligible: int | None
    sampled: bool
    seed: int | None
    description: str | None
    text: str
    controls: str


def _costs(store: Store) -> dict[str, _Cost]:
    """Mean cost (USD) and latency (s) per review, per candidate, over successful generations."""
    rows = store.rows("""SELECT candidate, avg(cost_usd) AS cost_usd, avg(latency_s) AS latency_s
                         FROM generations WHERE status = 'ok' GROUP BY candidate""")
    return {r["candidate"]: cast(_Cost, r) for r in rows}


def _setups(store: Store) -> list[_Setup]:
    gone = superseded_estimators(store)
    rows = cast(list[_Setup], store.rows(
        """SELECT p.venue_id, any_value(p.venue) AS venue, s.metric, s.estimator, s.preprocessor
                         FROM scores s JOIN papers p USING (paper_id)
                         GROUP BY p.venue_id, s.metric, s.estimator, s.preprocessor
                         ORDER BY p.venue_id, s.metric, s.estimator, s.preprocessor"""))
    return [r for r in rows if r["estimator"] not in gone]


def _spec_rows(store: Store) -> list[_ScoredSetup]:
    if not store.scalar("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'scored_setups'"):
        return []
    return cast(list[_ScoredSetup], store.rows(
        "SELECT estimator_spec, preprocessor_spec, estimator_id, scored_at FROM scored_setups "
        "WHERE role <> 'snapshot' ORDER BY scored_at, estimator_id"))


def superseded_estimators(store: Store) -> set[str]:
    """Estimator ids that a later scoring with the same specs replaced: the offline estimator refitted on the
    reviews public by then (its id names its corpus), a model scored again in another dtype.  Their scores stay
    stored (a snapshot or ``--as-of`` still reads them) but they get no board: the board of a setup is the one its
    latest scoring made, so a review edited mid-season does not leave yesterday's fit ranked beside today's.  An
    imported setup (``role = 'snapshot'``) neither replaces nor is replaced."""
    rows = _spec_rows(store)
    latest = {(r["estimator_spec"], r["preprocessor_spec"]): r["estimator_id"] for r in rows}  # ordered by time
    return {r["estimator_id"] for r in rows} - set(latest.values())


def board_lineage(store: Store, board: Mapping[str, Any]) -> set[str]:
    """The ids this board had under earlier estimator ids of the same spec (see :func:`superseded_estimators`),
    with its own: a board followed across refits, as the board history draws it."""
    rows = _spec_rows(store)
    specs = {r["estimator_spec"] for r in rows if r["estimator_id"] == board["estimator"]}
    ids = {r["estimator_id"] for r in rows if r["estimator_spec"] in specs} | {board["estimator"]}
    return {board_id(board["venue_id"], board["metric"], e, board["preprocessor"], board["scope"]) for e in ids}


def _eligible(store: Store) -> dict[str, int]:
    return {r["venue_id"]: int(r["n"]) for r in store.rows(
        "SELECT p.venue_id, count(*) AS n FROM baseline_splits s JOIN papers p USING (paper_id) GROUP BY 1")}


#: The settings the boards depend on, each one's value in :func:`boards_fingerprint` (declared, not listed by hand
#: at the call: ``tests/scoring/test_board_inputs.py`` records what :func:`compute_boards` reads and fails on any
#: other setting, and changes each of these to see the fingerprint change).
BOARD_INPUTS = ("bootstrap_samples", "seed", "board_max_missing_share")
#: The boards stage's declaration: :data:`BOARD_INPUTS`, and nothing operational (computing the boards reads no other
#: setting).
BOARDS = StageInputs(BOARD_INPUTS)


def boards_fingerprint(store: Store, settings: Settings) -> str:
    """What the boards depend on: scores, candidates, generations, papers, splits, samples, the declared settings
    (:data:`BOARD_INPUTS`), the labels and the code."""
    return fingerprint(store, tables=("scores", "candidates", "generations", "papers", "baseline_splits",
                                      "paper_samples", "paper_links", "paper_link_flags", "scored_setups"),
                       values=[BOARD_VERSION, label_parts(), settings.inputs(BOARDS)],
                       code=code_files(_HERE / "_boards.py", _HERE / "_leaderboard.py", _HERE / "_aggregate.py",
                                       _HERE / "_labels.py", _HERE / "_coverage.py", _HERE / "_style.py"))


def compute_boards(store: Store, settings: Settings, progress: Progress | None = None) -> dict[str, int]:
    """Recompute every board from the stored scores and store them (replacing the previous set)."""
    samples, seed = settings.scoring.bootstrap_samples, settings.seed
    setups = _setups(store)
    eligible = _eligible(store)
    sample = _sample(store)
    boards: list[list[Any]] = []
    rows: list[list[Any]] = []
    now = utcnow()
    with (progress or NoProgress()).task("boards", len(setups) * len(SCOPES), "boards") as task:
        for setup in setups:
            for scope in SCOPES:
                bid = board_id(setup["venue_id"], setup["metric"], setup["estimator"], setup["preprocessor"], scope)
                with venue_scope(store, setup["venue_id"], scope == "sealed") as scoped:
                    board = ranked_board(scoped, setup["metric"], setup["estimator"], setup["preprocessor"],
                                         samples=samples, seed=seed,
                                         max_missing_share=settings.scoring.board_max_missing_share)
                    ranked = board["rows"]
                    costs = _costs(scoped)
                    papers = int(scoped.scalar("SELECT count(DISTINCT paper_id) FROM scores WHERE metric = ? AND "
                                               "estimator = ? AND preprocessor = ?",
                                               [setup["metric"], setup["estimator"],
                                                metric_preprocessor(setup["metric"], setup["preprocessor"])]))
                human = next((r for r in ranked if r["role"] == BASELINE), None)
                boards.append([bid, setup["venue_id"], setup["venue"], setup["metric"], setup["estimator"],
                               setup["preprocessor"], scope, papers, eligible.get(setup["venue_id"]),
                               sample.get(setup["venue_id"]),
                               None if human is None else human["score"],
                               None if human is None else human["ci95_low"],
                               None if human is None else human["ci95_high"], samples, seed, now,
                               None if board["style_control"] is None else json.dumps(board["style_control"])])
                for r in ranked:
                    cost = costs.get(r["candidate"])
                    row: BoardRow = {**r, "board_id": bid, "cost_usd": cost["cost_usd"] if cost else None,
                                    "latency_s": cost["latency_s"] if cost else None}
                    rows.append([(None if r["vs_floor"] is None else json.dumps(r["vs_floor"]))
                                 if c == "vs_floor_json" else row.get(c) for c in ROW_COLUMNS])
                task.advance()
                stop.check()  # a board boundary: nothing is stored before every board is computed
    with store.transaction() as con:
        con.execute("DELETE FROM board_rows")
        con.execute("DELETE FROM boards")
        store.insert_rows("boards", BOARD_COLUMNS, boards)
        store.insert_rows("board_rows", ROW_COLUMNS, rows)
        store_labels(store)
    return {"boards": len(boards), "rows": len(rows)}


def _sample(store: Store) -> dict[str, str]:
    """The paper sample each venue's scores were restricted to (JSON: the run's description, size and eligible
    papers, plus ``venue_size``: how many of the sampled papers belong to that venue), where a run used one."""
    if not store.scalar("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'paper_samples'"):
        return {}
    out = {}
    for r in store.rows("SELECT venue_id, any_value(sample_json) AS sample_json, count(*) AS n FROM paper_samples "
                        "WHERE origin = 'run' GROUP BY venue_id"):
        try:
            info = json.loads(r["sample_json"])
        except (TypeError, ValueError):
            info = {}
        out[r["venue_id"]] = json.dumps({**(info if isinstance(info, dict) else {}), "venue_size": int(r["n"])})
    return out


def sample_facts(board: Mapping[str, Any]) -> SampleFacts:
    """What a board covers, as facts and one sentence (the page, the app, the CLI and leaderboard.json all show
    it): ``{"papers", "eligible", "sampled", "seed", "text"}``, e.g. text ``12 of 300 papers, seeded (seed 7),
    stratified by rating`` for a run on a paper sample, ``all 300 papers`` for a run on every eligible paper."""
    sample = board.get("sample")
    if sample is None and board.get("sample_json"):
        try:
            sample = json.loads(str(board["sample_json"]))
        except ValueError:
            sample = None
    papers = int(board.get("papers") or 0)
    eligible = board.get("papers_eligible")
    eligible = None if eligible is None else int(eligible)
    sampled = isinstance(sample, dict)
    seed = board.get("seed")
    if sampled:
        of = f"{papers} of {eligible} papers" if eligible else f"{papers} papers"
        text = f"{of}, seeded (seed {seed}), stratified by rating" if seed is not None else \
            f"{of}, seeded, stratified by rating"
    elif eligible is not None and papers == eligible:
        text = f"all {eligible} papers"
    elif eligible:
        text = f"{papers} of {eligible} papers (no sample: every eligible paper; the others have no scores here)"
    else:
        text = f"{papers} papers"
    return {"papers": papers, "eligible": eligible, "sampled": sampled, "seed": seed if sampled else None,
            "description": sample.get("description") if isinstance(sample, dict) else None, "text": text,
            "controls": control_set(board)}


def control_set(board: Mapping[str, Any]) -> str:
    """Which controls a board's rows include, in words: the core set a CPU's default run checks, or the full
    validation (what ``validation`` the scores were made with, read from the rows themselves)."""
    from grebench.bench import core_controls, kind_info
    from grebench.store import REFERENCE

    names = sorted({str(r["candidate"]) for r in board.get("rows") or ()
                    if (r.get("role") or kind_info(r.get("kind")).role) == REFERENCE})
    if not names:
        return "no controls"
    if set(names) <= set(core_controls()):
        return (f"the core controls ({len(names)}: {', '.join(names)}); `grebench run --validation full` adds the "
                "others and GEM")
    if set(names) <= set(core_controls(abstracts=False)):  # GEM's, for papers without abstracts
        return (f"the core controls of papers without abstracts ({len(names)}: {', '.join(names)}); "
                "`grebench run --validation full` adds the others")
    return f"{len(names)} controls (the full validation)"


def headline_key(board: Mapping[str, Any], is_proxy: Callable[[str], bool]) -> tuple[Any, ...]:
    """Sort key putting the headline board first: the headline metric (GEM-S), then a language-model estimator
    before a fast proxy, then the latest venue-year, then the board with the most papers."""
    year = board.get("venue_year")
    if year is None:
        found = re.search(r"(19|20)\d{2}", f"{board.get('venue') or ''} {board.get('venue_id') or ''}")
        year = int(found.group(0)) if found else 0
    return (board.get("metric") != headline_metric(), bool(is_proxy(str(board.get("estimator") or ""))),
            -int(year), -int(board.get("papers") or 0), str(board.get("estimator")), str(board.get("preprocessor")),
            str(board.get("venue_id")))


def headline_first(boards: Sequence[Mapping[str, Any]], is_proxy: Callable[[str], bool]) -> list[Any]:
    """The boards with the headline board first and the rest in headline order (see :func:`headline_key`); the
    site's front page, the app's first screen and ``grebench leaderboard`` with no options open on ``[0]``."""
    return sorted(boards, key=lambda b: headline_key(b, is_proxy))


def headline_board(boards: Sequence[Mapping[str, Any]], is_proxy: Callable[[str], bool]) -> Any:
    """The headline board (None when there is none): :func:`headline_first`'s first."""
    ordered = headline_first(boards, is_proxy)
    return ordered[0] if ordered else None


def stored_boards(store: Store, *, metric: str | None = None, venue_id: str | None = None, scope: str = "all",
                  estimator: str | None = None, preprocessor: str | None = None) -> list[dict[str, Any]]:
    """Stored boards (with their rows, ranked first, then reference rows) matching the filters."""
    where, params = ["scope = ?"], [scope]
    for column, value in (("metric", metric), ("venue_id", venue_id), ("estimator", estimator),
                          ("preprocessor", preprocessor)):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    if not store.scalar("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'boards'"):
        return []
    year = ("(SELECT max(p.venue_year) FROM papers p WHERE p.venue_id = boards.venue_id)"
            if store.scalar("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'papers'")
            or store.scalar("SELECT count(*) FROM duckdb_views() WHERE view_name = 'papers'") else "NULL")
    boards = store.rows(f"SELECT *, {year} AS venue_year FROM boards WHERE {' AND '.join(where)} "
                        "ORDER BY venue_id, metric, estimator, preprocessor", params)
    if not boards:
        return []
    by_board: dict[str, list[StoredRow]] = {}
    for r in cast(list[StoredRow], store.rows(
            "SELECT * FROM board_rows WHERE board_id IN (SELECT unnest(?::VARCHAR[])) "
                        # ranked rows, then LLMs with no clean paper (unranked band), then the references (controls)
                        "ORDER BY board_id, rank NULLS LAST, coalesce(role = ?, false), score DESC, candidate",
                        [[b["board_id"] for b in boards], REFERENCE])):
        by_board.setdefault(r["board_id"], []).append(r)
    for b in boards:
        rows: list[BoardRow] = place_baseline([{**r, "metric": b["metric"], "estimator": b["estimator"],
                                                "preprocessor": b["preprocessor"]}
                                               for r in by_board.get(b["board_id"], [])])
        b["rows"] = rows
        b["candidates"] = len(b["rows"])
        b["pairs"] = sum(int(r["pairs"]) for r in b["rows"])
        b["sample"] = json.loads(b["sample_json"]) if b.get("sample_json") else None
        # the style-controlled view, once per board (None: stored before it, or nothing to fit); rows carry theirs
        b["style_control"] = json.loads(b.pop("style_control_json", None) or "null")
        for r in b["rows"]:
            r["style_controlled"] = style_controlled(r)
            # the floor comparison (None: a control, or stored before it); `status`: the word the pages use
            r["vs_floor"] = json.loads(cast("dict[str, str | None]", r).pop("vs_floor_json", None) or "null")
            r["status"] = rank_word(r) or "ranked"
        b["sample_facts"] = sample_facts(b)
        b["human_band"] = None if b["human_score"] is None else {
            "score": b["human_score"], "low": b["human_ci95_low"], "high": b["human_ci95_high"]}
    return boards

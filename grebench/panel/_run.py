"""The panel stage: exam → votes of qualified judges → verdicts (with debate) → Bradley–Terry → agreement.

Per venue-year.  Idempotent: votes already stored are not asked again, LLM calls are cached by the client, and the
derived tables (exams, verdicts, rankings, agreement) are rewritten from the stored votes on every run.
"""

from __future__ import annotations

import itertools
import json
import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import NotRequired, TypedDict, cast

from grebench.bench import kind_info
from grebench.llm import LLMClient
from grebench.panel import _state
from grebench.panel._aggregate import (
    Agreement,
    PanelRanking,
    PanelVerdict,
    VerdictColumn,
    agreement,
    judge_score,
    outcome,
    rank_with_bootstrap,
    weighted_vote,
)
from grebench.panel._data import GemScores, Unjudged, VenueData, load_venue, sha, venues
from grebench.panel._debate import Debater, run_debate
from grebench.panel._exam import (
    GradedExam,
    SelfPreference,
    ask,
    build_exam,
    examine_panel,
    grade,
    is_unreachable,
    not_examined,
    self_preference,
)
from grebench.panel._judges import (
    JUDGES,
    Judge,
    JudgeContext,
    Verdict,
    can_debate,
    checked_judge,
    is_reference,
    needs_gem_scores,
    venue_judge,
)
from grebench.panel._llm_judge import parse_judges
from grebench.panel._local_judge import LOCAL_JUDGE_KIND, builtin_local_judges, local_judge_name
from grebench.panel._machine_metrics import common_words, measure
from grebench.progress import NoProgress, Progress
from grebench.runtime import LocalServers
from grebench.scoring import EstimatorHandle, Preprocessor, ScoredSetup
from grebench.settings import Settings
from grebench.store import Store, utcnow

VOTE_COLUMNS = ("venue_id", "paper_id", "candidate_a", "candidate_b", "generation_a", "generation_b", "judge",
                "order_ab", "preference", "confidence", "reason", "created_at")
METRIC_COLUMNS = ("text_sha256", "paper_id", "words", "section_coverage", "specificity", "abstract_overlap",
                  "created_at")
VOTE_CHUNK = 16  # answers of an LLM judge asked at once (progress moves per chunk)
VERDICT_COLUMNS: tuple[VerdictColumn, ...] = ("venue_id", "paper_id", "candidate_a", "candidate_b", "score", "outcome",
                                              "debated", "flagged")


class ExamRow(TypedDict):
    """One judge's graded exam on a venue-year, as the panel's summary lists it (``grebench exam --json``)."""

    venue_id: str
    judge: str
    kind: str
    p_c: float | None
    p_p: float | None
    p_s: float | None
    passed: bool
    weight: float
    failed: list[str]
    eta_c: float | None
    eta_p: float | None
    self_preference: SelfPreference | None
    not_examined: str | None
    stopped: str | None


class RankingRow(PanelRanking):
    """A candidate's Bradley-Terry ranking on a venue-year, with its GEM score (None: not scored)."""

    venue_id: str
    gem_score: float | None


class AgreementRow(Agreement):
    """How the panel agrees with GEM-S on a venue-year, and on which metric."""

    venue_id: str
    gem_metric: str | None


class Qualified(TypedDict):
    """The judges that qualified on a venue-year, of how many examined."""

    venue_id: str
    qualified: list[str]
    examined: int


class VenuePart(TypedDict, total=False):
    """What one venue-year adds to the panel's summary; stored per venue-year (``stage_state``), so a venue-year
    that did not change gives it back.  An exam-only run has no rankings, verdicts or agreement."""

    votes: int
    machine_metrics: int
    exam: list[ExamRow]
    qualified: list[Qualified]
    rankings: list[RankingRow]
    unjudged: list[Unjudged]
    agreement: list[AgreementRow]
    verdicts: int
    flagged: int
    debated: int


class PanelRun(TypedDict):
    """The panel's summary over every venue-year (:func:`run_panel`; the ``panel`` stage's JSON)."""

    venues: list[str]
    exam: list[ExamRow]
    rankings: list[RankingRow]
    agreement: list[AgreementRow]
    qualified: list[Qualified]
    unjudged: list[Unjudged]
    votes: int
    votes_total: int
    machine_metrics: int
    gem_metric: str | None
    verdicts: int
    flagged: int
    debated: int
    skipped_venues: list[str]
    calls_made: NotRequired[int]        # set once every venue-year ran
    estimator_calls: NotRequired[int]
    cached: NotRequired[int]


def build_judges(settings: Settings, client: LLMClient, gem: GemScores, *, local_judges: Sequence[str],
                 names: Sequence[str] | None = None, servers: LocalServers | None = None) -> list[Judge]:
    """Every registered judge, the job's local judges (``local_judges``: the resolved run's ``setup.local_judges``),
    the ``[[judges]]`` tables; optionally only ``names``.  Built once per job: a judge reads a venue-year's inputs in
    :meth:`Judge.for_venue`."""
    context = JudgeContext(settings, client, gem, tuple(local_judges), servers)
    judges: list[Judge] = [checked_judge(entry.obj(context), f"judge {entry.name!r} ({entry.origin})")
                           for entry in JUDGES]
    judges += builtin_local_judges(context)
    judges += parse_judges(settings.tables.get("judges"), context)
    known = [j.name for j in judges]
    if len(set(known)) != len(known):
        raise ValueError(f"judge names must be unique (built-in judges: {', '.join(JUDGES.names())})")
    if names:
        unknown = [n for n in names if n not in known]
        if unknown:
            raise ValueError(f"unknown judge(s): {', '.join(unknown)} (known: {', '.join(known)})")
        judges = [j for j in judges if j.name in set(names)]
    return judges


def judge_names(settings: Settings, *, local_judges: Sequence[str]) -> list[str]:
    """The names of every judge a panel has (registered, the job's ``local_judges``, ``[[judges]]`` tables), without
    building one: what ``--judge`` is checked against before a job records its run.  A ``[[judges]]`` table that
    cannot be parsed raises its ``ValueError``, as :func:`build_judges` would."""
    from grebench.llm import endpoint_tables, table_name

    names = [*JUDGES.names(), *(local_judge_name(spec) for spec in local_judges)]
    names += [table_name(entry, f"[[judges]] #{i + 1}")
              for i, entry in enumerate(endpoint_tables(settings.tables.get("judges"), "judges"))]
    return names


def check_judges(settings: Settings, wanted: Sequence[str], *, local_judges: Sequence[str]) -> None:
    """Raise ``ValueError`` naming the known judges when ``wanted`` names one the panel (with the job's
    ``local_judges``) does not have."""
    known = judge_names(settings, local_judges=local_judges)
    unknown = [n for n in wanted if n not in known]
    if unknown:
        raise ValueError(f"unknown judge(s): {', '.join(unknown)} (known: {', '.join(known)})")


def _sync_judges(store: Store, judges: Sequence[Judge]) -> None:
    with store.transaction() as con:
        for j in judges:
            con.execute("DELETE FROM judges WHERE name = ?", [j.name])
            con.execute("INSERT INTO judges VALUES (?, ?, ?, ?, ?, ?)",
                        [j.name, j.kind, j.model, j.family, j.description, utcnow()])


def _machine_metrics(store: Store, data: VenueData, with_metrics: bool) -> int:
    """Measure every candidate review once (by text hash); optionally attach the numbers to the reviews."""
    common = common_words({p: f"{v.title}\n{v.abstract}" for p, v in data.papers.items()})
    known = {r[0] for r in store.con.execute("SELECT text_sha256 FROM machine_metrics").fetchall()}
    rows = []
    for pid, gens in data.generations.items():
        paper = data.papers[pid]
        for cand, review in gens.items():
            key = sha(review.text)
            if key in known and not with_metrics:
                continue
            values = measure(review.text, paper.title, paper.abstract, common)
            if key not in known:
                known.add(key)
                rows.append([key, pid, values["words"], values["section_coverage"], values["specificity"],
                             values["abstract_overlap"], utcnow()])
            if with_metrics:
                gens[cand] = replace(review, metrics=values)
    store.insert_rows("machine_metrics", METRIC_COLUMNS, rows)
    return len(rows)


def _pairs(data: VenueData, per_paper: int, seed: int) -> list[tuple[str, str, str]]:
    """Pairs to judge per paper: every pair of contestants, then contestant-vs-control anchors (seeded order).

    Contestants are what the panel ranks (LLMs, imported reviews, the human baseline); controls are yardsticks,
    judged only against contestants (two controls compared tell nothing about a contestant).  ``per_paper`` > 0 keeps
    every contestant pair and anchors up to that many pairs in all.
    """
    rng = random.Random(f"{seed}:{data.venue_id}:pairs")
    out = []
    for pid in sorted(data.generations):
        names = sorted(data.generations[pid])
        contestants = [c for c in names if kind_info(data.kinds.get(c)).ranked]
        controls = [c for c in names if not kind_info(data.kinds.get(c)).ranked]
        ranked = list(itertools.combinations(contestants, 2))
        anchors = sorted((min(a, b), max(a, b)) for a in contestants for b in controls)
        rng.shuffle(anchors)
        if per_paper > 0:
            anchors = anchors[:max(0, per_paper - len(ranked))]
        out += [(pid, a, b) for a, b in ranked + anchors]
    return out


def _unjudged(store: Store, venue_id: str, judged: set[str]) -> list[Unjudged]:
    """Candidates with reviews in the venue that no verdict covers, and why (the panel's table lists them too: an
    ``empty`` control has nothing a judge can compare, so it is never in a pair)."""
    rows = store.rows("""SELECT g.candidate, bool_and(g.text IS NULL OR length(trim(g.text)) = 0) AS blank
                         FROM generations g JOIN papers p ON p.paper_id = g.paper_id
                         WHERE p.venue_id = ? AND g.status = 'ok' GROUP BY g.candidate ORDER BY g.candidate""",
                      [venue_id])
    return [{"venue_id": venue_id, "candidate": r["candidate"],
             "reason": "every review is empty: nothing for a judge to compare" if r["blank"] else "in no judged pair"}
            for r in rows if r["candidate"] not in judged]


def _judge_pairs(judge: Judge, pairs: list[tuple[str, str, str]], data: VenueData, settings: Settings,
                 seed: int) -> list[tuple[str, str, str]]:
    """The pairs one judge is asked: LLM judges (every comparison a model call) get at most
    ``panel_llm_pairs_per_paper`` per paper, the first ones of :func:`_pairs`' order (contestant pairs first)."""
    cap = settings.panel.panel_llm_pairs_per_paper
    if is_reference(judge) or cap <= 0:
        return pairs
    taken: dict[str, int] = defaultdict(int)
    out = []
    for pid, a, b in pairs:
        if judge.family and judge.family in (data.families.get(a), data.families.get(b)):
            continue  # never asked (family guard): does not use up the cap
        if taken[pid] < cap:
            taken[pid] += 1
            out.append((pid, a, b))
    return out


def _vote(store: Store, data: VenueData, judge: Judge, pairs: list[tuple[str, str, str]],
          run_id: str | None, progress: Progress | None = None) -> tuple[int, int]:
    """Ask one qualified judge every pair it has not answered yet, in both orders; store the answers.

    Returns (votes written, votes the judge failed to give).
    """
    done = {(r[0], r[1], r[2], r[3]) for r in store.con.execute(
        "SELECT paper_id, generation_a, generation_b, order_ab FROM panel_votes WHERE judge = ? AND venue_id = ?",
        [judge.name, data.venue_id]).fetchall()}
    todo, items = [], []
    for pid, a, b in pairs:
        ga, gb = data.generations[pid][a], data.generations[pid][b]
        for order in ("ab", "ba"):
            if (pid, ga.generation_id, gb.generation_id, order) not in done:
                todo.append((pid, a, b, order))
                paper = data.papers[pid]
                items.append((paper, ga, gb) if order == "ab" else (paper, gb, ga))
    if is_reference(judge) or progress is None or not items:
        answers = ask(judge, items)
    else:  # every answer a model call: in chunks, with progress
        answers = []
        with progress.task(f"panel: votes of {judge.name}", len(items), "answers") as task:
            for start in range(0, len(items), VOTE_CHUNK):
                chunk = items[start:start + VOTE_CHUNK]
                errors: list[BaseException] = []
                answers += ask(judge, chunk, errors=errors)
                task.advance(len(chunk), failed=len(errors))
    rows = []
    missing = 0
    for (pid, a, b, order), verdict, (_, x, y) in zip(todo, answers, items, strict=True):
        if verdict is None:
            if not (judge.family and judge.family in (x.family, y.family)):
                missing += 1
                if run_id is not None:
                    store.record_failure(run_id, "panel", f"{judge.name}:{pid}:{a}:{b}:{order}",
                                         "judge gave no answer")
            continue
        gens = data.generations[pid]
        rows.append([data.venue_id, pid, a, b, gens[a].generation_id, gens[b].generation_id, judge.name, order,
                     verdict.preference, verdict.confidence, verdict.reason, utcnow()])
    store.insert_rows("panel_votes", VOTE_COLUMNS, rows)
    return len(rows), missing


def _verdicts(store: Store, settings: Settings, data: VenueData, judges: dict[str, Judge],
              weights: dict[str, float], pairs: list[tuple[str, str, str]]) -> list[PanelVerdict]:
    """Weighted votes per pair (answers averaged over both orders); debate where qualified LLM judges split."""
    answers: dict[tuple[str, str, str], dict[str, list[tuple[str, str]]]] = defaultdict(lambda: defaultdict(list))
    reasons: dict[tuple[str, str, str, str], str] = {}
    for r in store.rows("SELECT * FROM panel_votes WHERE venue_id = ?", [data.venue_id]):
        gens = data.generations.get(r["paper_id"], {})
        gen_a, gen_b = gens.get(r["candidate_a"]), gens.get(r["candidate_b"])
        if r["judge"] not in weights or gen_a is None or gen_b is None or (
                gen_a.generation_id, gen_b.generation_id) != (r["generation_a"], r["generation_b"]):
            continue  # a judge not qualified now, or a vote on an older generation
        key = (r["paper_id"], r["candidate_a"], r["candidate_b"])
        answers[key][r["judge"]].append((r["preference"], r["order_ab"]))
        if r["order_ab"] == "ab":
            reasons[(*key, r["judge"])] = r["reason"] or ""
    store.con.execute("DELETE FROM debates WHERE paper_id IN (SELECT paper_id FROM papers WHERE venue_id = ?)",
                      [data.venue_id])
    out: list[PanelVerdict] = []
    for key in pairs:
        if key not in answers:
            continue
        scores = {j: judge_score(a) for j, a in answers[key].items()}
        debated = flagged = False
        llm = [judges[j] for j in scores if can_debate(judges[j])]
        initial = {j.name: Verdict("one" if scores[j.name] > 0 else "two" if scores[j.name] < 0 else "tie", 1.0,
                                   reasons.get((*key, j.name), "")) for j in llm}
        if len(llm) >= 2 and len({v.preference for v in initial.values()}) > 1:
            pid, a, b = key
            debaters = cast("list[Debater]", llm)  # every one has .debate (can_debate)
            result = run_debate(debaters, data.papers[pid], data.generations[pid][a], data.generations[pid][b], initial,
                                settings.panel.debate_rounds)
            debated, flagged = True, not result.resolved
            for name, verdict in result.final.items():
                scores[name] = {"one": 1.0, "two": -1.0, "tie": 0.0}[verdict.preference]
            store.con.executemany("INSERT INTO debates VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                                  [[pid, a, b, rnd, name, v.preference, v.reason, utcnow()]
                                   for rnd, name, v in result.history])
        score = weighted_vote(scores, weights)
        out.append({"venue_id": data.venue_id, "paper_id": key[0], "candidate_a": key[1], "candidate_b": key[2],
                    "score": score, "outcome": outcome(score), "debated": debated, "flagged": flagged})
    return out


def _gem_tables(store: Store, gem: GemScores, data: VenueData) -> tuple[dict[tuple[str, str], float], dict[str, float]]:
    if gem.setup is None or gem.metric is None:
        return {}, {}
    from grebench.scoring import per_paper_scores

    table = per_paper_scores(store, gem.metric, gem.setup.estimator_id, gem.setup.preprocessor_id)
    # agreement is about the same pairs the judges saw, contaminated papers included (contamination decides who is
    # ranked on the leaderboard, not whether the metric and the panel agree on a pair)
    scores = {c: {**table["contaminated"].get(c, {}), **table["scores"].get(c, {})}
              for c in {*table["scores"], *table["contaminated"]}}
    per_paper = {(c, p): v for c, papers in scores.items() for p, v in papers.items() if p in data.papers}
    totals: dict[str, list[float]] = defaultdict(list)
    for (c, _), v in per_paper.items():
        totals[c].append(v)
    return per_paper, {c: sum(v) / len(v) for c, v in totals.items()}


def _write_exam(store: Store, venue_id: str, graded: list[GradedExam], bias: dict[str, SelfPreference]) -> None:
    with store.transaction() as con:
        con.execute("DELETE FROM judge_exams WHERE venue_id = ?", [venue_id])
        for r in graded:
            details = {**r["details"], "self_preference": bias.get(r["judge"]), "stopped": r.get("stopped")}
            con.execute("INSERT INTO judge_exams VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        [venue_id, r["judge"], r["p_c"], r["p_p"], r["p_s"], r["passed"], r["weight"],
                         json.dumps(r["failed"]), r["eta_c"], r["eta_p"], json.dumps(details), utcnow()])


def _write_results(store: Store, venue_id: str, verdicts: list[PanelVerdict], rankings: list[PanelRanking],
                   agree: Agreement | None, gem_metric: str | None) -> None:
    now = utcnow()
    with store.transaction() as con:
        con.execute("DELETE FROM panel_verdicts WHERE venue_id = ?", [venue_id])
        store.insert_rows("panel_verdicts", VERDICT_COLUMNS, [[v[c] for c in VERDICT_COLUMNS] for v in verdicts])
        con.execute("DELETE FROM panel_rankings WHERE venue_id = ?", [venue_id])
        for r in rankings:
            con.execute("INSERT INTO panel_rankings VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        [venue_id, r["candidate"], r["strength"], r["ci95_low"], r["ci95_high"], r["rank"],
                         r["rank_low"], r["rank_high"], now])
        con.execute("DELETE FROM panel_agreement WHERE venue_id = ?", [venue_id])
        if agree is not None:
            con.execute("INSERT INTO panel_agreement VALUES (?, ?, ?, ?, ?, ?, ?)",
                        [venue_id, gem_metric, agree["kendall_tau"], agree["pair_agreement"], agree["n_pairs"],
                         json.dumps(agree["disagreements"]), now])


def run_panel(store: Store, settings: Settings, run_id: str | None, *, setup: ScoredSetup | None,
              metric: str | None, paper_ids: Sequence[str] | None, judge_names: Sequence[str] | None = None,
              progress: Progress | None = None, exam_only: bool = False,
              bounded_exam: bool = False, estimator: EstimatorHandle | None = None,
              preprocessor: Preprocessor | None = None, local_judges: Sequence[str]) -> PanelRun:
    """Exam, votes, verdicts, Bradley–Terry rankings and agreement with GEM-S for every venue-year with reviews.

    The caller decides what the panel works with: ``setup``, what the stored scores were made with (None: nothing
    scored yet, the ``gem`` judge abstains), ``metric``, the one the ``gem`` judge and the agreement read
    (:func:`grebench.scoring.gem_judge_metric`), and ``paper_ids``, the job's sample (None: every paper).

    ``bounded_exam`` gives every judge the bounded exam an LLM judge takes (``exam_llm_pairs`` pairs per test), the
    reference judges too: a core run's (``validation = core``), where the gem judge's exam texts the score stage did
    not score would take the evaluation LM a fifth of a CPU's run (164 of 914 s for 12 papers in float32).

    ``estimator`` is the job's estimator (the resolved run's handle) the gem judge scores its exam texts with, and
    ``preprocessor`` the built preprocessor of ``setup`` (the panel builds neither: without them the gem judge's
    exam texts that have no stored score cannot be scored, and it is not examined);
    ``local_judges``, the job's local judges (the resolved run's ``setup.local_judges``; a caller outside a job
    resolves them itself: the panel never reads the setting).

    The judges are built once, and every venue-year asks the same ones (each bound to the venue-year's inputs by
    :meth:`Judge.for_venue`); their counters are summed once each.

    ``exam_only`` stops after the qualification exam (``grebench exam``).  A venue-year whose inputs did not change
    since its last complete run (see :mod:`grebench.panel._state`) is not recomputed: its stored summary is
    returned, no judge is asked and nothing is written (``skipped_venues`` lists them).
    """
    client = LLMClient(settings, store)
    gem = GemScores(store, settings, setup, metric, estimator, preprocessor)
    sample = None if paper_ids is None else frozenset(paper_ids)
    summary: PanelRun = {"venues": [], "exam": [], "rankings": [], "agreement": [], "qualified": [],
                               "unjudged": [], "votes": 0,
                               "votes_total": 0, "machine_metrics": 0, "gem_metric": gem.metric,
                               "verdicts": 0, "flagged": 0, "debated": 0, "skipped_venues": []}
    display = progress or NoProgress()
    with LocalServers(settings) as servers:  # local judges' servers: started on first need, stopped here
        judges = build_judges(settings, client, gem, local_judges=local_judges, names=judge_names, servers=servers)
        job = _Job(store, settings, gem, judges, sample, run_id, judge_names, exam_only, bounded_exam,
                   tuple(local_judges), display)
        _run_venues(job, venues(store), summary)
    summary["votes_total"] = int(store.scalar("SELECT count(*) FROM panel_votes") or 0)
    summary["calls_made"] = sum(j.calls_made for j in judges)
    summary["estimator_calls"] = gem.estimator_calls
    summary["cached"] = sum(j.cached for j in judges)
    store.checkpoint()
    return summary


@dataclass(frozen=True)
class _Job:
    """What every venue-year of one :func:`run_panel` call works with, the judges built once for the job among
    them."""

    store: Store
    settings: Settings
    gem: GemScores
    judges: list[Judge]
    sample: frozenset[str] | None
    run_id: str | None
    judge_names: Sequence[str] | None
    exam_only: bool
    bounded_exam: bool
    local_judges: tuple[str, ...]
    progress: Progress


def _run_venues(job: _Job, names: Sequence[str], summary: PanelRun) -> None:
    store, synced = job.store, False
    for venue_id in names:
        print_ = _state.fingerprint(store, job.settings, venue_id, job.judge_names, job.exam_only, job.gem.setup,
                                    job.gem.metric, job.sample, job.bounded_exam, local_judges=job.local_judges)
        part = _state.stored(store, venue_id, job.exam_only, print_)
        if part is None:
            store.clear_stage_state(_state.STAGE, _state.scope(venue_id, not job.exam_only))  # its tables change too
            if not synced:  # the judges table: once, when a venue-year is judged
                _sync_judges(store, job.judges)
                synced = True
            part, complete = _run_venue(job, venue_id)
            summary["votes"] += part.pop("votes")
            summary["machine_metrics"] += part.pop("machine_metrics")
            if complete:
                _state.remember(store, venue_id, job.exam_only, print_, part)
        else:
            summary["skipped_venues"].append(venue_id)
        summary["venues"].append(venue_id)
        summary["exam"] += part.get("exam", [])
        summary["rankings"] += part.get("rankings", [])
        summary["agreement"] += part.get("agreement", [])
        summary["qualified"] += part.get("qualified", [])
        summary["unjudged"] += part.get("unjudged", [])
        summary["verdicts"] += part.get("verdicts", 0)
        summary["flagged"] += part.get("flagged", 0)
        summary["debated"] += part.get("debated", 0)


def _run_venue(job: _Job, venue_id: str) -> tuple[VenuePart, bool]:
    """One venue-year in full: (its summary part, whether every vote was answered and the gem judge's exam texts
    were scored: an incomplete part is computed again next time).  The job's judges are asked bound to the
    venue-year's inputs (:meth:`Judge.for_venue`)."""
    store, settings, gem, progress = job.store, job.settings, job.gem, job.progress
    data = load_venue(store, venue_id, job.sample)
    inputs = data.judge_inputs()
    judges = [venue_judge(j, inputs) for j in job.judges]
    part: VenuePart = {"votes": 0, "machine_metrics": _machine_metrics(
        store, data, settings.panel.judges_see_machine_metrics)}
    llm_pairs = settings.panel.exam_llm_pairs
    sets = build_exam(data, settings.panel.exam_pairs, settings.seed)
    llm_sets = sets.limited(llm_pairs) if llm_pairs > 0 else sets
    if job.bounded_exam:
        sets = llm_sets
    if needs_gem_scores(judges):
        gem.extend(sets.texts(), data.splits, progress, f"panel: the gem judge's exam texts, {venue_id}")
        if any(j.judge_kind == LOCAL_JUDGE_KIND for j in judges):
            # the gem judge reads its scores from now on; the evaluation LM goes before a local judge's server
            # loads its own model (sitting beside it, the job and the server summed 2.47 GB in the first run)
            gem.release()
    why = gem.unusable() if needs_gem_scores(judges) else None
    results = examine_panel(judges, sets, llm_sets, progress,
                            f"panel: exam, {venue_id}",
                            adjust=lambda j, r: not_examined(r, why) if why is not None and needs_gem_scores([j])
                            else r)
    graded, eta_c, eta_p = grade(results)
    llm_judges = any(not is_reference(j) for j in judges)
    passed = {r["judge"] for r in graded if r["passed"]}
    bias = self_preference(judges, data, settings.seed,
                           papers=min(20, max(1, llm_pairs // 6)) if llm_judges and llm_pairs > 0 else 20,
                           voting=lambda name: name in passed)
    _write_exam(store, venue_id, graded, bias)
    by_name = {j.name: j for j in judges}
    part["exam"] = [{"venue_id": venue_id, "judge": r["judge"], "kind": by_name[r["judge"]].kind,
                     "p_c": r["p_c"], "p_p": r["p_p"], "p_s": r["p_s"], "passed": r["passed"],
                     "weight": r["weight"], "failed": r["failed"], "eta_c": eta_c, "eta_p": eta_p,
                     "self_preference": bias.get(r["judge"]), "not_examined": r.get("not_examined"),
                     "stopped": r.get("stopped")}
                    for r in graded]
    # a judge that could not be reached, or the gem judge whose texts the estimator failed on, is examined again
    # next time (a gem judge with nothing scored to read stays so until the scores change the fingerprint)
    examined = gem.failure is None and not any(is_unreachable(r.get("not_examined")) for r in graded)
    if job.exam_only:
        return part, examined
    weights = {r["judge"]: r["weight"] for r in graded if r["passed"] and r["weight"] > 0}
    part["qualified"] = [{"venue_id": venue_id, "qualified": sorted(weights), "examined": len(judges)}]
    pairs = _pairs(data, settings.panel.panel_pairs_per_paper, settings.seed)
    missing = 0
    with progress.task(f"panel: votes, {venue_id}", len(weights), "judges") as task:
        for name in sorted(weights):
            judge_pairs = _judge_pairs(by_name[name], pairs, data, settings, settings.seed)
            written, failed = _vote(store, data, by_name[name], judge_pairs, job.run_id, progress)
            part["votes"] += written
            missing += failed
            task.advance()
    verdicts = _verdicts(store, settings, data, by_name, weights, pairs)
    contestants = {c for c, kind in data.kinds.items() if kind_info(kind).ranked}
    rankings = rank_with_bootstrap(verdicts, settings.scoring.bootstrap_samples, settings.seed,
                                   ranked=contestants)
    per_paper, gem_score = _gem_tables(store, gem, data)
    agree = agreement(verdicts, per_paper, {r["candidate"]: r["strength"] for r in rankings}, gem_score) \
        if verdicts and gem_score else None
    _write_results(store, venue_id, verdicts, rankings, agree, gem.metric)
    part["rankings"] = [{"venue_id": venue_id, **r, "gem_score": gem_score.get(r["candidate"])} for r in rankings]
    part["unjudged"] = _unjudged(store, venue_id, {r["candidate"] for r in rankings})
    part["agreement"] = [] if agree is None else [{"venue_id": venue_id, "gem_metric": gem.metric, **agree}]
    part["verdicts"] = len(verdicts)
    part["flagged"] = sum(v["flagged"] for v in verdicts)
    part["debated"] = sum(v["debated"] for v in verdicts)
    return part, missing == 0 and examined

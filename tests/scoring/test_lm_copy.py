"""Issue 62: copy evidence about information, not wording.

1. :class:`grebench.scoring.LMCopyCheck` — how much better a candidate predicts each public review, line by line,
   than honest reviews of the same paper do, with a bar calibrated on honest pairs.  Run here with the offline
   estimator on the bundled samples (every honest review of both; the bar of each sample calibrated on the other) and
   against paraphrases built in the test (two thesauri, spelling variants, several sentence orders); with SmolLM2
   when the model is installed (``GREBENCH_TEST_MODELS_DIR``), else skipped with the reason shown.
2. :func:`grebench.scoring.shift_test` / :func:`grebench.scoring.information_shift` — the submission-level test of
   the per-paper information ratios against the honest reviewers' on the same papers; a tailored submission (copies
   on some papers only, each under the per-paper bar) is held with those papers named.
"""

from __future__ import annotations

import math
import os
import random
import re
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from grebench.endpoints import KeyVault
from grebench.ingest import BUNDLED, bundled_source
from grebench.scoring import (
    HUMAN_FACTOR,
    SHIFT_ALPHA,
    LMCopyCheck,
    LogprobRequest,
    LogprobResult,
    PaperReviews,
    conformal_bar,
    information_flags,
    information_shift,
    line_gain,
    rules_judgment_lines,
    shift_test,
)
from grebench.scoring.estimators._offline import OfflineEstimator
from grebench.settings import Settings
from grebench.store import PaperRecord, Store, open_store, utcnow
from grebench.submissions import held_submissions, recheck_held

# -- the arithmetic ------------------------------------------------------------------------------------------------


def test_a_line_counts_only_where_the_candidate_helps_it() -> None:
    # two lines of cost 10 each: the first made 4 nats likelier, the second 6 less likely (not cancelled)
    assert line_gain([-6.0, -16.0], [-10.0, -10.0]) == pytest.approx(0.2)
    assert line_gain([], []) == 0.0


def test_the_conformal_bar_flags_at_most_the_target_share_of_its_own_sample() -> None:
    values = [random.Random(k).lognormvariate(0, 0.5) for k in range(2000)]
    bar = conformal_bar(values, 0.005)
    assert sum(v >= bar for v in values) / len(values) <= 0.005
    assert bar < max(values) * 1.2  # a quantile, not merely the largest
    few = [1.0, 2.0, 3.0]
    assert conformal_bar(few, 0.005) > 3.0  # too few to place the quantile: above every one


# -- the bundled samples, as the LM check reads them ---------------------------------------------------------------

def _papers(name: str) -> dict[str, PaperReviews]:
    return {p.paper_id: PaperReviews(p.paper_id, p.abstract, {r.review_id: rules_judgment_lines(r.text)
                                                              for r in p.reviews})
            for p in bundled_source(name).fetch() if isinstance(p, PaperRecord) and len(p.reviews) >= 2}


def _records(name: str) -> dict[str, PaperRecord]:
    return {p.paper_id: p for p in bundled_source(name).fetch() if isinstance(p, PaperRecord) and len(p.reviews) >= 2}


@pytest.fixture(scope="module")
def offline_checks() -> dict[str, LMCopyCheck]:
    """One calibrated LM check per bundled sample, with the offline estimator fitted on both samples' lines."""
    papers = {name: _papers(name) for name in BUNDLED}
    corpus = {pid: ["\n".join(lines) for lines in pr.reviews.values() if lines]
              for by in papers.values() for pid, pr in by.items()}
    estimator = OfflineEstimator(corpus)
    checks = {name: LMCopyCheck(estimator, papers[name]) for name in BUNDLED}
    for check in checks.values():
        check.calibrate()
    return checks


def test_honest_reviews_pass_with_a_bar_calibrated_on_other_papers(offline_checks: dict[str, LMCopyCheck]) -> None:
    """Every honest review of both bundled samples against the other reviews of its paper: at most 0.5 % reach the
    bar calibrated on the honest reviews of the *other half* of the sample's papers (a bar never fitted to the
    reviews it is measured on)."""
    for name, check in offline_checks.items():
        ids = sorted(set(check.calibration_papers))
        fold = {pid: k % 2 for k, pid in enumerate(ids)}
        bars = [conformal_bar([v for v, pid in zip(check.calibration, check.calibration_papers, strict=True)
                               if fold[pid] != half]) for half in (0, 1)]
        flagged = sum(v >= bars[fold[pid]] for v, pid in zip(check.calibration, check.calibration_papers, strict=True))
        assert len(check.calibration) >= 900, (name, len(check.calibration))
        assert flagged / len(check.calibration) <= 0.005, (name, flagged, len(check.calibration), bars)


# -- paraphrases built here: two thesauri, spelling variants, several orders ----------------------------------------

_THESAURUS_A = {
    "paper": "manuscript", "method": "technique", "results": "outcomes", "experiments": "trials", "novel": "original",
    "limited": "narrow", "show": "exhibit", "shows": "exhibits", "important": "crucial", "unclear": "vague",
    "improve": "boost", "improves": "boosts", "performance": "effectiveness", "authors": "researchers",
    "model": "system", "models": "systems", "propose": "put forward", "proposed": "put-forward",
    "approach": "strategy", "analysis": "examination", "evaluation": "appraisal", "problem": "difficulty",
    "training": "fitting", "dataset": "corpus", "datasets": "corpora", "baseline": "reference system",
    "baselines": "reference systems", "strong": "convincing", "weak": "unconvincing", "missing": "omitted",
}
_THESAURUS_B = {
    "paper": "submission", "method": "procedure", "results": "findings", "experiments": "evaluations",
    "novel": "fresh", "limited": "modest", "show": "reveal", "shows": "reveals", "important": "key",
    "unclear": "ambiguous", "improve": "enhance", "improves": "enhances", "performance": "accuracy",
    "authors": "writers", "model": "network", "models": "networks", "propose": "introduce", "proposed": "introduced",
    "approach": "scheme", "analysis": "study", "evaluation": "assessment", "problem": "issue", "training": "learning",
    "dataset": "benchmark", "datasets": "benchmarks", "baseline": "comparison point", "strong": "solid",
    "weak": "poor", "missing": "absent", "interesting": "intriguing", "clear": "evident", "however": "yet",
}


def _respell(word: str) -> str:
    """A spelling variant (a synonym source that needs no list): -ize/-ise, -or/-our, -ed/-t."""
    for a, b in (("ization", "isation"), ("ize", "ise"), ("yze", "yse"), ("avior", "aviour"), ("learned", "learnt")):
        if a in word:
            return word.replace(a, b)
    return word


def _synonymise(sentence: str, thesaurus: dict[str, str], rng: random.Random) -> str:
    out = []
    for token in sentence.split():
        m = re.match(r"^(\W*)([A-Za-z]+)(\W*)$", token)
        if not m:
            out.append(token)
            continue
        lead, word, tail = m.groups()
        new = thesaurus.get(word.lower()) or _respell(word)
        if rng.random() < 0.5 and new == word:
            new = thesaurus.get(word.lower().rstrip("s"), word)
        out.append(lead + (new[:1].upper() + new[1:] if word[:1].isupper() else new) + tail)
    return " ".join(out)


_ORDERS: dict[str, Callable[[list[str], random.Random], list[str]]] = {
    "shuffled": lambda s, rng: rng.sample(s, len(s)),
    "reversed": lambda s, rng: s[::-1],
    "interleaved": lambda s, rng: s[1::2] + s[0::2],
}


def _paraphrase(paper: PaperRecord, stand_in: str, share: float, variant: int) -> str:
    """``stand_in`` (a review of another paper), then ``share`` of the sentences of every public review of
    ``paper``, synonymised with one of the sources and put in one of the orders (chosen by ``variant``)."""
    rng = random.Random(f"{paper.paper_id}/{variant}")
    thesaurus = (_THESAURUS_A, _THESAURUS_B)[variant % 2]
    taken: list[str] = []
    for review in paper.reviews:
        sentences = [s for s in re.split(r"(?<=[.!?])\s+|\n+", review.text) if len(s.split()) >= 3]
        taken += rng.sample(sentences, max(1, round(share * len(sentences)))) if sentences else []
    order = list(_ORDERS.values())[variant % len(_ORDERS)]
    return stand_in + "\n\n" + " ".join(_synonymise(s, thesaurus, rng) for s in order(taken, rng))


@pytest.mark.parametrize("share", [0.3, 1.0])
def test_a_synonym_paraphrase_of_the_public_reviews_is_caught(offline_checks: dict[str, LMCopyCheck],
                                                             share: float) -> None:
    name = "iclr2026"
    records = _records(name)
    ids = sorted(records)
    papers, stand_ins = ids[:24], ids[-24:]
    check = offline_checks[name]
    texts = [_paraphrase(records[pid], records[other].reviews[0].text, share, k)
             for k, (pid, other) in enumerate(zip(papers, stand_ins, strict=True))]
    found = check.check([(pid, rules_judgment_lines(t)) for pid, t in zip(papers, texts, strict=True)])
    caught = [e for e in found if e.copied]
    assert len(caught) >= 0.9 * len(papers), [(e.paper_id, e.statistic, e.bar) for e in found]
    # the stand-in alone (honest text, of another paper) is no copy of this paper's reviews
    alone = check.check([(pid, rules_judgment_lines(records[other].reviews[0].text))
                         for pid, other in zip(papers, stand_ins, strict=True)])
    assert sum(e.copied for e in alone) == 0
    assert all("as well as an honest review" in e.describe() for e in caught)


@pytest.mark.skipif(not os.environ.get("GREBENCH_TEST_MODELS_DIR"),
                    reason="SmolLM2 scores about one LM copy check request a second on a 2-core CPU: two papers take "
                           "about 7 minutes (calibration included); run where GREBENCH_TEST_MODELS_DIR holds the model "
                           "(pulled by `grebench models`)")
@pytest.mark.timeout(1800)
def test_with_smollm2_a_paraphrase_is_caught_and_honest_reviews_pass(real_models_dir: Path) -> None:
    """The same rule with the real evaluation LM, on two papers (a CPU run of minutes): each paper's paraphrase
    (30 % of every public review's sentences, behind the other paper's review) carries more of the public reviews
    than any honest review of the paper does, and no honest review of one paper reaches the bar calibrated on the
    other's honest reviews (a bar never fitted to the reviews it is measured on)."""
    from grebench.scoring import EstimatorHandle
    from grebench.settings import load_settings

    settings = load_settings(env={"GREBENCH_DATA_DIR": str(real_models_dir / "data"),
                                  "GREBENCH_MODELS_DIR": str(real_models_dir)})
    records = _records("iclr2026")
    ids = sorted(records)[:2]
    papers = {pid: pr for pid, pr in _papers("iclr2026").items() if pid in ids}
    handle = EstimatorHandle("hf:smollm2-135m", settings)
    try:
        check = LMCopyCheck(handle.get(None), papers)
        check.calibrate()
        found = check.check([(pid, rules_judgment_lines(_paraphrase(records[pid], records[ids[1 - k]].reviews[0].text,
                                                                    0.3, k)))
                             for k, pid in enumerate(ids)])
    finally:
        handle.close()
    honest = {pid: [v for v, p in zip(check.calibration, check.calibration_papers, strict=True) if p == pid]
              for pid in ids}
    shown = [(e.paper_id, e.statistic, honest[e.paper_id]) for e in found]
    assert all(len(v) >= 2 for v in honest.values()), honest
    assert all(e.statistic > max(honest[e.paper_id]) for e in found), shown
    for k, pid in enumerate(ids):
        assert max(honest[pid]) < conformal_bar(honest[ids[1 - k]]), honest


# -- the submission-level test -------------------------------------------------------------------------------------

def _honest(papers: int, seed: int) -> dict[str, list[float]]:
    rng = random.Random(seed)
    return {f"p{i:02d}": [rng.lognormvariate(0, 0.4) for _ in range(3)] for i in range(papers)}


def test_a_tailored_submission_is_held_and_its_papers_named() -> None:
    """Copies served on 16 of 40 papers only, each at 2.5x the best honest reviewer (under the per-paper 3x bar), an
    honest-like review on the others (the issue's tailoring: about 1.7x the human's information on average): the
    submission is shifted, the test holds it and names those papers."""
    honest = _honest(40, 1)
    rng = random.Random(2)
    copied = set(rng.sample(sorted(honest), 16))
    mine = {p: (2.5 * max(v) if p in copied else rng.lognormvariate(0, 0.4)) for p, v in honest.items()}
    test = shift_test(mine, honest)
    assert test.held and test.p < SHIFT_ALPHA, test
    assert copied <= set(test.excess_papers) and len(test.excess_papers) <= len(copied) + 2, test
    assert "information shift test" in test.describe() and "p " in test.describe()


def test_honest_submissions_are_not_held() -> None:
    """A submission drawn like the honest reviewers (one of them per paper, tested against the others): held at
    about the test's alpha or less, over 200 seeded submissions."""
    held = 0
    for k in range(200):
        rng = random.Random(f"honest/{k}")
        honest = {f"p{i:02d}": [rng.lognormvariate(0, 0.4) for _ in range(4)] for i in range(40)}
        mine = {p: v[0] for p, v in honest.items()}
        rest = {p: v[1:] for p, v in honest.items()}
        held += shift_test(mine, rest).held
    assert held <= 3, held


def _score(store: Store, candidate: str, paper: str, share: float) -> None:
    marginal = -100.0
    store.con.execute(
        "INSERT INTO scores (metric, estimator, preprocessor, prompt_version, candidate, paper_id, reference_review_id,"
        " generation_id, conditional, marginal, pmi, n_tokens, created_at) VALUES ('gem-s', 'offline', 'rules', "
        "'gem-v1', ?, ?, 'r1', ?, ?, ?, ?, 10, ?)",
        [candidate, paper, f"{candidate}/{paper}", marginal + share * 100, marginal, share * 100, utcnow()])


def test_the_store_holds_a_shifted_submission_with_the_evidence() -> None:
    store = open_store(None)
    try:
        for name, kind in (("human", "human"), ("builtin-a", "llm"), ("builtin-b", "llm"), ("Tailor", "submitted"),
                           ("Honest", "submitted")):
            store.con.execute("INSERT INTO candidates (name, kind, params_json, updated_at) VALUES (?, ?, '{}', ?)",
                              [name, kind, utcnow()])
        rng = random.Random(3)
        copied = {f"paper{i:02d}" for i in range(0, 30, 2)}
        honest = {f"paper{i:02d}": [0.05 * rng.lognormvariate(0, 0.3) for _ in range(3)] for i in range(30)}
        typical = statistics.median(v[0] for v in honest.values())  # the information view's bar: human or typical
        for pid, values in honest.items():
            for name, share in zip(("human", "builtin-a", "builtin-b"), values, strict=True):
                _score(store, name, pid, share)
            under_the_view = 0.97 * HUMAN_FACTOR * max(values[0], typical)
            _score(store, "Tailor", pid, under_the_view if pid in copied else sorted(values)[1])
            _score(store, "Honest", pid, values[1] * rng.uniform(0.9, 1.1))
        assert information_flags(store, "Tailor") == []  # no paper reaches the per-paper bar
        test = information_shift(store, "Tailor")
        assert test is not None and test.held and set(test.excess_papers) == copied, test
        honest_test = information_shift(store, "Honest")
        assert honest_test is not None and not honest_test.held and not math.isnan(honest_test.p)
        held = recheck_held(store)
        assert [h["candidate"] for h in held] == ["Tailor"] and held[0]["papers"] == len(copied)
        detail = held_submissions(store)["Tailor"]
        assert "information shift test" in detail and "one-sided p " in detail
        named = re.findall(r"paper\d\d", detail.split("the excess on")[1])
        assert named and set(named) <= copied
        assert recheck_held(store) == []  # held already on this evidence: nothing written twice
    finally:
        store.close()


# -- the product path: the copy check of a submitted candidate --------------------------------------------------------

def _submission_store(records: list[PaperRecord], checked: list[PaperRecord]) -> Store:
    """An in-memory store of ``records`` with two submitted candidates on ``checked``: "Paraphraser" (a paraphrase
    of each paper's public reviews behind another paper's review) and "Elsewhere" (that other review alone)."""
    store = open_store(None)
    with store.transaction():
        for paper in records:
            store.upsert_paper(paper)
    for name in ("Paraphraser", "Elsewhere"):
        store.con.execute("INSERT INTO candidates (name, kind, params_json, updated_at) VALUES (?, 'submitted', "
                          "'{}', ?)", [name, utcnow()])
    for k, paper in enumerate(checked):
        other = records[-1 - k].reviews[0].text
        for name, text in (("Paraphraser", _paraphrase(paper, other, 0.3, k)), ("Elsewhere", other)):
            store.con.execute("INSERT INTO generations (generation_id, candidate, paper_id, prompt_version, "
                              "params_json, status, text, generated_at) VALUES (?, ?, ?, 'v1', '{}', 'ok', ?, ?)",
                              [f"{name}/{paper.paper_id}", name, paper.paper_id, text, utcnow()])
    return store


def _cached_requests(store: Store) -> int:
    return int(store.scalar("SELECT count(*) FROM logprob_cache") or 0)


def test_the_copy_check_refuses_a_paraphrase_by_its_information_with_the_lm_estimator(tmp_path: Path) -> None:
    """``lm_copy_estimator = offline``: :func:`grebench.submissions.check_copies` flags a candidate whose reviews are
    paraphrases of their papers' public reviews (calibrated on the store's honest reviews), with the evidence, and
    passes one whose reviews are honest text about other papers; without the setting the LM check does not run."""
    from grebench.settings import load_settings
    from grebench.submissions import check_copies

    records = list(_records("iclr2026").values())[:80]
    checked = records[:10]
    store = _submission_store(records, checked)
    try:
        settings = load_settings(env={"GREBENCH_DATA_DIR": str(tmp_path), "GREBENCH_LM_COPY_ESTIMATOR": "offline"})
        copied = check_copies(store, "Paraphraser", settings)
        assert len(copied.lm_copies) >= 9 and copied.flagged, copied
        assert "LM copy check under offline" in copied.summary() and "as well as an honest review" in copied.summary()
        honest = check_copies(store, "Elsewhere", settings)
        assert honest.lm_copies == () and honest.checked == len(checked)
        off = check_copies(store, "Paraphraser", load_settings(env={"GREBENCH_DATA_DIR": str(tmp_path)}))
        assert off.lm_copies == ()
    finally:
        store.close()


def test_a_second_copy_check_computes_only_the_requests_of_reviews_it_has_not_seen(tmp_path: Path) -> None:
    """The LM copy check goes through the store's log-prob cache: checking the same candidate again (its approval
    after its evaluation) computes nothing, calibration included, and finds the same; another candidate on the same
    papers computes only its own reviews' requests (the calibration is read from the cache)."""
    from grebench.settings import load_settings
    from grebench.submissions import check_copies

    records = list(_records("iclr2026").values())[:40]
    checked = records[:10]
    store = _submission_store(records, checked)
    try:
        settings = load_settings(env={"GREBENCH_DATA_DIR": str(tmp_path), "GREBENCH_LM_COPY_ESTIMATOR": "offline"})
        first = check_copies(store, "Paraphraser", settings)
        calibrated = _cached_requests(store)
        assert calibrated > 0 and len(first.lm_copies) >= 9, first
        again = check_copies(store, "Paraphraser", settings)
        assert _cached_requests(store) == calibrated  # nothing computed: every request was in the cache
        assert again.lm_copies == first.lm_copies
        check_copies(store, "Elsewhere", settings)
        # at most one request per judgment line of each public review of each checked paper: its own checks only
        own_checks = sum(len(rules_judgment_lines(r.text)) for paper in checked for r in paper.reviews)
        assert 0 < _cached_requests(store) - calibrated <= own_checks
    finally:
        store.close()


class _Interrupted:
    """The estimator, interrupted at its ``at``-th call (a crash, a kill: what ran before must stay cached)."""

    def __init__(self, estimator: OfflineEstimator, at: int) -> None:
        self.estimator, self.at, self.calls = estimator, at, 0
        self.id = estimator.id

    def logprobs(self, requests: Sequence[LogprobRequest]) -> list[LogprobResult]:
        self.calls += 1
        if self.calls == self.at:
            raise KeyboardInterrupt
        return self.estimator.logprobs(requests)


def test_an_interrupted_calibration_keeps_what_it_computed() -> None:
    """A calibration interrupted midway leaves every finished batch in the log-prob cache; the next one computes
    only the rest and reaches the same bar as a calibration without any cache."""
    from grebench.scoring import CachedLogprobs

    papers = dict(sorted(_papers("iclr2026").items())[:12])
    estimator = OfflineEstimator({pid: ["\n".join(lines) for lines in pr.reviews.values() if lines]
                                  for pid, pr in papers.items()})
    store = open_store(None)
    try:
        broken = _Interrupted(estimator, at=4)
        with pytest.raises(KeyboardInterrupt):
            LMCopyCheck(estimator, papers, logprobs=CachedLogprobs(store, broken)).calibrate()
        kept = _cached_requests(store)
        assert broken.calls == 4 and kept > 0
        resumed = CachedLogprobs(store, estimator)
        check = LMCopyCheck(estimator, papers, logprobs=resumed)
        check.calibrate()
        assert resumed.computed == _cached_requests(store) - kept > 0  # nothing kept was computed again
        plain = LMCopyCheck(estimator, papers)
        plain.calibrate()
        assert (check.bar, check.calibration, check.typical) == (plain.bar, plain.calibration, plain.typical)
    finally:
        store.close()


def test_approval_shows_the_shift_test_with_its_p_and_refuses_a_shifted_submission(store: Store,
                                                                                   settings: Settings) -> None:
    """The approval's audit line carries the submission-level test and its p when it passes; a submission whose
    information is shifted above the honest reviewers' is refused and held with the test and its papers."""
    from grebench.submissions import (
        SubmissionError,
        SubmissionForm,
        SubmissionQueue,
        accept_queued_submissions,
        approve_submission,
    )

    queue = SubmissionQueue(None)
    ids = {}
    for name in ("Tailor", "Honest"):
        form = SubmissionForm(model_name=name, base_url="https://api.model.example/v1", released="2019-03-01",
                              cutoff="2000-01-01", contact=f"{name.lower()}@example.org", api_key="sk-test-key")
        result = queue.submit(form, settings, KeyVault(env={}), {"api.model.example": ["93.184.216.34"]})
        assert result["ok"], result
        ids[name] = result["id"]
    accept_queued_submissions(store, queue, settings, {"api.model.example": ["93.184.216.34"]})
    for name, kind in (("human", "human"), ("builtin-a", "llm"), ("builtin-b", "llm")):
        store.con.execute("INSERT INTO candidates (name, kind, params_json, updated_at) VALUES (?, ?, '{}', ?)",
                          [name, kind, utcnow()])
    rng = random.Random(5)
    for i in range(24):
        pid = f"paper{i:02d}"
        values = [0.05 * rng.lognormvariate(0, 0.3) for _ in range(3)]
        for name, share in zip(("human", "builtin-a", "builtin-b"), values, strict=True):
            _score(store, name, pid, share)
        _score(store, "Tailor", pid, 2.5 * max(values) if i % 2 == 0 else sorted(values)[1])
        _score(store, "Honest", pid, sorted(values)[1])
        for name in ("Tailor", "Honest"):  # the odd papers' reviews were hidden when it wrote (sealed)
            store.con.execute("INSERT INTO generations (generation_id, candidate, paper_id, prompt_version, "
                              "params_json, status, text, generated_at, sealed) VALUES (?, ?, ?, 'v1', '{}', 'ok', "
                              "'A review.', ?, ?)", [f"{name}/{pid}", name, pid, utcnow(), i % 2 == 1])
    approved = approve_submission(store, ids["Honest"])
    assert "information shift test (offline / rules): 24 papers" in approved["detail"]
    assert "one-sided p = " in approved["detail"]
    assert "sealed-gap test (offline / rules): on its 12 papers whose reviews were public" in approved["detail"]
    with pytest.raises(SubmissionError, match="information shift test") as refused:
        approve_submission(store, ids["Tailor"])
    assert "the excess on 12 papers" in str(refused.value) and "paper00" in str(refused.value)
    assert "sealed-gap test" in str(refused.value)  # copied only where the reviews were public: both tests see it
    assert store.scalar("SELECT cutoff FROM candidates WHERE name = 'Tailor'") is None
    assert "Tailor" in held_submissions(store)

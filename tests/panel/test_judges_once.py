"""A panel builds its judges once per job (issue 49): every venue-year asks the same judges, each bound to that
venue-year's inputs (:meth:`grebench.panel.Judge.for_venue`), and the local judges are the job's, never the
setting's."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest

from grebench.panel import (
    JUDGES,
    Judge,
    JudgeContext,
    OverlapJudge,
    PaperView,
    ReviewView,
    TfIdf,
    VenueInputs,
    Verdict,
    judge_names,
    run_panel,
)
from grebench.panel._data import load_venue
from grebench.panel._judges import venue_judge
from grebench.settings import Settings
from grebench.store import Store
from tests.panel.builders import TOPICS, UNSCORED, VENUE, build_venue

OTHER = "Other.cc/2025/Conference"
#: the other venue-year shares its first paper with VENUE (same title, abstract and reviews) among other papers: the
#: same pair is judged under two corpora
OTHER_TOPICS = [TOPICS[0],
                ("Protein folding with language models", "We fold proteins with a protein language model and "
                 "structure priors, improving contact prediction on benchmark sets."),
                ("Sparse mixtures of experts for translation", "We route tokens to sparse experts, scaling machine "
                 "translation with constant compute per token."),
                ("Robust control of legged robots", "We learn robust locomotion controllers for legged robots "
                 "from simulation with domain randomisation.")]


class Counting(Judge):
    """A judge that prefers the longer review, counts its answers as model calls and notes every venue-year it is
    bound to (it answers alike everywhere, so it stays itself)."""

    name, kind, description = "counting", "reference", "test judge"

    def __init__(self) -> None:
        self.calls_made = 0
        self.venues: list[str] = []
        self.answered_by: set[int] = set()

    def for_venue(self, venue: VenueInputs) -> Judge:
        self.venues.append(venue.venue_id)
        return self

    def compare(self, paper: PaperView, review_a: ReviewView, review_b: ReviewView) -> Verdict:
        self.calls_made += 1
        self.answered_by.add(id(self))
        a, b = len(review_a.text), len(review_b.text)
        return Verdict("tie" if a == b else "one" if a > b else "two", 0.7, "longer")


@pytest.fixture
def counting() -> Iterator[list[Counting]]:
    """The ``counting`` judge registered for one test; the list holds every judge its factory made."""
    made: list[Counting] = []

    def factory(context: JudgeContext) -> Counting:
        made.append(Counting())
        return made[-1]

    JUDGES.add("counting", factory, summary="test judge")
    try:
        yield made
    finally:
        JUDGES._entries.pop("counting")


def _two_venues(store: Store) -> None:
    build_venue(store)
    build_venue(store, venue=OTHER, topics=OTHER_TOPICS, prefix="other")


def _settings(settings: Settings) -> Settings:
    return Settings(values={**settings.values, "bootstrap_samples": 20, "exam_pairs": 6}, tables={})


def test_a_panel_over_two_venue_years_builds_each_judge_once_and_counts_it_once(
        counting: list[Counting], settings: Settings, store: Store) -> None:
    _two_venues(store)
    summary = run_panel(store, _settings(settings), None, **UNSCORED, judge_names=["counting", "length", "overlap"])
    assert summary["venues"] == sorted([VENUE, OTHER]) and summary["skipped_venues"] == []
    [judge] = counting  # one factory call for the whole job, not one per venue-year
    assert judge.venues == sorted([VENUE, OTHER])  # bound to each venue-year in turn
    assert judge.answered_by == {id(judge)}  # the one judge object answered on both
    assert {r["venue_id"] for r in summary["exam"] if r["judge"] == "counting"} == {VENUE, OTHER}
    # its calls are summed once (not once per venue-year it judged)
    assert judge.calls_made > 0 and summary["calls_made"] == judge.calls_made
    assert store.scalar("SELECT count(*) FROM judges") == 3


def test_the_overlap_judge_judges_each_venue_year_with_its_own_tfidf_model(settings: Settings,
                                                                             store: Store) -> None:
    """The same pair (same paper, same two reviews) in two venue-years of different papers gets each venue-year's
    verdict: that of an overlap judge over the TF-IDF model of that venue-year's papers."""
    _two_venues(store)
    # the overlap judge alone: it is its own threshold, so it qualifies and votes on every pair
    run_panel(store, _settings(settings), None, **UNSCORED, judge_names=["overlap"])
    shared: dict[str, str] = {}
    for venue_id in (VENUE, OTHER):
        data = load_venue(store, venue_id)
        own = OverlapJudge(TfIdf("\n".join([p.title, p.abstract, p.text]) for p in data.papers.values()))
        votes = store.rows("SELECT * FROM panel_votes WHERE venue_id = ? AND judge = 'overlap'", [venue_id])
        assert votes
        for v in votes:
            a, b = data.generations[v["paper_id"]][v["candidate_a"]], data.generations[v["paper_id"]][v["candidate_b"]]
            one, two = (a, b) if v["order_ab"] == "ab" else (b, a)
            expected = own.compare(data.papers[v["paper_id"]], one, two)
            assert (v["preference"], v["confidence"], v["reason"]) == (expected.preference,
                                                                       pytest.approx(expected.confidence),
                                                                       expected.reason)
            if data.papers[v["paper_id"]].title == TOPICS[0][0] and (v["candidate_a"], v["candidate_b"],
                                                                      v["order_ab"]) == ("generic", "human", "ab"):
                shared[venue_id] = v["reason"]
    # the shared pair's cosines differ between the two venue-years: a judge on one model would fail above
    assert len(shared) == 2 and shared[VENUE] != shared[OTHER]


def test_a_venue_binding_keeps_the_judge_s_name_and_kind() -> None:
    class Renamed(Judge):
        name, kind = "renamed", "reference"

        def for_venue(self, venue: VenueInputs) -> Judge:
            return OverlapJudge(venue.tfidf)

    venue = VenueInputs(VENUE, TfIdf(["x"]))
    bound = venue_judge(OverlapJudge(), venue)
    assert isinstance(bound, OverlapJudge) and bound.tfidf is venue.tfidf
    with pytest.raises(TypeError, match=r"judge 'renamed'\.for_venue made judge 'overlap'"):
        venue_judge(Renamed(), venue)
    with pytest.raises(RuntimeError, match="for_venue"):  # the judge a panel builds has no venue-year's model
        OverlapJudge().compare(PaperView("p", "t"), ReviewView("a"), ReviewView("b"))


def test_the_local_judges_are_the_job_s_never_the_setting_s(settings: Settings) -> None:
    with_setting = settings.replace(local_judges="smollm2-135m")
    assert "smollm2-135m" not in judge_names(with_setting, local_judges=())
    names: Sequence[str] = judge_names(settings, local_judges=("smollm2-135m", "/models/other-1.7B"))
    assert {"smollm2-135m", "other-1.7B"} <= set(names)


def test_the_evaluation_lm_is_closed_before_a_local_judge_is_asked(settings: Settings, store: Store) -> None:
    """Issue 47: a local judge's server loads a model of its own; the gem judge's evaluation LM (the job's handle)
    is closed once the exam texts are scored, before any local judge answers, so the two models never sit side by
    side (the first run's job and judge server summed 2.47 GB there)."""
    from grebench.scoring import EstimatorHandle

    events: list[str] = []

    class Handle(EstimatorHandle):
        def close(self) -> None:
            events.append("closed")
            super().close()

    class Local(Counting):
        name, judge_kind = "local-test", "local"

        def compare(self, paper: PaperView, review_a: ReviewView, review_b: ReviewView) -> Verdict:
            events.append("local judge asked")
            return super().compare(paper, review_a, review_b)

    JUDGES.add("local-test", lambda context: Local(), summary="test judge")
    try:
        build_venue(store)
        run_panel(store, _settings(settings), None, **{**UNSCORED, "estimator": Handle("offline", settings)},
                  judge_names=["gem", "local-test", "length"])
    finally:
        JUDGES._entries.pop("local-test")
    assert "local judge asked" in events and events.index("closed") < events.index("local judge asked")

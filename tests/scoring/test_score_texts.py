"""score_texts: any text scored against its paper's references by the score stage's own pair rule."""

from __future__ import annotations

import pytest

from grebench.scoring import (
    ScoredSetup,
    ScoringError,
    gem_judge_metric,
    headline_metric,
    stored_pmis,
)
from grebench.settings import Settings
from grebench.store import Store
from tests.panel.builders import build_venue
from tests.scoring.parts import score, score_setup_texts


def _scored(store: Store, settings: Settings) -> ScoredSetup:
    build_venue(store)
    summary = score(store, settings, None, estimator_spec="offline", preprocessor_spec="rules")
    return ScoredSetup("offline", "rules", summary["estimator"], summary["preprocessor"])


def test_a_generation_s_text_scores_exactly_as_the_score_stage_stored_it(store: Store, settings: Settings) -> None:
    setup = _scored(store, settings)
    metric = gem_judge_metric(store, setup)
    assert metric == headline_metric()
    items = [(r["paper_id"], r["text"]) for r in store.rows("SELECT paper_id, text FROM generations")]
    scored = score_setup_texts(store, settings, setup, metric, items)
    stored = stored_pmis(store, setup, metric)
    assert dict(scored.pmis) == dict(stored) and len(stored) == len(items)
    assert scored.estimator_calls == 0  # every request was the score stage's, found in the log-prob cache
    floored = [pmis for (pid, _), pmis in stored.items() if pid == "paper0" and min(pmis.values()) < 0]
    assert floored  # the generic review has no judgment lines: it carries the references' floors, not PMI 0


def test_a_reference_is_never_scored_against_itself(store: Store, settings: Settings) -> None:
    setup = _scored(store, settings)
    text = store.scalar("SELECT text FROM review_versions WHERE review_id = 'paper1-r1'")
    scored = score_setup_texts(store, settings, setup, headline_metric(), [("paper1", text), ("no-split", text)])
    assert [set(pmis) for pmis in scored.pmis.values()] == [{"paper1-r2"}]


def test_another_setup_is_refused_and_has_no_gem_metric(store: Store, settings: Settings) -> None:
    setup = _scored(store, settings)
    other = ScoredSetup("offline", "rules", "offline@elsewhere", setup.preprocessor_id)
    with pytest.raises(ScoringError, match="stored scores use estimator offline@elsewhere"):
        score_setup_texts(store, settings, other, headline_metric(),
                          [("paper0", "Weaknesses: the proof of lemma 2 fails.")])
    assert gem_judge_metric(store, other) is None and gem_judge_metric(store, None) is None


def test_the_prose_test_s_lm_is_built_from_its_spec_once_and_closed(store: Store, settings: Settings,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 61: ``unconditional_logprobs`` takes the built handle; the prose test builds it and closes it."""
    from grebench.scoring import EstimatorHandle
    from grebench.submissions._copycheck import lm_prose_findings

    build_venue(store)
    closed: list[tuple[str, int]] = []
    real_close = EstimatorHandle.close

    def spied_close(self: EstimatorHandle) -> None:
        closed.append((self.spec, self.builds))
        real_close(self)

    monkeypatch.setattr(EstimatorHandle, "close", spied_close)
    found = lm_prose_findings(store, settings.replace(prose_estimator="offline"),
                              ["Weaknesses: the proof of lemma 2 fails and the experiments are limited."])
    assert len(found) == 1 and found[0].count > 0 and "under offline" in found[0].measure
    assert closed == [("offline", 1)]

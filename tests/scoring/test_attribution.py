"""Per-line attribution (issue 35): leave-one-line-out contributions, stored with the scores, cached, summarised."""

from __future__ import annotations

import math

import pytest

from grebench.scoring import ATTRIBUTION_THRESHOLD, attribution_summary, paper_attribution
from grebench.scoring._preprocess import RulesPreprocessor
from grebench.scoring._request import LogprobRequest
from grebench.settings import Settings
from grebench.store import Store
from tests.scoring.conftest import FakeEstimator, add_generation
from tests.scoring.parts import score
from tests.scoring.test_engine import small_store  # noqa: F401  (fixture)


def _loo(settings: Settings) -> Settings:
    return settings.replace(attribution="leave-one-out")


def test_contributions_match_a_direct_recomputation(small_store: Store, settings: Settings,  # noqa: F811
                                                    fake_estimator: FakeEstimator) -> None:
    summary = score(small_store, _loo(settings), None, ["gem", "gem-s"], "offline", "rules",
                    estimator=fake_estimator)
    rows = small_store.rows("""SELECT a.*, s.conditional, s.marginal FROM line_attribution a JOIN scores s
                               USING (metric, estimator, preprocessor, candidate, paper_id, reference_review_id)
                               ORDER BY ALL""")
    assert rows and summary["attribution"]["rows"] == len(rows)
    # every request the estimator answered is counted once, the attribution's among them
    assert summary["estimator_calls"] == fake_estimator.calls > summary["attribution"]["requests"] > 0
    abstracts = {r["paper_id"]: r["abstract"] for r in small_store.rows("SELECT paper_id, abstract FROM papers")}
    prep = RulesPreprocessor()
    checked = 0
    for r in rows:
        text = small_store.scalar("SELECT text FROM generations WHERE generation_id = ?", [r["generation_id"]])
        lines = prep.preprocess([text])[0].lines
        assert r["line"] == lines[r["line_no"]]
        target = small_store.scalar("SELECT text FROM review_versions WHERE review_id = ?", [r["reference_review_id"]])
        ref_text = prep.preprocess([target])[0].text
        synopsis = abstracts[r["paper_id"]] if r["metric"] == "gem-s" else None
        rest = "\n".join(x for i, x in enumerate(lines) if i != r["line_no"]) or None
        fresh = FakeEstimator()
        full, without = fresh.logprobs([LogprobRequest(r["paper_id"], synopsis, "\n".join(lines), ref_text),
                                        LogprobRequest(r["paper_id"], synopsis, rest, ref_text)])
        assert full.logprob == pytest.approx(r["conditional"], abs=1e-12)  # the scored pair's own conditional
        assert r["contribution"] == pytest.approx(full.logprob - without.logprob, abs=1e-12)
        checked += 1
    assert checked == len(rows)
    one_line = [r for r in rows if r["candidate"] == "sentence-deletion"]
    # a one-line review: leaving its line out leaves nothing, so the line's contribution is the whole score
    for r in one_line:
        assert r["contribution"] == pytest.approx(r["conditional"] - r["marginal"], abs=1e-12)


def test_rerun_asks_nothing_and_new_generation_replaces_rows(small_store: Store, settings: Settings,  # noqa: F811
                                                              fake_estimator: FakeEstimator) -> None:
    score(small_store, _loo(settings), None, ["gem"], "offline", "rules", estimator=fake_estimator)
    before = small_store.scalar("SELECT count(*) FROM line_attribution")
    calls = fake_estimator.calls
    again = score(small_store, _loo(settings), None, ["gem"], "offline", "rules", estimator=fake_estimator)
    assert fake_estimator.calls == calls and again["attribution"]["pairs"] == 0
    assert small_store.scalar("SELECT count(*) FROM line_attribution") == before


def test_auto_attributes_proxies_only(small_store: Store, settings: Settings,  # noqa: F811
                                      fake_estimator: FakeEstimator) -> None:
    lm = score(small_store, settings, None, ["gem"], "offline", "rules", estimator=fake_estimator)
    assert lm["attribution"]["pairs"] == 0 and small_store.scalar("SELECT count(*) FROM line_attribution") == 0
    proxy = score(small_store, settings, None, ["gem"], "offline", "rules")  # the offline word model
    assert proxy["attribution"]["pairs"] > 0
    assert small_store.scalar("SELECT count(DISTINCT estimator) FROM line_attribution WHERE estimator LIKE "
                              "'offline:%'") == 1
    off = score(small_store, settings.replace(attribution="off"), None, ["gem-s"], "offline", "rules")
    assert off["attribution"]["pairs"] == 0
    assert not small_store.scalar("SELECT count(*) FROM line_attribution WHERE metric = 'gem-s'")


def test_readers_average_over_references_and_summarise(small_store: Store, settings: Settings,  # noqa: F811
                                                       fake_estimator: FakeEstimator) -> None:
    score(small_store, _loo(settings), None, ["gem", "gem-s"], "offline", "rules", estimator=fake_estimator)
    pages = paper_attribution(small_store, ["A"])
    assert set(pages) == {"A"}
    for blocks in pages["A"].values():
        (block,) = blocks
        assert block["metrics"] == ["gem", "gem-s"]
        for line in block["lines"]:
            for m in block["metrics"]:
                refs = line["by_reference"][m]
                assert len(refs) == 2
                assert line["values"][m] == pytest.approx(sum(v for _, v in refs) / 2)
    summary = attribution_summary(small_store)
    for s in summary.values():
        assert s["carries"] + s["none"] + s["less"] == s["lines"] > 0
        assert math.isclose(s["carries_share"] + s["none_share"] + s["less_share"], 1.0)
    per_line = small_store.rows("""SELECT avg(contribution) AS v FROM line_attribution WHERE metric = 'gem'
                                   AND candidate = 'human' GROUP BY paper_id, line_no""")
    want = sum(r["v"] > ATTRIBUTION_THRESHOLD for r in per_line)
    prep = str(small_store.scalar("SELECT DISTINCT preprocessor FROM line_attribution"))
    assert summary[("V", "gem", "fake-lm", prep, "human")]["carries"] == want


def test_a_new_review_replaces_the_old_reviews_lines(small_store: Store, settings: Settings,  # noqa: F811
                                                     fake_estimator: FakeEstimator) -> None:
    score(small_store, _loo(settings), None, ["gem"], "offline", "rules", estimator=fake_estimator)
    where = "WHERE candidate = 'sentence-deletion' AND paper_id = 'A'"
    (old,) = small_store.rows(f"SELECT DISTINCT generation_id FROM line_attribution {where}")
    text = ("The hypernetwork initialisation is novel. The Omniglot experiments are weak. "
            "The gating ablation is missing.")
    n_lines = len(RulesPreprocessor().preprocess([text])[0].lines)
    assert n_lines > 1
    add_generation(small_store, "sentence-deletion", "A", text, "A0")
    summary = score(small_store, _loo(settings), None, ["gem"], "offline", "rules", estimator=fake_estimator)
    assert summary["attribution"]["pairs"] == 2  # the new review against its two references, nothing else again
    new = small_store.rows(f"SELECT generation_id, count(*) AS n FROM line_attribution {where} GROUP BY ALL")
    assert len(new) == 1 and new[0]["generation_id"] != old["generation_id"] and new[0]["n"] == 2 * n_lines

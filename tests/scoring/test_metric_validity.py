"""The default metric pipeline (rules preprocessor + offline estimator) passes its own validation on real data.

Issue #5: on the bundled ICLR 2020 sample no control may beat the human baseline significantly, the generic and
other-paper controls must fall below it with non-overlapping 95% CIs, sentence deletion must be penalised and no
transformation rewarded — for GEM and GEM-S.  This runs the real bench, scoring and validation code.
"""

from __future__ import annotations

import time

import pytest

from grebench.bench import run_bench
from grebench.scoring import RULES_ID, leaderboard, run_scoring, validation_rows
from grebench.settings import Settings
from grebench.store import Store

METRICS = ["gem", "gem-s"]


@pytest.mark.slow
def test_default_pipeline_passes_validation_on_bundled_data(bundled_store: Store, settings: Settings) -> None:
    run_id = bundled_store.start_run("test", {})
    run_bench(bundled_store, settings, run_id)
    started = time.perf_counter()
    summary = run_scoring(bundled_store, settings, run_id, METRICS, "offline", "rules")
    seconds = time.perf_counter() - started
    assert summary["preprocessor"] == RULES_ID and summary["estimator"].startswith("offline:")
    assert summary["estimator_calls"] > 5000
    assert seconds < 45, f"scoring the bundled data took {seconds:.1f} s"
    est, prep = summary["estimator"], summary["preprocessor"]

    for metric in METRICS:
        rows = {r["candidate"]: r for r in leaderboard(bundled_store, metric, est, prep, samples=1000)}
        human = rows["human"]
        assert human["papers"] >= 390
        for name, row in rows.items():
            if row["kind"] == "control":
                significant_gain = row["diff_vs_human"] > 0 and row["p_vs_human"] < 0.05
                assert not significant_gain, f"{metric}: control {name} beats the human baseline: {row}"
        for name in ("generic", "other-paper"):
            assert rows[name]["ci95_high"] < human["ci95_low"], f"{metric}: {name} CI overlaps human's"

    report = {(r["metric"], r["transformation"]): r for r in validation_rows(bundled_store, est, prep, METRICS,
                                                                             1000, 0)}
    for metric in METRICS:
        assert report[(metric, "sentence-deletion")]["verdict"] == "penalised"
        assert report[(metric, "other-paper")]["verdict"] == "penalised"
        rewarded = [t for (m, t), r in report.items() if m == metric and r["verdict"] == "rewarded"]
        assert not rewarded, f"{metric}: rewarded {rewarded}"

    again = run_scoring(bundled_store, settings, run_id, METRICS, "offline", "rules")
    assert again["estimator_calls"] == 0 and again["pairs_scored"] == 0

"""Issue 49: a stage's summary is a dataclass the commands read by attribute; its JSON does not change.

Behaviour: every summary a real job stores (with the run, in ``stage_state``) loads through ``from_json`` with no
key left over, and ``as_json`` gives the same JSON back, byte for byte; a summary stored before (keys since
added missing, keys since dropped present, a failed or skipped stage's few keys) loads without raising and is
given back unchanged too.
"""

from __future__ import annotations

import json
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from grebench.pipeline import (
    BenchSummary,
    BoardsSummary,
    IngestSummary,
    PanelSummary,
    RunOptions,
    ScoreSummary,
    SiteSummary,
    StageSummary,
    ValidateSummary,
    run_job,
    summary_of,
)
from grebench.pipeline._summaries import CONTRACTS
from grebench.settings import load_settings
from grebench.store import open_store
from tests.conftest import FAST_ENV


def _bytes(summary: dict[str, Any]) -> str:
    return json.dumps(summary, default=str)  # as the store writes it


def _round_trips(name: str, summary: dict[str, Any]) -> None:
    typed = CONTRACTS[name].from_json(summary)
    assert not typed.extra, (name, typed.extra)  # the contract declares every key the stage returns
    assert _bytes(typed.as_json()) == _bytes(summary), name
    assert CONTRACTS[name].from_json(typed.as_json()) == typed


def test_every_stage_summary_of_a_job_round_trips_unchanged(tmp_path: Path) -> None:
    settings = load_settings(env={**FAST_ENV, "GREBENCH_DATA_DIR": str(tmp_path / "data"), "GREBENCH_PAPERS": "3"})
    store = open_store(settings.db_path)
    try:
        for attempt in ("first", "unchanged"):  # the second run reads the stored summaries of unchanged stages
            done = run_job(settings, "run", RunOptions(), open_store=lambda: nullcontext(store))
            assert done.status == "ok", done.failures
            stages = done.result.stages
            assert set(stages) == set(CONTRACTS), attempt
            for name, summary in stages.items():
                _round_trips(name, summary)
        assert summary_of(stages, "validate").unchanged and summary_of(stages, "validate").rows  # a stored one
        assert summary_of(stages, "boards").boards
        score = summary_of(stages, "score")
        assert score.ran and score.pairs_scored == 0 and score.skips == stages["score"]["skipped"]
        # what the store kept: each run's summary by stage, and each stage's state
        for (text,) in store.con.execute("SELECT summary_json FROM runs WHERE summary_json IS NOT NULL").fetchall():
            for name, summary in (json.loads(text).get("stages") or {}).items():
                if name in CONTRACTS:
                    _round_trips(name, summary)
        states = store.con.execute("SELECT stage, summary_json FROM stage_state WHERE summary_json IS NOT NULL "
                                   "AND stage IN ('boards', 'validate', 'site')").fetchall()
        assert {stage for stage, _ in states} == {"boards", "validate", "site"}
        for stage, text in states:
            _round_trips(stage, json.loads(text))
    finally:
        store.close()


#: Summaries as an older version stored them: keys it did not have yet are missing, one it dropped is there.
OLD: dict[str, dict[str, Any]] = {
    "ingest": {"source": "bundled", "papers_seen": 4, "papers_added": 4, "failures": [], "papers_total": 4,
               "reviews_total": 12, "pdf_bytes": 1024, "unchanged": False},
    "bench": {"calls_made": 0, "cached": 2, "failed": 0, "generations_total": 30, "tokens_in": 0, "tokens_out": 0,
              "cost_usd": 0.0, "skipped_papers": [], "candidates": [{"name": "human", "kind": "human",
                                                                     "generations": 4}], "unchanged": False},
    "score": {"metrics": ["gem-s"], "estimator": "offline", "preprocessor": "rules", "pairs_scored": 8,
              "estimator_calls": 16, "cache_hits": 0,
              "skipped": [{"metric": "gem-s", "what": "candidate review", "reason": "no lines", "count": 1}],
              "run_id": "r1"},
    "boards": {"skipped": "because [score] failed"},
    "validate": {"error": "ValueError: no rows"},
    "panel": {"venues": ["ICLR.cc/2026/Conference"], "exam": [], "rankings": [], "agreement": [], "votes": 0,
              "calls_made": 0, "cached": 0, "interrupted": "stopped"},
    "site": {"out": "/tmp/site", "pages": 7, "boards": 2, "version": None},
}


def test_a_summary_stored_before_loads_and_is_given_back_unchanged() -> None:
    for name, stored in OLD.items():
        typed = CONTRACTS[name].from_json(stored)
        assert _bytes(typed.as_json()) == _bytes(stored), name
    ingest = IngestSummary.from_json(OLD["ingest"])
    assert (ingest.papers_total, ingest.versions_total, ingest.extra) == (4, 0, {"pdf_bytes": 1024})
    assert ingest.ran and "versions_total" not in ingest.as_json()  # a default is not written where it was not
    bench = BenchSummary.from_json(OLD["bench"])
    assert bench.candidates[0]["name"] == "human" and bench.complete is None and bench.sample is None
    score = ScoreSummary.from_json(OLD["score"])
    assert score.skips[0]["count"] == 1 and score.skipped is None and score.attribution is None
    assert score.run_id == "r1"
    boards = BoardsSummary.from_json(OLD["boards"])
    assert boards.skipped == "because [score] failed" and boards.boards is None and not boards.ran
    validate = ValidateSummary.from_json(OLD["validate"])
    assert validate.error == "ValueError: no rows" and validate.rows == [] and not validate.ran
    assert validate.controls_not_tested is None
    panel = PanelSummary.from_json(OLD["panel"])
    assert panel.interrupted == "stopped" and panel.votes_total == 0 and not panel.ran
    site = SiteSummary.from_json(OLD["site"])
    assert site.ran and site.version is None and "version" in site.as_json() and site.published is None
    # a stage that did not run: an empty summary, every field at its default
    empty = summary_of({}, "site")
    assert empty == SiteSummary() and empty.as_json() == {} and not empty.ran


def test_a_summary_made_in_code_writes_only_what_is_set() -> None:
    assert ScoreSummary(pairs_scored=3, skips=[{"metric": "m", "what": "w", "reason": "r", "count": 2}]).as_json() \
        == {"pairs_scored": 3, "skipped": [{"metric": "m", "what": "w", "reason": "r", "count": 2}]}
    assert StageSummary(error="boom").as_json() == {"error": "boom"}
    set_later = SiteSummary.from_json({"out": "x"})
    set_later.pages = 3
    assert set_later.as_json() == {"out": "x", "pages": 3}

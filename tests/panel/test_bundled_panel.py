"""The exam and the panel on the bundled ICLR 2020 data with the reference judges (no LLM).

To stay fast the bundled store is cut to its first 60 papers (by id) before bench and scoring; the issue's
expectations are checked on that subset: ``position`` fails consistency, ``length`` fails pertinence, ``gem``
passes; ``overlap``, which prefers restated paper content, fails pertinence (the exam's pairs of a real review
against the abstract restatement and keyword stuffing of it).  The commands are then run through the CLI on the same
file.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from grebench.bench import run_bench
from grebench.cli._main import main
from grebench.panel import run_panel
from grebench.pipeline._resolve import record_scored
from grebench.scoring import ScoredSetup, gem_judge_metric
from grebench.settings import load_settings
from grebench.store import Store, open_store
from tests.conftest import FAST_ENV
from tests.scoring.parts import parts, score

PAPERS = 60


def _keep_first_papers(store: Store, n: int) -> None:
    keep = [r[0] for r in store.con.execute("SELECT paper_id FROM papers ORDER BY paper_id LIMIT ?", [n]).fetchall()]
    gone = "NOT IN (SELECT unnest(?::VARCHAR[]))"
    store.con.execute(f"DELETE FROM review_versions WHERE review_id IN (SELECT review_id FROM reviews "
                      f"WHERE paper_id {gone})", [keep])
    for table in ("reviews", "paper_texts", "papers"):
        store.con.execute(f"DELETE FROM {table} WHERE paper_id {gone}", [keep])


@pytest.fixture(scope="module")
def panel_run(bundled_db: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    data_dir = tmp_path_factory.mktemp("panel")
    shutil.copy2(bundled_db, data_dir / "grebench.duckdb")
    settings = load_settings(env={**FAST_ENV, "GREBENCH_DATA_DIR": str(data_dir), "GREBENCH_BOOTSTRAP_SAMPLES": "100"})
    store = open_store(settings.db_path)
    _keep_first_papers(store, PAPERS)
    run_id = store.start_run("test", {})
    run_bench(store, settings, run_id)
    scored = score(store, settings, run_id, estimator_spec="offline", preprocessor_spec="rules")
    setup = ScoredSetup("offline", "rules", scored["estimator"], scored["preprocessor"])
    record_scored(store, setup, run_id)  # as the score stage does: the CLI's exam and judge below examine with it
    with parts(store, settings, "offline", "rules") as (handle, preprocessor):  # the job's parts, as a job's
        summary = run_panel(store, settings, run_id, setup=setup, metric=gem_judge_metric(store, setup),
                            paper_ids=None, estimator=handle, preprocessor=preprocessor,
                            local_judges=())  # as FAST_ENV's jobs (the CLI's exam and judge below): no local judge
    tables = {t: store.rows(f"SELECT * FROM {t}") for t in ("judges", "judge_exams", "panel_verdicts",
                                                             "panel_rankings", "panel_agreement", "machine_metrics")}
    votes = store.scalar("SELECT count(*) FROM panel_votes")
    store.close()
    return {"summary": summary, "tables": tables, "votes": votes, "data_dir": data_dir}


def test_exam_catches_the_biased_reference_judges(panel_run: dict[str, Any]) -> None:
    exam = {r["judge"]: r for r in panel_run["summary"]["exam"]}
    assert set(exam) == {"position", "length", "overlap", "gem"}
    assert "consistency" in exam["position"]["failed"] and not exam["position"]["passed"]
    assert exam["position"]["p_c"] == 0.0 and exam["position"]["p_p"] == 0.5
    assert exam["length"]["p_c"] == 1.0 and exam["length"]["failed"][:1] == ["pertinence"]
    assert not exam["length"]["passed"] and exam["length"]["p_p"] < 0.5  # IA reviews are the longer ones
    assert exam["gem"]["passed"], exam["gem"]
    assert exam["gem"]["p_p"] >= exam["gem"]["eta_p"] and exam["gem"]["p_c"] >= exam["gem"]["eta_c"]
    # overlap is consistent but rewards restated paper content: the pertinence pairs against restatement catch it
    assert exam["overlap"]["p_c"] == 1.0 and exam["overlap"]["failed"][:1] == ["pertinence"]
    assert not exam["overlap"]["passed"]
    eta_c = sum(r["p_c"] for r in exam.values()) / 4
    assert exam["gem"]["eta_c"] == pytest.approx(eta_c)
    assert exam["overlap"]["weight"] == pytest.approx((exam["overlap"]["p_c"] + exam["overlap"]["p_p"]
                                                       + exam["overlap"]["p_s"]) / 3)
    stored = {r["judge"]: r for r in panel_run["tables"]["judge_exams"]}
    assert json.loads(stored["position"]["failed_json"]) == exam["position"]["failed"]
    assert {r["kind"] for r in panel_run["tables"]["judges"]} == {"reference"}


def test_panel_ranks_controls_below_the_human(panel_run: dict[str, Any]) -> None:
    rankings = {r["candidate"]: r for r in panel_run["tables"]["panel_rankings"]}
    assert rankings["human"]["strength"] > rankings["generic"]["strength"]
    assert rankings["human"]["strength"] > rankings["other-paper"]["strength"]
    # the human baseline is the only contestant: ranked 1; controls are reference rows without a rank
    assert {c: r["rank"] for c, r in rankings.items() if r["rank"] is not None} == {"human": 1}
    verdicts = panel_run["tables"]["panel_verdicts"]
    # no contestant pair, so every pair is human vs a control (never control vs control): one per control
    assert {(v["candidate_a"], v["candidate_b"]) for v in verdicts} <= {
        (min("human", c), max("human", c)) for c in rankings if c != "human"}
    assert len(verdicts) == PAPERS * (len(rankings) - 1)
    assert not any(v["debated"] for v in verdicts)  # reference judges never debate
    # only qualified judges voted (gem alone), each pair in both orders
    assert panel_run["summary"]["qualified"][0]["qualified"] == ["gem"]
    assert panel_run["votes"] == len(verdicts) * 2
    agreement = panel_run["tables"]["panel_agreement"][0]
    assert agreement["gem_metric"] == "gem-s" and agreement["n_pairs"] > 0
    assert -1.0 <= agreement["kendall_tau"] <= 1.0 and 0.0 <= agreement["pair_agreement"] <= 1.0
    metrics = panel_run["tables"]["machine_metrics"]
    assert len(metrics) > PAPERS * 4 and all(0 <= m["section_coverage"] <= 1 for m in metrics)


def test_cli_exam_and_judge_rerun_is_idempotent(panel_run: dict[str, Any]) -> None:
    runner = CliRunner()
    env = {"GREBENCH_DATA_DIR": str(panel_run["data_dir"]), "GREBENCH_BOOTSTRAP_SAMPLES": "50"}
    result = runner.invoke(main, ["exam", "--json"], env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    exam = json.loads(result.stdout)
    assert exam["venue_id"] == "ICLR.cc/2020/Conference" and exam["eta_c"] == pytest.approx(0.75)
    rows = {r["judge"]: r for r in exam["rows"]}
    assert rows["position"]["failed"][0] == "consistency" and rows["gem"]["passed"] is True
    assert set(rows["length"]) >= {"judge", "p_c", "p_p", "p_s", "passed", "weight", "failed"}
    result = runner.invoke(main, ["judge", "--json"], env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["votes"] == 0 and out["votes_total"] == panel_run["votes"] and out["calls_made"] == 0
    assert {"exam", "rankings", "agreement", "votes", "calls_made", "cached"} <= set(out)
    text = runner.invoke(main, ["judge", "--judge", "overlap"], env=env, catch_exceptions=False)
    assert text.exit_code == 0 and "panel ranking" in text.output and "reference" in text.output
    bad = runner.invoke(main, ["exam", "--judge", "nobody"], env=env)
    assert bad.exit_code != 0 and "unknown judge" in bad.output

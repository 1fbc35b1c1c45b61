"""Issue 47: the board and the validation read one paired test, so they agree on every control, and no p is shown
below what the test can reach on the board's papers; a core run checks the core controls with GEM-S only and says
what it did not test."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from grebench.bench import core_controls
from grebench.cli import main
from grebench.scoring import ALPHA, smallest_p
from grebench.store import open_store
from tests.conftest import FAST_ENV


def _run(env: dict[str, str], *args: str) -> tuple[dict[str, Any], str]:
    result = CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return (json.loads(result.stdout) if "--json" in args else {}), result.output


@pytest.mark.parametrize("papers", ["4", "12"])
def test_a_core_run_checks_the_core_controls_and_its_board_and_validation_agree(tmp_path: Path,
                                                                                papers: str) -> None:
    env = {**FAST_ENV, "GREBENCH_DATA_DIR": str(tmp_path / "data")}
    summary, _ = _run(env, "run", "--papers", papers, "--validation", "core", "--json")
    assert summary["resolved"]["validation"] == "core" and summary["metrics"] == ["gem-s"]
    validate = summary["stages"]["validate"]
    assert validate["validation"] == "core" and "gem" in validate["metrics_not_tested"]
    assert set(validate["controls_not_tested"]) >= {"generic", "sentence-shuffle", "reference-copy"}
    store = open_store(tmp_path / "data" / "grebench.duckdb", read_only=True)
    try:
        rows = store.rows("""SELECT r.candidate, r.role, r.diff_vs_human, r.p_vs_human, r.papers FROM board_rows r
                             JOIN boards b USING (board_id) WHERE b.metric = 'gem-s' AND b.scope = 'all'""")
        metrics = {r["metric"] for r in store.rows("SELECT DISTINCT metric FROM scores")}
    finally:
        store.close()
    assert metrics == {"gem-s"}  # GEM is not scored in the core set
    controls = {r["candidate"]: r for r in rows if r["role"] == "reference"}
    assert set(controls) == set(core_controls())
    checked = {r["transformation"]: r for r in validate["rows"] if r["metric"] == "gem-s"}
    assert set(core_controls()) <= set(checked)
    for name, row in controls.items():
        v = checked[name]
        # one test: the same p (the report keeps 3 significant digits) and the same direction
        assert v["p"] == float(f"{row['p_vs_human']:.3g}"), name
        assert (v["d"] > 0) == (row["diff_vs_human"] > 0) and (v["d"] < 0) == (row["diff_vs_human"] < 0), name
        assert (v["verdict"] == "penalised") == (row["p_vs_human"] < ALPHA and row["diff_vs_human"] < 0), name
        assert (v["verdict"] == "rewarded") == (row["p_vs_human"] < ALPHA and row["diff_vs_human"] > 0), name
        # no p below what the sign-flip test reaches on this many papers (4 papers: 0.125)
        assert row["p_vs_human"] >= smallest_p(row["papers"]) and v["p"] >= smallest_p(v["n_papers"]) * 0.999
        if int(papers) < 6:
            assert v["verdict"] == "too few papers to tell" and v["as_expected"] is None and v["papers_needed"] >= 6


def test_validate_on_a_core_store_says_what_it_did_not_test_and_prints_no_p_below_the_floor(tmp_path: Path) -> None:
    env = {**FAST_ENV, "GREBENCH_DATA_DIR": str(tmp_path / "data")}
    _run(env, "run", "--papers", "3", "--validation", "core")
    _, text = _run(env, "validate")
    assert "this store was scored with the core set: not tested here:" in text
    assert "`grebench run --validation full`" in text
    assert "NOT AS EXPECTED" not in text and "too few papers to tell" in text
    table = [line.split() for line in text.splitlines() if line.startswith("gem-s ")]
    assert len(table) == 5
    for cells in table:  # metric, control, kind, d, [low, high], p, papers, ...
        assert float(cells[6]) >= 0.25 and cells[7] == "3", cells  # 3 papers: the exact test reaches 2^-2
    _, board = _run(env, "leaderboard")
    assert "p = 0.000" not in board and "p=0.000" not in board
    assert "controls: the core controls (5:" in board

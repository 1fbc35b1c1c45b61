"""`grebench bench --json` on a copy of the bundled store."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from grebench.cli._main import main

FIELDS = {"calls_made", "cached", "failed", "generations_total", "tokens_in", "tokens_out", "cost_usd",
          "skipped_papers", "candidates"}


def test_bench_json_on_bundled_store_then_rerun_writes_nothing(bundled_db: Path, tmp_path: Path) -> None:
    shutil.copy2(bundled_db, tmp_path / "grebench.duckdb")
    runner = CliRunner()
    result = runner.invoke(main, ["--data-dir", str(tmp_path), "bench", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert set(summary) >= FIELDS
    assert summary["generations_total"] == 13 * 400 and summary["failed"] == 0 and summary["calls_made"] == 0
    assert {c["name"]: (c["kind"], c["generations"]) for c in summary["candidates"]} == {
        "human": ("human", 400), **{name: ("control", 400) for name in (
            "sentence-deletion", "elongation", "abstract-restatement", "generic", "other-paper", "keyword-stuffing",
            "keyword-stuffing-title", "sentence-shuffle", "repetition", "verdict-inversion", "empty",
            "reference-copy")}}
    again = json.loads(runner.invoke(main, ["--data-dir", str(tmp_path), "bench", "--json", "--candidate",
                                            "generic"]).stdout)
    assert again["generations_written"] == 0 and again["candidates"] == [
        {"name": "generic", "kind": "control", "generations": 400}]
    bad = runner.invoke(main, ["--data-dir", str(tmp_path), "bench", "--candidate", "nope"])
    assert bad.exit_code != 0 and "unknown candidate(s): nope" in bad.output

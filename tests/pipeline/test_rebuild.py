"""Issue 34 §3: a reader rebuilds the published numbers from a snapshot with one command, and every board says
what produced it.

A small offline run (the bundled sample, 6 seeded papers), its snapshot exported through the CLI, then
``grebench snapshot rebuild``: imported into an empty temporary store, scored again with the recorded setup, the
boards recomputed, compared with the published ones.  A copy whose one score (or one board number) was changed by
someone who also fixed the manifest's hashes verifies, and the rebuild fails naming what differs.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner, Result

from grebench.cli import main
from grebench.scoring import code_version
from grebench.settings import load_settings
from grebench.site._app_board import produced_line
from grebench.store import file_sha256, open_store, verify_snapshot
from grebench.store._snapshot import MANIFEST, decoded_bytes
from tests.conftest import FAST_ENV


def _cli(env: dict[str, str], *args: str) -> Result:
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A finished offline run on 6 papers and its snapshot (exported through the CLI)."""
    root = tmp_path_factory.mktemp("rebuild")
    env = {**FAST_ENV, "GREBENCH_DATA_DIR": str(root / "data"), "GREBENCH_PAPERS": "6",
           "GREBENCH_BOOTSTRAP_SAMPLES": "200"}
    assert _cli(env, "run").exit_code == 0
    result = _cli(env, "snapshot", "export", "--out", str(root / "snap"), "--json")
    assert result.exit_code == 0, result.output
    return {"env": env, "root": root, "snap": root / "snap", "manifest": json.loads(result.stdout)[0]}


def _tampered(snap: Path, target: Path, table: str, column: str, row: int, delta: float) -> dict[str, Any]:
    """A copy of ``snap`` with ``column`` of one row of ``table`` moved by ``delta``, the manifest's hashes fixed
    (a forger's copy: it verifies); returns that row as it was."""
    shutil.copytree(snap, target)
    path = target / f"{table}.parquet"
    data = pq.read_table(path)
    original = data.slice(row, 1).to_pylist()[0]
    values = data.column(column).to_pylist()
    values[row] = values[row] + delta
    data = data.set_column(data.schema.get_field_index(column), column,
                           pc.cast(values, data.schema.field(column).type))
    pq.write_table(data, path)
    manifest = json.loads((target / MANIFEST).read_text(encoding="utf-8"))
    manifest["files"][path.name].update(sha256=file_sha256(path), bytes=path.stat().st_size,
                                        decoded_bytes=decoded_bytes(path))
    (target / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    assert verify_snapshot(target)["ok"]  # the files match the (forged) manifest: only a rebuild can tell
    return original


def test_the_snapshot_rebuilds_to_the_published_numbers(published: dict[str, Any]) -> None:
    result = _cli(published["env"], "snapshot", "rebuild", str(published["snap"]))
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stdout.splitlines() if line.startswith(("PASS", "FAIL"))]
    boards = [line for line in lines if line.startswith("PASS  board ")]
    assert len(boards) == 4 and all(line.startswith("PASS") for line in lines)  # gem, gem-s × all, sealed
    assert "tolerance 1e-09" in boards[0] and "the published numbers rebuilt" in result.stdout

    report = json.loads(_cli(published["env"], "snapshot", "rebuild", str(published["snap"]), "--json").stdout)
    assert report["ok"] and {g["metric"] for g in report["scores"]} == {"gem", "gem-s"}
    assert all(g["n"] > 0 and g["max_diff"] <= 1e-9 for g in report["scores"])
    assert all(b["rows"] > 0 for b in report["boards"])


def test_a_changed_score_fails_the_rebuild_by_name(published: dict[str, Any], tmp_path: Path) -> None:
    row = _tampered(published["snap"], tmp_path / "forged", "scores", "pmi", 3, 0.5)
    result = _cli(published["env"], "snapshot", "rebuild", str(tmp_path / "forged"))
    assert result.exit_code == 1
    failed = [line for line in result.stdout.splitlines() if line.startswith("FAIL")]
    assert len(failed) == 1 and f"scores {row['metric']} " in failed[0]
    assert (f"score of {row['candidate']} on paper {row['paper_id']} against review {row['reference_review_id']}"
            in failed[0]) and "max |diff| 0.5" in failed[0]
    assert "NOT reproduced" in result.stdout


def test_a_changed_board_number_fails_that_board(published: dict[str, Any], tmp_path: Path) -> None:
    row = _tampered(published["snap"], tmp_path / "forged", "board_rows", "score", 0, 0.01)
    result = _cli(published["env"], "snapshot", "rebuild", str(tmp_path / "forged"))
    assert result.exit_code == 1
    failed = [line for line in result.stdout.splitlines() if line.startswith("FAIL")]
    assert len(failed) == 1 and failed[0].startswith(f"FAIL  board {row['board_id']}:")
    assert f"{row['candidate']}: score published" in result.stdout


def test_every_board_says_what_produced_it(published: dict[str, Any]) -> None:
    site = published["root"] / "data" / "site"
    board_json = json.loads((site / "leaderboard.json").read_text(encoding="utf-8"))
    prov = board_json["provenance"]
    assert prov == published["manifest"]["provenance"]  # one venue: the snapshot says the same as the board
    assert prov["code"] == code_version() and len(prov["code"]["scoring_sha256"]) == 64
    assert prov["rebuild"].startswith("grebench snapshot rebuild")
    estimator = board_json["boards"][0]["estimator"]
    assert prov["estimators"][estimator]["spec"] == "offline"
    assert prov["estimators"][estimator]["scored_with_code"] == code_version()  # recorded by the score stage
    assert prov["preprocessors"][board_json["boards"][0]["preprocessor"]]["spec"] == "rules"
    assert "bench/prompts/review_v2.txt" in prov["prompts"] and "panel/prompts/judge_v2.txt" in prov["prompts"]
    assert prov["candidates"]["human"]["kind"] == "human"
    store = open_store(published["root"] / "data" / "grebench.duckdb", read_only=True)
    try:
        venue_id, seed, papers = store.con.execute(
            "SELECT venue_id, seed, papers FROM boards WHERE scope = 'all' LIMIT 1").fetchone()
        exams = store.rows("SELECT judge, passed, weight FROM judge_exams WHERE venue_id = ? ORDER BY judge",
                           [venue_id])
    finally:
        store.close()
    venue = prov["venues"][venue_id]
    assert venue["sample"]["seed"] == seed and venue["sample"]["papers"] == papers == 6
    assert [(j["judge"], j["passed"], j["weight"]) for j in venue["panel"]] == \
        [(e["judge"], e["passed"], e["weight"]) for e in exams] and exams
    settings = load_settings(env=published["env"])
    line = produced_line(settings, board_json["boards"][0])  # the app's board view, from the published export
    assert line.startswith("How this was produced: grebench") and prov["code"]["scoring_sha256"][:12] in line
    assert all(f"{j['judge']} {'passed' if j['passed'] else 'failed'}" in line for j in venue["panel"])
    for page in [*site.glob("boards/*.html"), *site.glob("versions/*/index.html")]:
        html = page.read_text(encoding="utf-8")
        assert "How this was produced" in html and prov["code"]["scoring_sha256"][:16] in html, page

"""Snapshots: export → verify (tampering detected) → import into a fresh data dir → the same leaderboard."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from grebench.bench import run_bench
from grebench.cli._main import main
from grebench.scoring import leaderboard
from grebench.settings import load_settings
from grebench.store import Store, open_store
from grebench.store._snapshot import SnapshotError, export_snapshot, import_snapshot, verify_snapshot
from tests.bench.conftest import tiny_papers
from tests.conftest import FAST_ENV
from tests.scoring.parts import score

VENUE = "Test.cc/2019/Conference"


@pytest.fixture
def scored(tmp_path: Path) -> Store:
    """A file store with the tiny papers benched and scored (offline estimator, rules preprocessor)."""
    settings = load_settings(env={**FAST_ENV, "GREBENCH_DATA_DIR": str(tmp_path / "src"),
                                  "GREBENCH_BOOTSTRAP_SAMPLES": "50"})
    store = open_store(settings.db_path)
    with store.transaction():
        for paper in tiny_papers():
            store.upsert_paper(paper)
    run_bench(store, settings, None)  # type: ignore[arg-type]
    score(store, settings, None, ["gem-s"], settings.scoring.estimator, settings.scoring.preprocessor)
    yield store
    store.con.close()


def _board(store: Store) -> list[dict]:
    est, prep = store.con.execute("SELECT estimator, preprocessor FROM scores LIMIT 1").fetchone()
    return leaderboard(store, "gem-s", est, prep, samples=50, seed=3)


def test_export_verify_import_gives_the_same_leaderboard(scored: Store, tmp_path: Path) -> None:
    manifest = export_snapshot(scored, "test-cc-2019-conference", tmp_path / "snap")
    assert manifest["venue_id"] == VENUE and manifest["files"]["scores.parquet"]["rows"] > 0
    assert manifest["estimators"] and manifest["product_version"]
    assert verify_snapshot(tmp_path / "snap", manifest["manifest_sha256"])["ok"]
    with pytest.raises(SnapshotError, match="frozen"):
        export_snapshot(scored, VENUE, tmp_path / "snap")

    fresh = open_store(tmp_path / "fresh" / "grebench.duckdb")
    report = import_snapshot(fresh, tmp_path / "snap")
    assert report["rows_added"]["scores"] == manifest["files"]["scores.parquet"]["rows"]
    assert _board(fresh) == _board(scored)
    again = import_snapshot(fresh, tmp_path / "snap")
    assert set(again["rows_added"].values()) == {0}  # idempotent

    # the imported tables are enough to re-score: drop the scores and compute them again, same numbers
    settings = load_settings(env={**FAST_ENV, "GREBENCH_DATA_DIR": str(tmp_path / "fresh")})
    fresh.con.execute("DELETE FROM scores")
    summary = score(fresh, settings, None, ["gem-s"], settings.scoring.estimator, settings.scoring.preprocessor)
    assert summary["pairs_scored"] == manifest["files"]["scores.parquet"]["rows"]
    assert _board(fresh) == _board(scored)
    fresh.close()


def test_verify_detects_changed_missing_and_extra_files(scored: Store, tmp_path: Path) -> None:
    export_snapshot(scored, VENUE, tmp_path / "snap")
    target = tmp_path / "snap" / "generations.parquet"
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0xFF
    target.write_bytes(bytes(data))
    (tmp_path / "snap" / "papers.parquet").unlink()
    (tmp_path / "snap" / "extra.parquet").write_bytes(b"x")
    report = verify_snapshot(tmp_path / "snap")
    assert not report["ok"]
    assert any(p.startswith("generations.parquet: SHA-256 mismatch") for p in report["problems"])
    assert "papers.parquet: missing" in report["problems"]
    assert "extra.parquet: not in the manifest" in report["problems"]
    with pytest.raises(SnapshotError, match="verification failed"):
        import_snapshot(open_store(None), tmp_path / "snap")


def test_cli_export_verify_import(scored: Store, tmp_path: Path) -> None:
    src = scored.path.parent  # type: ignore[union-attr]
    scored.close()
    runner = CliRunner()
    out = runner.invoke(main, ["--data-dir", str(src), "snapshot", "export", "--json"])
    assert out.exit_code == 0, out.output
    [manifest] = json.loads(out.stdout)
    snap = src / "snapshots" / "Test-cc-2019-Conference"
    assert manifest["path"] == str(snap)
    ok = runner.invoke(main, ["snapshot", "verify", str(snap), "--json"])
    assert ok.exit_code == 0 and json.loads(ok.stdout)["ok"]
    (snap / "README.md").write_text("changed")
    bad = runner.invoke(main, ["snapshot", "verify", str(snap)])
    assert bad.exit_code == 1 and "README.md: missing or changed" in bad.output
    imported = runner.invoke(main, ["--data-dir", str(tmp_path / "other"), "snapshot", "import", str(snap)])
    assert imported.exit_code != 0 and "verification failed" in imported.output
    scored.con = open_store(src / "grebench.duckdb").con  # the fixture closes it


def test_an_imported_scored_setup_is_found_by_name_and_never_the_default(scored: Store, tmp_path: Path) -> None:
    """A snapshot's scored setup (a hostile one says role 'main' and a future date) is kept for the record and
    named lookups, but the importing store's readers keep their own default setup."""
    from grebench.pipeline import scored_setups

    est, prep = scored.con.execute("SELECT estimator, preprocessor FROM scores LIMIT 1").fetchone()
    scored.con.execute("INSERT INTO scored_setups (estimator_spec, preprocessor_spec, estimator_id, preprocessor_id, "
                       "role, run_id, scored_at) VALUES ('offline', 'rules', ?, ?, 'main', 'r1', '2999-01-01')",
                       [est, prep])
    export_snapshot(scored, VENUE, tmp_path / "snap")
    fresh = open_store(tmp_path / "fresh" / "grebench.duckdb")
    import_snapshot(fresh, tmp_path / "snap")
    assert fresh.con.execute("SELECT role FROM scored_setups").fetchall() == [("snapshot",)]
    assert scored_setups(fresh) is None  # not the default: nothing was scored here
    named = scored_setups(fresh, est)
    assert named is not None and named.estimator_id == est
    fresh.close()


def test_line_attribution_travels_in_the_snapshot(scored: Store, tmp_path: Path) -> None:
    # the offline estimator is a fast proxy: the score stage attributed the scored pairs (attribution = auto), all
    # but those of reviews without a judgment line
    columns = "metric, estimator, preprocessor, candidate, paper_id, reference_review_id, line_no, line, contribution"
    rows = scored.rows(f"SELECT {columns} FROM line_attribution ORDER BY ALL")
    assert rows
    assert scored.scalar("""SELECT count(*) FROM (SELECT DISTINCT metric, estimator, preprocessor, candidate,
                                   paper_id, reference_review_id FROM line_attribution)""") \
        == scored.scalar("""SELECT count(*) FROM scores s JOIN generations g USING (generation_id)
                            JOIN judgments j ON j.text_sha256 = sha256(g.text) AND j.preprocessor = s.preprocessor
                            WHERE j.lines_json <> '[]'""")
    manifest = export_snapshot(scored, VENUE, tmp_path / "snap")
    assert manifest["files"]["line_attribution.parquet"]["rows"] == len(rows)
    fresh = open_store(tmp_path / "fresh" / "grebench.duckdb")
    report = import_snapshot(fresh, tmp_path / "snap")
    assert report["rows_added"]["line_attribution"] == len(rows)
    assert fresh.rows(f"SELECT {columns} FROM line_attribution ORDER BY ALL") == rows
    fresh.close()


def test_a_snapshot_carries_its_board_history(tmp_path: Path) -> None:
    """The venue-year's board versions (and the replay days) travel in the snapshot: after an import into a fresh
    data dir, ``leaderboard --as-of`` and ``--history`` read what the source store reads (issue 51; before, the
    import said "no board version was published yet")."""
    src, other = tmp_path / "src", tmp_path / "other"
    env = {**FAST_ENV, "GREBENCH_CONFIG": None, "GREBENCH_BOOTSTRAP_SAMPLES": "50"}

    def cli(data: Path, *args: str) -> object:
        result = CliRunner().invoke(main, ["--data-dir", str(data), *args], env=env)
        assert result.exit_code == 0, (args, result.output)
        return result

    store = open_store(src / "grebench.duckdb")
    with store.transaction():
        for paper in tiny_papers():
            store.upsert_paper(paper)
    store.con.execute("INSERT INTO replay_days (season, day, status, papers) VALUES ('season:x', '2019-11-08', "
                      "'done', 5)")
    store.close()
    for papers in ("2", "all"):  # two samples: two different boards, two versions
        for args in (["bench", "--papers", papers], ["score", "--papers", papers], ["site", "build"]):
            cli(src, *args)
    store = open_store(src / "grebench.duckdb", read_only=True)
    published = [r["published_at"] for r in store.rows("SELECT published_at FROM board_versions ORDER BY 1")]
    store.close()
    assert len(published) == 2
    between = (published[0] + (published[1] - published[0]) / 2).isoformat() + "Z"

    cli(src, "snapshot", "export", "--out", str(tmp_path / "snap"))
    manifest = json.loads((tmp_path / "snap" / "manifest.json").read_text())
    assert manifest["files"]["board_versions.parquet"]["rows"] == 2
    cli(other, "snapshot", "import", str(tmp_path / "snap"))

    for args in (["leaderboard", "--as-of", between], ["leaderboard", "--as-of", published[1].isoformat() + "Z"]):
        assert cli(other, *args).output == cli(src, *args).output  # type: ignore[attr-defined]
    mine = json.loads(cli(src, "leaderboard", "--history", "--json").stdout)  # type: ignore[attr-defined]
    theirs = json.loads(cli(other, "leaderboard", "--history", "--json").stdout)  # type: ignore[attr-defined]
    assert [p["origin"] for b in theirs["boards"] for p in b["points"]] == ["snapshot"] * 2
    for board in (*mine["boards"], *theirs["boards"]):
        for point in board["points"]:
            point.pop("origin")
    assert theirs == mine and len(mine["boards"][0]["points"]) == 2

    store = open_store(other / "grebench.duckdb", read_only=True)
    try:
        days = store.rows("SELECT season, status, papers FROM replay_days")
    finally:
        store.close()
    assert days == [{"season": "season:x", "status": "imported", "papers": 5}]  # not `done`: not replayed here

"""Hostile snapshots (issue 19): nothing read from a snapshot becomes SQL; links and tampering are refused; no
personal data leaves the store in snapshots or exports."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from grebench.cli._main import main
from grebench.store import Store, file_sha256, open_store
from grebench.store._snapshot import SnapshotError, export_snapshot, import_snapshot, verify_snapshot
from tests.store.test_snapshot import scored  # noqa: F401  (fixture)

VENUE = "Test.cc/2019/Conference"
EMAIL = "alice.submitter@example.org"


def _rehash(snap: Path) -> str:
    """What an attacker does after editing a member: recompute the manifest's hashes (the manifest is theirs)."""
    manifest = json.loads((snap / "manifest.json").read_text())
    for name, info in manifest["files"].items():
        path = snap / name
        if path.exists():
            info["sha256"] = file_sha256(path)
            info["rows"] = pq.ParquetFile(path).metadata.num_rows
    (snap / "manifest.json").write_text(json.dumps(manifest))
    return file_sha256(snap / "manifest.json")


def _abstracts(store: Store) -> list[str]:
    return sorted(r[0] or "" for r in store.con.execute("SELECT abstract FROM papers").fetchall())


@pytest.fixture
def snap(scored: Store, tmp_path: Path) -> Path:  # noqa: F811
    export_snapshot(scored, VENUE, tmp_path / "snap")
    return tmp_path / "snap"


def test_sql_in_a_member_file_name_is_refused_and_runs_nothing(snap: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    evil = "papers.parquet') UNION ALL SELECT 1; COPY (SELECT * FROM read_csv('/etc/passwd')) TO 'pwned.csv'; --"
    manifest = json.loads((snap / "manifest.json").read_text())
    manifest["files"][evil] = {**manifest["files"]["papers.parquet"]}
    (snap / "manifest.json").write_text(json.dumps(manifest))
    report = verify_snapshot(snap)
    assert not report["ok"] and any("not a snapshot member" in p for p in report["problems"])
    fresh = open_store(tmp_path / "fresh" / "grebench.duckdb")
    with pytest.raises(SnapshotError, match="not a snapshot member"):
        import_snapshot(fresh, snap)
    assert not (tmp_path / "pwned.csv").exists() and not list(tmp_path.glob("pwned*"))
    assert fresh.con.execute("SELECT count(*) FROM papers").fetchone() == (0,)


def test_a_member_named_for_another_table_is_refused(snap: Path, tmp_path: Path) -> None:
    manifest = json.loads((snap / "manifest.json").read_text())
    manifest["files"]["papers.parquet"]["table"] = "judges"  # file says papers, entry says judges
    (snap / "manifest.json").write_text(json.dumps(manifest))
    assert any("does not match its file name" in p for p in verify_snapshot(snap)["problems"])


def test_sql_in_a_parquet_column_name_is_refused(snap: Path, tmp_path: Path) -> None:
    """debates / panel_agreement have no primary key: their columns used to be pasted into SQL."""
    name = 'x") SELECT 1; DROP TABLE papers; --'
    for table in ("debates", "papers"):
        path = snap / f"{table}.parquet"
        data = pq.read_table(path)
        data = data.append_column(name, pa.array(["v"] * data.num_rows, type=pa.string()))
        pq.write_table(data, path)
    _rehash(snap)
    assert verify_snapshot(snap)["ok"]  # the files match the attacker's manifest
    fresh = open_store(tmp_path / "fresh" / "grebench.duckdb")
    with pytest.raises(SnapshotError, match="column"):
        import_snapshot(fresh, snap)
    assert fresh.con.execute("SELECT count(*) FROM papers").fetchone() == (0,)  # table there, nothing imported


def test_symlinked_members_are_refused(snap: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.parquet"
    os.replace(snap / "papers.parquet", outside)
    (snap / "papers.parquet").symlink_to(outside)
    _rehash(snap)
    report = verify_snapshot(snap)
    assert not report["ok"] and any("symbolic link" in p for p in report["problems"])
    with pytest.raises(SnapshotError, match="symbolic link"):
        import_snapshot(open_store(tmp_path / "fresh" / "grebench.duckdb"), snap)


def test_published_manifest_hash_anchors_import(scored: Store, snap: Path, tmp_path: Path) -> None:  # noqa: F811
    published = file_sha256(snap / "manifest.json")
    runner = CliRunner()
    data = tmp_path / "fresh"
    # tamper: every abstract replaced, the manifest re-hashed so that plain verification passes
    papers = pq.read_table(snap / "papers.parquet")
    papers = papers.set_column(papers.column_names.index("abstract"), "abstract",
                               pa.array(["pwned"] * papers.num_rows, type=pa.string()))
    pq.write_table(papers, snap / "papers.parquet")
    _rehash(snap)
    refused = runner.invoke(main, ["snapshot", "import", str(snap), "--manifest-sha256", published,
                                   "--data-dir", str(data)])
    assert refused.exit_code != 0 and "differs from the published one" in refused.output
    store = open_store(data / "grebench.duckdb")
    assert store.con.execute("SELECT count(*) FROM papers").fetchone() == (0,)
    store.close()
    # without an anchor it imports, and says loudly that authenticity was not checked
    loose = runner.invoke(main, ["snapshot", "import", str(snap), "--data-dir", str(data)])
    assert loose.exit_code == 0 and "authenticity NOT checked" in loose.output


def test_anchored_import_of_the_real_snapshot_says_authenticated(snap: Path, tmp_path: Path) -> None:
    published = file_sha256(snap / "manifest.json")
    out = CliRunner().invoke(main, ["snapshot", "import", str(snap), "--manifest-sha256", published,
                                    "--data-dir", str(tmp_path / "fresh"), "--json"])
    assert out.exit_code == 0, out.output
    assert "authenticity NOT checked" not in out.output
    assert json.loads(out.stdout)["authenticated"] is True


def test_no_contact_address_in_exports_or_snapshots(scored: Store, tmp_path: Path) -> None:  # noqa: F811
    scored.con.execute("UPDATE candidates SET submitter = ? WHERE name = (SELECT min(name) FROM candidates)", [EMAIL])
    export_snapshot(scored, VENUE, tmp_path / "snap")
    scored.export_parquet(tmp_path / "export")
    files = list((tmp_path / "snap").iterdir()) + list((tmp_path / "export").iterdir())
    assert any(f.name == "candidates.parquet" for f in files)
    for f in files:
        assert EMAIL.encode() not in f.read_bytes(), f
    hashed = pq.read_table(tmp_path / "export" / "candidates.parquet").column("submitter").to_pylist()
    assert any(isinstance(h, str) and len(h) == 16 for h in hashed)  # recognisable, not readable
    assert scored.con.execute("SELECT count(*) FROM candidates WHERE submitter = ?", [EMAIL]).fetchone() == (1,)

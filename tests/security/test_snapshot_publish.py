"""What a snapshot publishes and how it is anchored (issue 19): no contact address in any published file, the
Downloads page's manifest hash anchors an import, a wrong anchor reads nothing, a file swapped after verification
is refused, and snapshot requests written while the service runs are never dropped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import date, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from bs4 import BeautifulSoup
from click.testing import CliRunner

import grebench.store
from grebench.cli._main import main
from grebench.pipeline import SnapshotStage, StageContext
from grebench.settings import Settings, load_settings
from grebench.site import build_site
from grebench.store import Store, file_sha256, open_store
from grebench.store import _snapshot as snapshot_module
from grebench.store._snapshot import SnapshotError, export_snapshot, import_snapshot, verify_snapshot
from tests.conftest import FAST_ENV
from tests.store.test_snapshot import scored  # noqa: F401  (fixture)

VENUE = "Test.cc/2019/Conference"
SLUG = "Test-cc-2019-Conference"
EMAIL = "Carol.Submitter+gre@example.org"


def _settings(tmp_path: Path) -> Settings:
    return load_settings(env={**FAST_ENV, "GREBENCH_DATA_DIR": str(tmp_path / "src")})


def _cli(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def test_contact_email_of_a_submission_is_in_no_published_file(scored: Store, tmp_path: Path) -> None:  # noqa: F811
    """A store with an accepted submission (contact an e-mail): `grebench export`, `snapshot export` and the site
    carry no byte of the address, in either case; the private store keeps it."""
    settings = _settings(tmp_path)
    name = scored.scalar("SELECT min(name) FROM candidates WHERE kind = 'llm'") or scored.scalar(
        "SELECT min(name) FROM candidates")
    now = datetime(2019, 5, 1)
    scored.con.execute("INSERT INTO submissions VALUES (?, ?, ?, ?, ?, NULL, NULL, '{}', 'k', NULL, ?, 'finished', "
                       "NULL, NULL, ?, ?)", ["sub1", EMAIL.lower(), EMAIL, name, "openai/x", date(2019, 1, 1), now,
                                             now])
    scored.con.execute("UPDATE candidates SET submitter = ? WHERE name = ?", [EMAIL.lower(), name])
    scored.close()

    data = str(tmp_path / "src")
    exported = _cli("export", "--data-dir", data)
    assert exported.exit_code == 0, exported.output
    cut = _cli("snapshot", "export", "--venue-year", SLUG, "--data-dir", data)
    assert cut.exit_code == 0, cut.output
    store = open_store(settings.db_path)
    try:
        build_site(store, settings, tmp_path / "site")
    finally:
        store.close()

    outputs = [p for root in (settings.data_path / "export", settings.data_path / "snapshots", tmp_path / "site")
               for p in root.rglob("*") if p.is_file()]
    names = {p.name for p in outputs}
    assert {"submissions.parquet", "candidates.parquet", "index.html"} <= names
    for path in outputs:
        blob = path.read_bytes().lower()
        assert EMAIL.lower().encode() not in blob, path
        assert b"example.org" not in blob, path
    store = open_store(settings.db_path)
    try:
        assert store.scalar("SELECT contact FROM submissions WHERE id = 'sub1'") == EMAIL  # kept privately
        salt = store.salt()
    finally:
        store.close()
    assert not any(salt.encode() in p.read_bytes() for p in outputs)  # the salt itself is never published
    hashed = pq.read_table(settings.data_path / "export" / "submissions.parquet").to_pylist()[0]
    assert len(hashed["contact"]) == 16 and hashed["contact"] != EMAIL


def test_the_downloads_page_hash_anchors_the_import(scored: Store, tmp_path: Path) -> None:  # noqa: F811
    settings = _settings(tmp_path)
    export_snapshot(scored, VENUE, settings.data_path / "snapshots" / SLUG)
    build_site(scored, settings, tmp_path / "site")
    page = BeautifulSoup((tmp_path / "site" / "downloads.html").read_text(encoding="utf-8"), "html.parser")
    section = page.select_one(f"section.snapshot#snapshot-{SLUG}")
    assert section is not None, "the Downloads page lists each snapshot with its manifest hash"
    code = section.select_one("code.manifest-sha256")
    assert code is not None
    published = code.get_text(strip=True)
    assert published == file_sha256(settings.data_path / "snapshots" / SLUG / "manifest.json")
    command = section.select_one("code.import-command")
    assert command is not None
    assert command.get_text(strip=True) == f"grebench snapshot import --manifest-sha256 {published} {SLUG}"
    out = _cli("snapshot", "import", str(settings.data_path / "snapshots" / SLUG), "--manifest-sha256", published,
               "--data-dir", str(tmp_path / "fresh"), "--json")
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["authenticated"] is True


def test_a_wrong_anchor_is_refused_before_anything_else_is_read(scored: Store, tmp_path: Path,  # noqa: F811
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    export_snapshot(scored, VENUE, tmp_path / "snap")
    published = file_sha256(tmp_path / "snap" / "manifest.json")
    (tmp_path / "snap" / "manifest.json").write_text('{"format": broken json')

    def member(*_args: object) -> None:
        raise AssertionError("a member of an unpublished snapshot was looked at")

    monkeypatch.setattr(snapshot_module, "_member", member)
    report = verify_snapshot(tmp_path / "snap", published)
    # hashed before it is parsed: the answer is "not the published one", not a JSON error, and no member is read
    assert not report["ok"] and report["problems"] == [
        "manifest.json: SHA-256 differs from the published one (not the published snapshot)"]
    fresh = open_store(tmp_path / "fresh" / "grebench.duckdb")
    with pytest.raises(SnapshotError, match="differs from the published one"):
        import_snapshot(fresh, tmp_path / "snap", published)
    assert fresh.scalar("SELECT count(*) FROM papers") == 0
    assert "64 hexadecimal" in verify_snapshot(tmp_path / "snap", "abc; DROP TABLE papers")["problems"][0]


def test_a_member_swapped_after_verification_is_refused(scored: Store, tmp_path: Path,  # noqa: F811
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Verify, then import reads the file again: a swap in between (a race) must not land in the store."""
    export_snapshot(scored, VENUE, tmp_path / "snap")
    real_verify = snapshot_module.verify_snapshot

    def verify_then_swap(snapshot_dir: Path, manifest_sha256: str | None = None) -> dict[str, Any]:
        report = real_verify(snapshot_dir, manifest_sha256)
        papers = pq.read_table(tmp_path / "snap" / "papers.parquet")
        papers = papers.set_column(papers.column_names.index("abstract"), "abstract",
                                   pa.array(["swapped"] * papers.num_rows, type=pa.string()))
        pq.write_table(papers, tmp_path / "snap" / "papers.parquet")
        return report

    monkeypatch.setattr(snapshot_module, "verify_snapshot", verify_then_swap)
    fresh = open_store(tmp_path / "fresh" / "grebench.duckdb")
    with pytest.raises(SnapshotError, match="changed while it was being imported"):
        import_snapshot(fresh, tmp_path / "snap")
    assert fresh.scalar("SELECT count(*) FROM papers") == 0


def test_unanchored_import_says_so_in_json_with_how_to_anchor(scored: Store, tmp_path: Path) -> None:  # noqa: F811
    export_snapshot(scored, VENUE, tmp_path / "snap")
    out = _cli("snapshot", "import", str(tmp_path / "snap"), "--data-dir", str(tmp_path / "fresh"), "--json")
    assert out.exit_code == 0, out.output
    report = json.loads(out.stdout)
    assert report["authenticated"] is False
    assert "authenticity NOT checked" in report["warning"] and "--manifest-sha256" in report["warning"]
    assert report["manifest_sha256"] == file_sha256(tmp_path / "snap" / "manifest.json")
    assert "authenticity NOT checked" in out.stderr


def _request_while_held(data: Path, venue: str) -> None:
    """`grebench snapshot export --venue-year` from another process while this one holds the store (as serve)."""
    held = subprocess.run([sys.executable, "-m", "grebench.cli", "snapshot", "export", "--venue-year", venue,
                           "--data-dir", str(data)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **FAST_ENV})
    assert held.returncode == 0 and "requested" in held.stderr, held.stderr


def test_a_request_written_while_the_snapshot_job_runs_is_kept(scored: Store, tmp_path: Path,  # noqa: F811
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _settings(tmp_path)
    _request_while_held(settings.data_path, SLUG)
    real_export = grebench.store.export_snapshot
    calls: list[str] = []

    def export_and_request(store: Store, venue: str, out_dir: Path, **kw: Any) -> dict[str, Any]:
        calls.append(venue)
        if len(calls) == 1:  # a user asks for another snapshot while the job is cutting the first one
            _request_while_held(settings.data_path, "NoSuch-2031")
        return real_export(store, venue, out_dir, **kw)

    monkeypatch.setattr(grebench.store._schedule, "export_snapshot", export_and_request)
    first = SnapshotStage(today=date(2019, 6, 1)).run(StageContext(scored, settings, "run-1"))
    assert [c["reason"] for c in first["cut"]] == ["on-demand"]
    assert json.loads(settings.snapshot_requests_path.read_text()) == ["NoSuch-2031"]  # not deleted unread
    SnapshotStage(today=date(2019, 6, 1)).run(StageContext(scored, settings, "run-2"))
    failures = scored.rows("SELECT item, reason FROM run_failures WHERE run_id = 'run-2'")
    assert [f["item"] for f in failures] == ["NoSuch-2031"] and "no venue-year" in failures[0]["reason"]
    assert not settings.snapshot_requests_path.exists()
    assert not list(settings.data_path.glob("snapshot-requests.json.*"))  # every claim settled


def test_an_unreadable_request_file_is_kept_and_recorded(scored: Store, tmp_path: Path) -> None:  # noqa: F811
    settings = _settings(tmp_path)
    settings.snapshot_requests_path.write_text('["ICLR-2020", ', encoding="utf-8")
    SnapshotStage(today=date(2019, 6, 1)).run(StageContext(scored, settings, "run-1"))
    failures = scored.rows("SELECT stage, reason FROM run_failures WHERE run_id = 'run-1'")
    assert [f["stage"] for f in failures] == ["snapshot"]
    assert "unreadable snapshot request file" in failures[0]["reason"]
    kept = list(settings.data_path.glob("snapshot-requests.json.bad-*"))
    assert len(kept) == 1 and kept[0].read_text(encoding="utf-8") == '["ICLR-2020", '
    assert not settings.snapshot_requests_path.exists()
    # the next cycle does not record it again
    SnapshotStage(today=date(2019, 6, 1)).run(StageContext(scored, settings, "run-2"))
    assert scored.scalar("SELECT count(*) FROM run_failures WHERE run_id = 'run-2'") == 0

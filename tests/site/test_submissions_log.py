"""The submissions log where it shows (issue 63 §2): the site's submissions.html (linked from every page), "best of
N" beside a submitted model on the board (site, app, leaderboard.json, `grebench leaderboard --json`), the app's
Submissions tab, and every snapshot, which still verifies; no key, endpoint URL or e-mail address in any of them."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from bs4 import BeautifulSoup
from click.testing import CliRunner

from grebench.cli._main import main
from grebench.endpoints import KeyVault
from grebench.site import _data, build_site
from grebench.site._app import log_rows
from grebench.site._app_board import cell
from grebench.site._reader import build_reader
from grebench.store import open_store, utcnow
from grebench.submissions import SubmissionForm, SubmissionQueue, submission_log, sync_log, withdraw_submission
from tests.site.conftest import filled_file_store

CANARY = "sk-CANARY-91d2e3f4a5b6"
URL = "https://api.model.example/v1/hidden-path"
RESOLVER = {"private.example": ["192.168.1.20"]}
SECRETS = (CANARY, "api.model.example", "private.example", "hidden-path", "dave@example.org", "example.org")
SUBMITTED = ("good-llm", "late-llm")
VENUE = "ICLR.cc/2020/Conference"


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    real = socket.socket.connect

    def loopback_only(sock: socket.socket, address: Any) -> Any:
        if not (isinstance(address, tuple) and address[0] in ("127.0.0.1", "::1")):
            raise AssertionError(f"outbound connection to {address}")
        return real(sock, address)

    monkeypatch.setattr(socket.socket, "connect", loopback_only)
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: pytest.fail("no DNS lookup"))


def _no_secret(text: str, where: str) -> None:
    for secret in SECRETS:
        assert secret.lower() not in text.lower(), (secret, where)


def _scan(root: Path) -> int:
    """Every file under ``root`` (Parquet decoded too: a compressed page could hide a string) is free of secrets."""
    scanned = 0
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        raw = path.read_bytes()
        for secret in SECRETS:
            assert secret.encode() not in raw, (secret, path)
        if path.suffix == ".parquet":
            _no_secret(json.dumps(pq.read_table(path).to_pylist(), default=str), str(path))
        elif path.suffix in (".html", ".json", ".md", ".svg"):
            _no_secret(raw.decode("utf-8"), str(path))
        scanned += 1
    return scanned


def _fill(tmp_path: Path) -> tuple[Any, dict[str, str]]:
    """Two scored submissions of one submitter (the second then withdrawn), one refused try of theirs (a private
    endpoint, a key given), one refused try by an e-mail contact; the site built.  Returns (settings, ids)."""
    ids: dict[str, str] = {}
    with filled_file_store(tmp_path / "data") as (store, settings):
        now = utcnow()
        for i, name in enumerate(SUBMITTED):
            store.con.execute("UPDATE candidates SET kind = 'submitted', submitter = 'carol-lab', api_base = ? "
                              "WHERE name = ?", [URL, name])
            store.con.execute(
                "INSERT INTO submissions (id, submitter, contact, model_name, model_string, base_url, normalised_url, "
                "params_json, dedup_key, cutoff, status, created_at, updated_at) VALUES (?, 'carol-lab', 'Carol-Lab', "
                "?, 'openai/x', ?, ?, '{}', ?, DATE '2019-01-01', 'finished', ?, ?)",
                [f"sub{i}", name, URL, URL, f"k{i}", now, now])
            ids[name] = f"sub{i}"
        queue = SubmissionQueue(settings.queue_path)
        vault = KeyVault(env={})
        refused = queue.submit(SubmissionForm(model_name="Carol v3", base_url="https://private.example/v1",
                                              cutoff="2024-01-01", contact="Carol-Lab", api_key=CANARY),
                               settings, vault, RESOLVER)
        invalid = queue.submit(SubmissionForm(model_name="Dave 1", model_string="openai/dave", cutoff="someday",
                                              contact="dave@example.org", api_key=CANARY), settings, vault, RESOLVER)
        assert not (refused["ok"] or invalid["ok"])
        sync_log(store, queue)
        withdraw_submission(store, queue, vault, "sub1", "asked to be withdrawn")
        build_site(store, settings)
    return settings, ids


def test_the_log_page_the_board_and_the_json_show_every_try_and_best_of_n(tmp_path: Path) -> None:
    settings, ids = _fill(tmp_path)
    site = settings.site_path
    assert _scan(site) > 5
    index = BeautifulSoup((site / "index.html").read_text(encoding="utf-8"), "html.parser")
    assert index.select_one("nav a[href='submissions.html']") is not None
    assert index.select_one("footer a[href='submissions.html']") is not None

    page = BeautifulSoup((site / "submissions.html").read_text(encoding="utf-8"), "html.parser")
    rows = {tr["data-id"]: tr for tr in page.select("tr[data-id]")}
    assert len(rows) == 4
    assert rows[ids["good-llm"]]["data-status"] == "scored"
    assert rows[ids["late-llm"]]["data-status"] == "withdrawn"  # withdrawn, still listed, scores kept
    assert "ICLR 2020" in rows[ids["late-llm"]].get_text()
    refused = {i: tr for i, tr in rows.items() if tr["data-status"] == "refused"}
    classes = sorted(tr.select("td")[5].get_text(strip=True) for tr in refused.values())
    assert classes == ["invalid-form", "unreachable-endpoint"]
    # one submitter's variants grouped: carol-lab has the two scored models and the refused try
    carol = page.select_one("section[data-submitter='carol-lab']")
    assert carol is not None and len(carol.select("tr[data-id]")) == 3
    assert "3 submissions, 2 scored" in carol.get_text()
    dave = [s for s in page.select("section.submitter") if s["data-submitter"].startswith("anon-")]
    assert len(dave) == 1 and "Dave 1" in dave[0].get_text()

    board = next(site.glob("boards/*.html"))
    soup = BeautifulSoup(board.read_text(encoding="utf-8"), "html.parser")
    for name in SUBMITTED:
        row = soup.select_one(f"table.contestants tr[data-candidate='{name}']")
        assert row is not None and "best of 2" in row.get_text(), name
    human = soup.select_one("tr[data-candidate='human']")
    assert human is not None and "best of" not in human.get_text()
    payload = json.loads((site / "leaderboard.json").read_text(encoding="utf-8"))
    variants = {r["candidate"]: r["variants_scored"] for b in payload["boards"] for r in b["rows"]}
    assert variants["good-llm"] == 2 and variants["late-llm"] == 2 and variants["human"] is None

    env = {"GREBENCH_DATA_DIR": str(settings.data_path)}
    shown = CliRunner().invoke(main, ["leaderboard", "--json"], env=env)
    assert shown.exit_code == 0, shown.output
    rows_json = {r["candidate"]: r for r in json.loads(shown.stdout)["rows"]}
    assert rows_json["good-llm"]["variants_scored"] == 2 and rows_json["generic"]["variants_scored"] is None
    logged = CliRunner().invoke(main, ["submissions", "log", "--json"], env=env)
    assert logged.exit_code == 0, logged.output
    _no_secret(logged.stdout, "submissions log --json")
    entries = {e["id"]: e for e in json.loads(logged.stdout)}
    assert entries[ids["good-llm"]]["variants_scored"] == 2 and entries[ids["good-llm"]]["scores"]


def test_the_app_tab_reads_the_log_from_the_export(tmp_path: Path) -> None:
    settings, ids = _fill(tmp_path)
    store = open_store(settings.db_path)
    try:
        store.export_parquet(settings.export_path)
    finally:
        store.close()
    assert _scan(settings.export_path) > 5  # the export the app reads: no URL, key or address either
    reader = build_reader(settings.export_path)
    try:
        rows = log_rows(reader)
        boards = _data.boards(reader)
    finally:
        reader.con.close()
    by_id = {r[2]: r for r in rows}
    assert by_id[ids["late-llm"]][5] == "withdrawn" and by_id[ids["good-llm"]][5] == "scored"
    assert by_id[ids["good-llm"]][0] == "carol-lab" and by_id[ids["good-llm"]][8] == 2
    _no_secret(json.dumps(rows, default=str), "app log rows")
    cells = {r["candidate"]: cell(r, "candidate") for b in boards for r in b["rows"]}
    assert cells["good-llm"] == "good-llm (best of 2)" and cells["human"] == "human"


def test_a_snapshot_carries_the_log_and_still_verifies(tmp_path: Path) -> None:
    settings, ids = _fill(tmp_path)
    env = {"GREBENCH_DATA_DIR": str(settings.data_path)}
    out = tmp_path / "snap"
    cut = CliRunner().invoke(main, ["snapshot", "export", "--venue-year", VENUE, "--out", str(out), "--json"],
                             env=env)
    assert cut.exit_code == 0, cut.output
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert "submission_log.parquet" in manifest["files"] and "submissions.parquet" not in manifest["files"]
    verified = CliRunner().invoke(main, ["snapshot", "verify", str(out), "--json"], env=env)
    assert verified.exit_code == 0, verified.output
    assert _scan(out) > 5
    log = {r["id"]: r for r in pq.read_table(out / "submission_log.parquet").to_pylist()}
    assert len(log) == 4
    assert (log[ids["good-llm"]]["status"], log[ids["late-llm"]]["status"]) == ("scored", "withdrawn")
    assert sorted(r["reason_class"] for r in log.values() if r["status"] == "refused") == [
        "invalid-form", "unreachable-endpoint"]
    # a store that imports the snapshot shows the same log
    imported = CliRunner().invoke(main, ["snapshot", "import", str(out), "--data-dir", str(tmp_path / "other")])
    assert imported.exit_code == 0, imported.output
    other = open_store(tmp_path / "other" / "grebench.duckdb", read_only=True)
    try:
        again = {e["id"]: e for e in submission_log(other)}
    finally:
        other.con.close()
    assert {i: e["status"] for i, e in again.items()} == {i: r["status"] for i, r in log.items()}
    assert again[ids["good-llm"]]["submitter"] == "carol-lab"

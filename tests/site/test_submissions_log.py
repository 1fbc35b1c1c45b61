"""The submissions log where it shows (issue 63 §2): the site's submissions.html (linked from every page), "best of
N" beside a submitted model on the board (site, app, leaderboard.json, `grebench leaderboard --json`), the app's
Submissions tab, and every snapshot, which still verifies; no key, endpoint URL or e-mail address in any of them.
The same page shows the approval of each submitted model's declared cutoff (issue 62): its state, the sealed-gap and
information shift tests with their p, and a hold's evidence."""

from __future__ import annotations

import json
import random
import re
import socket
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from bs4 import BeautifulSoup
from click.testing import CliRunner

from grebench.cli._main import main
from grebench.endpoints import KeyVault
from grebench.scoring import GAP_MIN_PAPERS, sealed_gap
from grebench.settings import load_settings
from grebench.site import _data, build_site
from grebench.site._app import log_rows
from grebench.site._app_board import cell
from grebench.site._reader import build_reader
from grebench.store import open_store, utcnow
from grebench.submissions import (
    SubmissionError,
    SubmissionForm,
    SubmissionQueue,
    approve_submission,
    submission_log,
    sync_log,
    withdraw_submission,
)
from tests.conftest import FAST_ENV
from tests.site.conftest import filled_file_store
from tests.submissions.test_sealed_gap import _honest_scores, _score, _submit

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


# -- the approval of declared cutoffs (issue 62) ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def approvals(tmp_path_factory: pytest.TempPathFactory) -> tuple[BeautifulSoup, dict[str, Any]]:
    """Four submitted models, the site built: ``Copier`` (its information on its public papers twice its level on its
    sealed ones: approval refused, held), ``Honest`` (the same level on both: approved), ``Strong`` (held, then
    approved over the sealed-gap test with a reason) and ``Early`` (only its public papers scored: approval waits).
    Returns the approvals section and the copier's sealed-gap test as the store computes it."""
    root = tmp_path_factory.mktemp("approvals")
    settings = load_settings(env={**FAST_ENV, "GREBENCH_DATA_DIR": str(root / "data")})
    store = open_store(None)
    try:
        ids = _submit(store, settings, ("Copier", "Honest", "Strong", "Early"))
        rng = random.Random(21)
        values = _honest_scores(store, rng)
        sealed = {f"paper{i:02d}" for i in range(0, 24, 2)}
        for pid, vals in values.items():
            middle = sorted(vals)[1]
            _score(store, "Copier", pid, (0.5 if pid in sealed else 1.05) * middle, sealed=pid in sealed)
            _score(store, "Honest", pid, 0.6 * middle * rng.uniform(0.9, 1.1), sealed=pid in sealed)
            _score(store, "Strong", pid, (0.6 if pid in sealed else 1.0) * max(vals), sealed=pid in sealed)
            if pid not in sealed:
                _score(store, "Early", pid, 0.6 * middle, sealed=False)
        approve_submission(store, ids["Honest"], settings=settings)
        for name in ("Copier", "Strong"):
            with pytest.raises(SubmissionError, match="sealed-gap test"):
                approve_submission(store, ids[name], settings=settings)
        approve_submission(store, ids["Strong"], settings=settings, override="the public papers are the easier half")
        with pytest.raises(SubmissionError, match="waits for sealed evidence"):
            approve_submission(store, ids["Early"], settings=settings)
        copier = sealed_gap(store, "Copier")
        # one of Early's reviews carried a nearby paper's public reviews (the near-paper copy check unsealed it)
        store.con.execute("UPDATE generations SET flags_json = ? WHERE candidate = 'Early' AND paper_id = 'paper01'",
                          ['{"near_copy": {"estimator": "offline", "statistic": 3.1, "evidence": "..."}}'])
        build_site(store, settings, root / "site")
    finally:
        store.con.close()
    html = (root / "site" / "submissions.html").read_text(encoding="utf-8")
    for secret in ("api.model.example", "example.org", "sk-test-key"):
        assert secret not in html, secret
    page = BeautifulSoup(html, "html.parser")
    heading = page.select_one("h2#approvals")
    assert heading is not None and heading.get_text(strip=True) == "Approval of declared cutoffs"
    return page, {"copier": copier, "sealed": sealed}


def _approval(page: BeautifulSoup, name: str) -> dict[str, str]:
    """The approvals table's row of ``name``: its state (``data-state``) and each cell's text by its header."""
    table = page.select_one("#approvals ~ div.table-wrap > table.approvals")
    assert table is not None, "the approvals table, in a scrolling wrapper"
    row = table.select_one(f"tr[data-candidate='{name}']")
    assert row is not None, name
    heads = [th.get_text(strip=True) for th in table.select("thead th")]
    cells = {h: " ".join(td.get_text().split()) for h, td in zip(heads, row.select("td"), strict=True)}
    return {"data-state": str(row["data-state"]), **cells}


def test_a_held_model_shows_the_sealed_gap_test_with_its_p_and_the_papers_carrying_the_excess(
        approvals: tuple[BeautifulSoup, dict[str, Any]]) -> None:
    page, facts = approvals
    gap = facts["copier"]
    assert gap is not None and gap.held and gap.excess_papers, gap
    row = _approval(page, "Copier")
    assert row["data-state"] == "held" and row["State"] == "held", row
    assert row["Declared cutoff"] == "2000-01-01"
    test = row["Sealed-gap test"]
    assert test.startswith("sealed-gap test (offline / rules): on its 12 papers whose reviews were public"), test
    assert re.search(r"one-sided p (<|=) 0\.0\d+", test), test  # its p, below the test's alpha
    assert test == gap.describe()
    assert row["Information shift test"].startswith("information shift test (offline / rules): 24 papers")
    assert "one-sided p" in row["Information shift test"]
    # the hold's evidence (its audit line) names papers that carry the excess: public ones, never a sealed one
    evidence = row["Evidence of the hold"]
    assert "approval of submission" in evidence and "refused, held for the operator" in evidence, evidence
    named = set(re.findall(r"paper\d\d", evidence.split("the excess on")[1]))
    assert gap.excess_papers[0] in named and not named & facts["sealed"], (named, evidence)


def test_an_approved_model_shows_approved_and_an_override_shows_its_reason(
        approvals: tuple[BeautifulSoup, dict[str, Any]]) -> None:
    page, _ = approvals
    honest = _approval(page, "Honest")
    assert honest["data-state"] == "approved" and honest["State"] == "approved", honest
    assert "one-sided p" in honest["Sealed-gap test"] and honest["Evidence of the hold"] == "—"
    strong = _approval(page, "Strong")
    assert strong["data-state"] == "approved over evidence", strong
    assert strong["State"] == ("approved over evidence: overriding: sealed-gap test; reason: the public papers are "
                               "the easier half"), strong
    assert strong["Evidence of the hold"] == "—"


def test_a_model_with_too_few_sealed_papers_scored_waits_for_sealed_evidence(
        approvals: tuple[BeautifulSoup, dict[str, Any]]) -> None:
    page, _ = approvals
    row = _approval(page, "Early")
    assert row["data-state"] == "waiting for sealed evidence", row
    assert row["State"] == (f"waiting for sealed evidence: 0 sealed and 12 public papers scored, {GAP_MIN_PAPERS} of "
                            "each needed 1 review unsealed by the near-paper copy check (they carry a nearby paper's "
                            "public reviews: counted only once approved)"), row
    assert "near-paper" not in _approval(page, "Honest")["State"]
    assert "not yet testable" in row["Sealed-gap test"] and row["Evidence of the hold"] == "—"
    assert "one-sided p" in row["Information shift test"]

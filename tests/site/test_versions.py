"""Board versions: every publish keeps a dated, immutable version; a change between two is explained; `--as-of`."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from bs4 import BeautifulSoup
from click.testing import CliRunner

from grebench.cli._main import main
from grebench.scoring import compute_boards
from grebench.settings import Settings
from grebench.site import build_site, changes_text, version_changes, versions
from grebench.store import Store, open_store
from tests.site.conftest import NOW, filled_file_store

VENUE = "ICLR.cc/2020/Conference"
NEW_PAPER = "p2020_3"
EDITED = "p2020_1_r0"


def _score(con: Any, name: str, pid: str, refs: list[str], pmi: float) -> None:
    gid = f"g_{name}_{pid}"
    con.execute("INSERT INTO generations (generation_id, candidate, paper_id, prompt_version, params_json, status, "
                "text, generated_at, sealed) VALUES (?, ?, ?, 'v1', '{}', 'ok', ?, ?, false)",
                [gid, name, pid, f"{name} review of {pid}", NOW])
    for k, rid in enumerate(refs):
        con.execute("INSERT INTO scores VALUES ('gem-s', 'offline', 'rules', 'p1', ?, ?, ?, ?, ?, -10.0, ?, 10, ?)",
                    [name, pid, rid, gid, -10.0 + pmi + 0.01 * k, pmi + 0.01 * k, NOW])


def change_the_season(store: Store, settings: Settings) -> None:
    """Between two publishes: a paper enters (its reviews public, good-llm excellent on it), a reference review is
    edited, a new candidate is scored; the boards are recomputed (the scoring stage's last step)."""
    con = store.con
    con.execute("INSERT INTO papers (paper_id, venue_id, venue, venue_year, title, abstract, source, "
                "reviews_public_at, content_sha256, ingested_at, updated_at) VALUES (?, ?, 'ICLR 2020', 2020, "
                "'A new paper', 'Abstract.', 'test', ?, 'x', ?, ?)",
                [NEW_PAPER, VENUE, datetime(2019, 11, 5), NOW, NOW])
    refs = [f"{NEW_PAPER}_r{j}" for j in range(2)]
    for j, rid in enumerate(refs):
        con.execute("INSERT INTO reviews VALUES (?, ?, 'official_review', ?, ?, ?, 1)",
                    [rid, NEW_PAPER, f"Reviewer{j}", datetime(2019, 11, 5), NOW])
        con.execute("INSERT INTO review_versions (review_id, version, content_sha256, rating, text, sections_json, "
                    "content_json, fetched_at) VALUES (?, 1, 'h', '6', 'A review.', '[]', '{}', ?)", [rid, NOW])
    for name, pmi in (("human", 3.0), ("generic", 0.5), ("good-llm", 30.0), ("late-llm", 4.0)):
        _score(con, name, NEW_PAPER, refs, pmi)
    con.execute("INSERT INTO review_versions (review_id, version, content_sha256, rating, text, sections_json, "
                "content_json, fetched_at) VALUES (?, 2, 'h2', '3', 'Edited: a weaker paper.', '[]', '{}', ?)",
                [EDITED, NOW])
    con.execute("UPDATE reviews SET latest_version = 2 WHERE review_id = ?", [EDITED])
    con.execute("INSERT INTO candidates (name, kind, model, cutoff, params_json, description, updated_at) "
                "VALUES ('new-llm', 'llm', 'openai/y', DATE '2019-01-01', '{}', 'a new one', ?)", [NOW])
    for i in range(4):
        pid = f"p2020_{i}"
        _score(con, "new-llm", pid, [r[0] for r in con.execute(
            "SELECT review_id FROM reviews WHERE paper_id = ? ORDER BY review_id", [pid]).fetchall()], 1.0)
    compute_boards(store, settings)


@pytest.fixture
def two_versions(tmp_path: Path) -> dict[str, Any]:
    """A file store published twice with the change in between; the first version's files as first published."""
    with filled_file_store(tmp_path / "data") as (store, settings):
        build_site(store, settings)
        first = {p.relative_to(settings.site_path): p.read_bytes()
                 for p in (settings.site_path / "versions").rglob("*") if p.is_file() and p.parent.name != "versions"}
        change_the_season(store, settings)
        summary = build_site(store, settings)
        listed = versions(store)
    return {"settings": settings, "site": settings.site_path, "first": first, "summary": summary, "ids":
            [v["version_id"] for v in reversed(listed)], "listed": listed}


def test_two_publishes_keep_two_versions_and_the_first_unchanged(two_versions: dict[str, Any]) -> None:
    site, (v1, v2) = two_versions["site"], two_versions["ids"]
    assert two_versions["summary"]["version"] == v2 and two_versions["summary"]["versions"] == 2
    assert {p.parts[1] for p in two_versions["first"]} == {v1}
    for rel, blob in two_versions["first"].items():  # the refresh rewrote the site: the old version's bytes stay
        assert (site / rel).read_bytes() == blob, rel
    latest = json.loads((site / "leaderboard.json").read_text(encoding="utf-8"))
    assert (site / "leaderboard.json").read_bytes() == (site / "versions" / v2 / "leaderboard.json").read_bytes()
    assert latest["version"]["id"] == v2 and latest["version"]["previous"]["id"] == v1
    assert (site / latest["version"]["previous"]["href"]).read_bytes() == two_versions["first"][
        Path("versions") / v1 / "leaderboard.json"]
    old = json.loads((site / "versions" / v1 / "leaderboard.json").read_text(encoding="utf-8"))
    assert old["version"]["id"] == v1 and old["version"]["previous"] is None
    old_rows = {r["candidate"] for b in old["boards"] for r in b["rows"]}
    assert "new-llm" not in old_rows and "new-llm" in {r["candidate"] for b in latest["boards"] for r in b["rows"]}
    # the listing and the downloads page link every version; the version page links the one before
    listing = BeautifulSoup((site / "versions" / "index.html").read_text(encoding="utf-8"), "html.parser")
    assert [tr["data-version"] for tr in listing.select("tr[data-version]")] == [v2, v1]
    page = BeautifulSoup((site / "versions" / v2 / "index.html").read_text(encoding="utf-8"), "html.parser")
    prev = page.select_one("a.previous-version")
    assert prev is not None and (site / "versions" / v2 / str(prev["href"])).resolve() == \
        (site / "versions" / v1 / "index.html").resolve()
    assert NEW_PAPER in page.select_one("li.papers-entered").get_text()
    index = BeautifulSoup((site / "index.html").read_text(encoding="utf-8"), "html.parser").select_one(
        "p.board-version")
    assert index is not None and [a["href"] for a in index.select("a")] == [f"versions/{v2}/index.html",
                                                                            "versions/index.html"]
    downloads = (site / "downloads.html").read_text(encoding="utf-8")
    assert f"versions/{v2}/leaderboard.json" in downloads and "versions/index.html" in downloads


def test_the_change_names_entered_papers_edited_reviews_and_moved_rows(two_versions: dict[str, Any]) -> None:
    settings = two_versions["settings"]
    store = open_store(settings.db_path, read_only=True)
    try:
        changes = json.loads(store.scalar("SELECT changes_json FROM board_versions WHERE version_id = ?",
                                          [two_versions["ids"][1]]))
    finally:
        store.con.close()
    assert changes["from"] == two_versions["ids"][0]
    assert changes["papers_entered"] == {VENUE: [NEW_PAPER]}
    assert {r["review_id"] for r in changes["new_references"]} == {f"{NEW_PAPER}_r0", f"{NEW_PAPER}_r1"}
    assert [(r["review_id"], r["from_version"], r["to_version"]) for r in changes["edited_reviews"]] == \
        [(EDITED, 1, 2)]
    assert changes["candidates_entered"] == ["new-llm"]
    rows = {(r["board"].split(" · ")[0], r["candidate"]): r for r in changes["rows"]}
    good = rows[(VENUE, "good-llm")]
    assert good["change"] == "moved" and good["rank"][1] == 1 and good["rank"][0] != 1
    assert "1 paper(s) entered" in good["why"] and "1 edited review(s)" in good["why"]
    assert "its papers 3 → 4" in good["why"]
    assert rows[(VENUE, "new-llm")]["change"] == "entered" and rows[(VENUE, "new-llm")]["why"][0] == "new candidate"
    assert all(r["board"].startswith(VENUE) for r in changes["rows"] if r["change"] != "entered")  # 2024 untouched
    text = changes_text(changes)
    assert NEW_PAPER in text and EDITED in text and "good-llm: moved" in text


def test_an_unchanged_rebuild_keeps_the_last_version(two_versions: dict[str, Any]) -> None:
    settings = two_versions["settings"]
    store = open_store(settings.db_path)
    try:
        summary = build_site(store, settings)
        assert [v["version_id"] for v in versions(store)] == list(reversed(two_versions["ids"]))
    finally:
        store.close()
    assert summary["version"] == two_versions["ids"][1]
    for rel, blob in two_versions["first"].items():
        assert (two_versions["site"] / rel).read_bytes() == blob


def test_leaderboard_as_of_prints_the_old_board_and_changes_explain(two_versions: dict[str, Any]) -> None:
    data = str(two_versions["settings"].data_path)
    v1, v2 = two_versions["ids"]
    published = {v["version_id"]: v["published_at"] for v in two_versions["listed"]}
    runner = CliRunner()
    old = runner.invoke(main, ["leaderboard", "--as-of", published[v1].isoformat(), "--data-dir", data])
    assert old.exit_code == 0, old.output
    assert f"board version {v1}" in old.stdout and "new-llm" not in old.stdout and "good-llm" in old.stdout
    now = runner.invoke(main, ["leaderboard", "--as-of", published[v2].isoformat() + "Z", "--data-dir", data])
    assert now.exit_code == 0 and f"board version {v2}" in now.stdout and "new-llm" in now.stdout
    as_json = runner.invoke(main, ["leaderboard", "--as-of", published[v1].isoformat(), "--json", "--data-dir", data])
    assert json.loads(as_json.stdout)["board_version"]["version"] == v1
    none = runner.invoke(main, ["leaderboard", "--as-of", "2000-01-01", "--data-dir", data])
    assert none.exit_code == 1 and "no board version was published at or before 2000-01-01" in none.output
    assert f"2 version(s) exist, the first {v1}" in none.output  # what exists, named
    bad = runner.invoke(main, ["leaderboard", "--as-of", "yesterday", "--data-dir", data])
    assert bad.exit_code == 2 and "is not a date" in bad.output
    changes = runner.invoke(main, ["leaderboard", "--changes", "--data-dir", data])
    assert changes.exit_code == 0 and f"changes from version {v1} to {v2}" in changes.stdout
    assert NEW_PAPER in changes.stdout and "new-llm" in changes.stdout
    first = runner.invoke(main, ["leaderboard", "--changes", "--as-of", published[v1].isoformat(), "--data-dir",
                                 data])
    assert first.exit_code == 0 and "the first published version" in first.stdout


def _board(estimator: str, rows: list[tuple[str, int, float]]) -> dict[str, Any]:
    return {"venue_id": "v", "venue": "V", "metric": "gem-s", "estimator": estimator, "preprocessor": "rules",
            "rows": [{"candidate": c, "rank": r, "score": s, "status": "ranked", "papers": 3, "pairs": 6}
                     for c, r, s in rows]}


def test_a_changed_setup_is_named_as_the_cause() -> None:
    basis = {"papers": {"v": ["a", "b", "c"]}, "references": {}, "settings": {}}
    old = {"version_id": "1", "basis": basis, "boards": [_board("offline", [("x", 1, 2.0), ("y", 2, 1.0)])]}
    new = {"version_id": "2", "basis": basis, "boards": [_board("hf:smol", [("x", 2, 1.0), ("y", 1, 2.0)])]}
    changes = version_changes(old, new)
    assert changes["setups_added"] == ["v · gem-s · hf:smol · rules"]
    assert changes["setups_removed"] == ["v · gem-s · offline · rules"]
    assert {r["candidate"]: r["change"] for r in changes["rows"]} == {"x": "moved", "y": "moved"}
    assert all("changed setup (was v · gem-s · offline · rules)" in r["why"] for r in changes["rows"])


def test_a_version_keeps_the_provenance_it_was_published_with(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Other code with the same boards is no new version (issue 34 §3): the version says what produced its numbers
    when it was first published, and the stable leaderboard.json serves those bytes."""
    import grebench.scoring._provenance as prov_module

    with filled_file_store(tmp_path / "data") as (store, settings):
        build_site(store, settings)
        first = json.loads((settings.site_path / "leaderboard.json").read_text(encoding="utf-8"))
        assert first["provenance"]["code"]["scoring_sha256"] and first["provenance"]["rebuild"]
        newer = {**prov_module.code_version(), "scoring_sha256": "f" * 64, "git_commit": "e" * 40}
        monkeypatch.setattr(prov_module, "code_version", lambda: newer)
        summary = build_site(store, settings)
        again = json.loads((settings.site_path / "leaderboard.json").read_text(encoding="utf-8"))
        assert summary["versions"] == 1 and again == first
        board_page = next((settings.site_path / "boards").glob("*.html")).read_text(encoding="utf-8")
        assert "f" * 16 in board_page  # the board page (not a version) says what built it now


def test_a_build_with_the_boards_of_the_newest_version_publishes_none(tmp_path: Path) -> None:
    """Issue 64: a second build published a copy of a version (identical content hash) whose changes read "the first
    published version".  A build whose boards equal the newest version's, whichever store published it, adds none."""
    with filled_file_store(tmp_path / "data") as (store, settings):
        first = build_site(store, settings)["version"]
        store.con.execute("UPDATE board_versions SET origin = 'snapshot'")  # as a snapshot would have brought it
        again = build_site(store, settings)
        assert again["version"] == first and [v["version_id"] for v in versions(store)] == [first]
    data = str(settings.data_path)
    for _ in range(2):  # and through the CLI, built twice on purpose
        assert CliRunner().invoke(main, ["site", "build", "--force", "--data-dir", data]).exit_code == 0
    changes = CliRunner().invoke(main, ["leaderboard", "--changes", "--data-dir", data])
    assert changes.exit_code == 0 and f"version {first}: the first published version" in changes.stdout
    store = open_store(settings.db_path, read_only=True)
    try:
        assert store.scalar("SELECT count(*) FROM board_versions") == 1
    finally:
        store.close()

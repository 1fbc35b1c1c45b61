"""Archive and bundled sources: real data loads, reruns add nothing, bad lines fail alone."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from grebench.cli import main
from grebench.ingest import resolve_source, run_ingest
from grebench.settings import Settings
from grebench.store import Store, open_store
from tests.conftest import DATA_DIR

EXTRA = DATA_DIR / "archives" / "iclr2020_extra_no_abstract.jsonl"


def _ingest(cli_args: list[str], data_dir: Path) -> tuple[int, dict]:
    result = CliRunner().invoke(main, ["--data-dir", str(data_dir), "ingest", *cli_args, "--json"])
    return result.exit_code, json.loads(result.stdout)


def test_bundled_sample_has_400_papers_and_1223_reviews_and_reruns_add_nothing(tmp_path: Path) -> None:
    code, first = _ingest(["--source", "bundled:iclr2020"], tmp_path)
    assert code == 0, first
    assert (first["papers_added"], first["reviews_added"], first["versions_added"]) == (400, 1223, 1223)
    assert (first["papers_total"], first["reviews_total"]) == (400, 1223)
    assert first["failures"] == []
    code, second = _ingest(["--source", "bundled:iclr2020"], tmp_path)
    assert code == 0
    assert (second["papers_added"], second["reviews_added"], second["versions_added"]) == (0, 0, 0)
    assert second["papers_total"] == 400


def test_bundled_records_are_faithful(bundled_store: Store) -> None:
    row = bundled_store.rows(
        "SELECT title, venue_year, decision, reviews_public_at, keywords FROM papers WHERE paper_id = 'rklp93EtwH'")[0]
    assert row["title"] == "Automated Relational Meta-learning"
    assert row["venue_year"] == 2020 and row["decision"] == "Accept (Poster)"
    assert str(row["reviews_public_at"]).startswith("2019-11-08")
    counts = bundled_store.rows("SELECT rating, count(*) AS n FROM review_versions GROUP BY rating ORDER BY rating")
    assert {r["rating"]: r["n"] for r in counts} == {"1: Reject": 40, "3: Weak Reject": 317, "6: Weak Accept": 598,
                                                      "8: Accept": 268}
    raw = json.loads(Path(__file__).resolve().parents[2].joinpath(
        "grebench/ingest/data/iclr2020_reviews.jsonl").read_text().splitlines()[0])
    stored = bundled_store.scalar("SELECT text FROM review_versions WHERE review_id = ?", [raw["reviews"][0]["id"]])
    assert stored == raw["reviews"][0]["content"]["review"].strip()


def test_another_real_archive_with_null_abstracts_and_judgments(tmp_path: Path) -> None:
    lines = EXTRA.read_text().splitlines()
    with_judgments = []
    for i, line in enumerate(lines):
        record = json.loads(line)
        if i == 0:
            record["reviews"][0]["judgments"] = ["The reviewer appreciates the idea",
                                                 "The reviewer questions the proof"]
        with_judgments.append(json.dumps(record))
    archive = tmp_path / "extra.jsonl"
    archive.write_text(json.dumps({"_meta": {"judgments_preprocessor": "litellm:openai/gpt-4o@paper"}}) + "\n"
                       + "\n".join(with_judgments) + "\n")
    code, summary = _ingest(["--source", f"archive:{archive}"], tmp_path / "d")
    assert code == 0, summary
    assert summary["papers_added"] == 2 and summary["reviews_added"] == 6
    store = open_store(tmp_path / "d" / "grebench.duckdb", read_only=True)
    assert store.scalar("SELECT count(*) FROM papers WHERE abstract IS NULL") == 2
    judged = store.rows("SELECT judgments_json, judgments_preprocessor FROM review_versions "
                        "WHERE judgments_json IS NOT NULL")
    assert len(judged) == 1
    assert json.loads(judged[0]["judgments_json"])[1] == "The reviewer questions the proof"
    assert judged[0]["judgments_preprocessor"] == "litellm:openai/gpt-4o@paper"
    store.con.close()


def test_bad_lines_fail_alone_with_clear_reasons(tmp_path: Path, settings: Settings, store: Store) -> None:
    good = EXTRA.read_text().splitlines()
    record = json.loads(good[0])
    no_title = dict(record)
    del no_title["title"]
    wrong_type = dict(json.loads(good[1]), reviews="not a list")
    no_text = json.loads(good[1])
    no_text["id"] = "other"
    no_text["reviews"][0]["content"] = {"rating": "3"}
    archive = tmp_path / "bad.jsonl"
    archive.write_bytes(b"\n".join([
        good[0].encode(),
        b'{"id": "broken", ',                      # invalid JSON
        b'{"id": "x", "title": "caf\xe9"}',         # invalid UTF-8
        json.dumps(no_title).encode(),
        json.dumps(wrong_type).encode(),
        json.dumps(no_text).encode(),
        b"[1, 2]",
        good[1].encode(),
    ]) + b"\n")
    run_id = store.start_run("ingest", {})
    summary = run_ingest(resolve_source(f"archive:{archive}", settings), store, settings, run_id)
    reasons = {f["item"]: f["reason"] for f in summary.failures}
    assert summary.papers_added == 2
    assert "invalid JSON" in reasons["bad.jsonl:2"]
    assert "invalid UTF-8" in reasons["bad.jsonl:3"]
    assert "missing field 'title'" in reasons["bad.jsonl:4"]
    assert "field 'reviews' must be list" in reasons["bad.jsonl:5"]
    assert "no text field" in reasons["bad.jsonl:6"]
    assert "expected a JSON object" in reasons["bad.jsonl:7"]
    assert store.finish_run(run_id, {}) == "failed"
    assert len(store.run_failures(run_id)) == 6


def test_cli_exits_non_zero_when_something_failed(tmp_path: Path) -> None:
    archive = tmp_path / "a.jsonl"
    archive.write_text(EXTRA.read_text().splitlines()[0] + "\nnot json\n")
    code, summary = _ingest(["--source", f"archive:{archive}"], tmp_path / "d")
    assert code == 1
    assert summary["papers_added"] == 1 and len(summary["failures"]) == 1
    code, summary = _ingest(["--source", f"archive:{tmp_path / 'missing.jsonl'}"], tmp_path / "d")
    assert code == 1 and "missing.jsonl: no such file" in summary["error"]  # refused by the setup check
    result = CliRunner().invoke(main, ["--data-dir", str(tmp_path / "d"), "ingest", "--source", "nonsense:x"])
    assert result.exit_code != 0 and "unknown source" in result.output


def test_a_review_id_of_another_paper_is_refused_for_that_line(tmp_path: Path, settings: Settings,
                                                               store: Store) -> None:
    """Issue 19: a review id shared by two papers was merged as a new version of the other paper's review."""
    good = EXTRA.read_text().splitlines()
    first, second = json.loads(good[0]), json.loads(good[1])
    thief = dict(second, reviews=[dict(second["reviews"][0], id=first["reviews"][0]["id"])])
    archive = tmp_path / "clash.jsonl"
    archive.write_text("\n".join([json.dumps(first), json.dumps(thief)]) + "\n")
    run_id = store.start_run("ingest", {})
    summary = run_ingest(resolve_source(f"archive:{archive}", settings), store, settings, run_id)
    reasons = {f["item"]: f["reason"] for f in summary.failures}
    assert summary.papers_added == 1 and list(reasons) == ["clash.jsonl:2"]
    assert f"already belongs to paper {first['id']!r} (line 1)" in reasons["clash.jsonl:2"]
    review = store.rows("SELECT paper_id, latest_version FROM reviews WHERE review_id = ?", [first["reviews"][0]["id"]])
    assert review == [{"paper_id": first["id"], "latest_version": 1}]
    # the same clash against what is already stored (another file, a later run): refused, the store unchanged
    later = tmp_path / "later.jsonl"
    later.write_text(json.dumps(thief) + "\n")
    run2 = store.start_run("ingest", {})
    again = run_ingest(resolve_source(f"archive:{later}", settings), store, settings, run2)
    assert again.papers_added == 0 and "already belongs to paper" in again.failures[0]["reason"]
    assert store.scalar("SELECT count(*) FROM papers WHERE paper_id = ?", [second["id"]]) == 0

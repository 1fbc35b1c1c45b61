"""`grebench bench import`: reviews written elsewhere become a candidate of kind `imported`.

Every line is checked before anything is written (one test per kind of bad line, each checking the line number,
the reason and that the store is untouched); the contamination rule is the bench's own; a re-import of the same
file writes nothing and a changed file replaces the candidate's reviews; the candidate is scored and ranked.
"""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from grebench.bench import (
    IMPORT_VERSION,
    MAX_REVIEW_BYTES,
    CandidateError,
    ImportRefused,
    clean_pairs,
    import_reviews,
    is_clean,
    load_candidates,
    make_splits,
    read_import,
    run_bench,
    sync_candidates,
)
from grebench.cli._main import main
from grebench.scoring import compute_boards, leaderboard
from grebench.settings import Settings, load_settings
from grebench.store import Store, open_store
from tests.bench.conftest import TOPICS, with_candidates
from tests.conftest import FAST_ENV
from tests.scoring.conftest import FakeEstimator
from tests.scoring.parts import score

PUBLIC = datetime(2019, 11, 8)  # when the tiny papers' reviews became public
# a review of its own: it says what the public reviews say ({topic} baselines are missing) in other words, since the
# copy detector refuses a file that repeats a public review's sentence (tests/security/test_disguised_copies.py)
TAGGED = ("<summary>The paper studies {topic}.</summary><strengths>1. Clear.</strengths>"
          "<weaknesses>1. Competing {topic} methods are absent from the comparison.</weaknesses>"
          "<questions>Why {n}?</questions>")
TABLES = ("candidates", "generations", "scores", "board_changes")


def _jsonl(*lines: Any) -> bytes:
    """A JSON Lines file: dicts are dumped, strings go in as they are (for broken lines)."""
    return "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines).encode()


def _tagged(n: int) -> str:
    return TAGGED.format(n=n, topic=TOPICS[n])


def _review(n: int, **extra: Any) -> dict[str, Any]:
    return {"paper_id": f"paper{n}", "review": _tagged(n), **extra}


def _counts(store: Store) -> dict[str, int]:
    return {t: int(store.scalar(f"SELECT count(*) FROM {t}")) for t in TABLES}


def _contents(store: Store) -> list[tuple[Any, ...]]:
    return store.con.execute("SELECT generation_id, text, generated_at, sealed FROM generations "
                             "WHERE candidate = 'agent' ORDER BY generation_id").fetchall()


@pytest.fixture
def tiny_benched(tiny_store: Store, settings: Settings) -> Store:
    """The tiny store after a bench run: four papers with a human-baseline split (paper4 has none)."""
    run_bench(tiny_store, settings, None)
    return tiny_store


GOOD = _jsonl({"_meta": {"cutoff": "2019-01-01", "model": "agent-x", "url": "https://example.org/agent"}},
              _review(0), "", _review(1, generated_at="2019-10-01T12:00:00Z"), _review(2))


def test_good_file_is_stored_as_imported_generations(tiny_benched: Store, settings: Settings) -> None:
    summary = import_reviews(tiny_benched, settings, "agent", trust_declared=True, data=GOOD, source="agent.jsonl")
    assert (summary["reviews"], summary["added"], summary["changed"], summary["status"]) == (3, 3, True, "ok")
    cand = tiny_benched.rows("SELECT * FROM candidates WHERE name = 'agent'")[0]
    assert (cand["kind"], cand["model"], str(cand["cutoff"])) == ("imported", "agent-x", "2019-01-01")
    assert json.loads(cand["params_json"]) == {"url": "https://example.org/agent", "cutoff_trusted": True}
    rows = {r["paper_id"]: r for r in tiny_benched.rows("SELECT * FROM generations WHERE candidate = 'agent'")}
    assert set(rows) == {"paper0", "paper1", "paper2"}
    row = rows["paper1"]
    assert (row["status"], row["prompt_version"], row["parse_ok"]) == ("ok", IMPORT_VERSION, True)
    assert row["text"] == _tagged(1) and row["generated_at"] == datetime(2019, 10, 1, 12)
    assert json.loads(row["flags_json"])["producer"] == "imported"
    assert [h for h, _ in json.loads(row["sections_json"])] == ["summary", "strengths", "weaknesses", "questions"]
    # the run_bench that follows keeps the candidate and its reviews (they are not generated, not configured)
    run_bench(tiny_benched, settings, None)
    assert tiny_benched.scalar("SELECT count(*) FROM generations WHERE candidate = 'agent'") == 3
    assert tiny_benched.scalar("SELECT kind FROM candidates WHERE name = 'agent'") == "imported"


def test_imported_candidate_is_scored_and_ranked_like_an_llm(tiny_benched: Store, settings: Settings) -> None:
    import_reviews(tiny_benched, settings, "agent", trust_declared=True, data=GOOD)
    estimator = FakeEstimator()
    summary = score(tiny_benched, settings, None, ["gem-s"], "offline", "rules", estimator=estimator)
    assert summary["pairs_scored"] > 0
    assert tiny_benched.scalar("SELECT count(*) FROM scores WHERE candidate = 'agent'") == 3 * 2
    rows = {r["candidate"]: r for r in leaderboard(tiny_benched, "gem-s", estimator.id, summary["preprocessor"],
                                                   samples=200)}
    # three of the four papers: a file chooses its papers, so it is shown incomplete, never ranked (issue 31)
    assert rows["agent"]["rank"] is None and (rows["agent"]["complete"], rows["agent"]["missing_papers"]) == (False, 1)
    import_reviews(tiny_benched, settings, "agent", trust_declared=True, data=GOOD + _jsonl(_review(3)))
    summary = score(tiny_benched, settings, None, ["gem-s"], "offline", "rules", estimator=estimator)
    rows = {r["candidate"]: r for r in leaderboard(tiny_benched, "gem-s", estimator.id, summary["preprocessor"],
                                                   samples=200)}
    assert rows["agent"]["kind"] == "imported" and rows["agent"]["rank"] == 1 and rows["agent"]["complete"]
    assert rows["agent"]["papers"] == 4 and rows["agent"]["contaminated_papers"] == 0
    assert rows["human"]["rank"] is None  # the human baseline is a reference line: the import alone is ranked
    compute_boards(tiny_benched, settings)
    assert tiny_benched.scalar("SELECT kind FROM board_rows WHERE candidate = 'agent' LIMIT 1") == "imported"


# -- every kind of bad line: the line number and the reason, and nothing written ------------------------------

BAD_LINES = [
    ("unknown paper", {"paper_id": "nope", "review": "x"}, "unknown paper id 'nope' (not in the store)"),
    ("empty text", {"paper_id": "paper3", "review": " \n\t "}, "review is empty"),
    ("duplicate", {"paper_id": "paper0", "review": "again"}, "duplicate paper_id 'paper0' (first on line 2)"),
    ("wrong types", {"paper_id": 7, "review": ["a"]},
     "paper_id must be a string, got a number; review must be a string, got an array"),
    ("missing review", {"paper_id": "paper3"}, "missing review"),
    ("truncated JSON", '{"paper_id": "paper3", "review": "cut he', "invalid JSON (truncated or malformed)"),
    ("not an object", '["paper3", "a review"]', "expected a JSON object, got an array"),
    ("oversized text", {"paper_id": "paper3", "review": "x" * (MAX_REVIEW_BYTES + 1)},
     f"review is {MAX_REVIEW_BYTES + 1:,} bytes (limit {MAX_REVIEW_BYTES:,})"),
    ("bad date", {"paper_id": "paper3", "review": "x", "generated_at": "2019-13-45"},
     "generated_at is not an ISO 8601 date-time: '2019-13-45'"),
    ("date not a string", {"paper_id": "paper3", "review": "x", "generated_at": 1570000000},
     "generated_at must be an ISO 8601 string, got a number"),
    ("future date", {"paper_id": "paper3", "review": "x", "generated_at": "2999-01-01"}, "is in the future"),
    ("unknown key", {"paper_id": "paper3", "review": "x", "generated": "2019-01-01"},
     "unknown key(s) 'generated' (allowed: paper_id, review, generated_at)"),
    ("duplicate key", '{"paper_id": "paper3", "review": "x", "review": "y"}', "duplicate key 'review'"),
    ("_meta not first", {"_meta": {"cutoff": "2019-01-01"}}, "the _meta line must be the first line"),
    ("invalid UTF-8", b'{"paper_id": "paper3", "review": "\xff"}'.decode("latin-1"), "invalid"),
]


@pytest.mark.parametrize(("line", "reason"), [(b[1], b[2]) for b in BAD_LINES], ids=[b[0] for b in BAD_LINES])
def test_a_bad_line_refuses_the_whole_file_and_writes_nothing(tiny_benched: Store, settings: Settings, line: Any,
                                                               reason: str) -> None:
    import_reviews(tiny_benched, settings, "agent", _jsonl(_review(1)))  # an earlier import the bad file would change
    before, contents = _counts(tiny_benched), _contents(tiny_benched)
    data = _jsonl({"_meta": {"cutoff": "2019-06-01"}}, _review(0), line, _review(2))
    if isinstance(line, str) and "\xff" in line:
        data = data.replace("\xff".encode(), b"\xff")
    with pytest.raises(ImportRefused) as caught:
        import_reviews(tiny_benched, settings, "agent", data, source="agent.jsonl")
    assert [p.line for p in caught.value.problems] == [3], caught.value.problems
    assert reason in caught.value.problems[0].reason
    assert f"line 3: {caught.value.problems[0].reason}" in str(caught.value)
    assert str(caught.value).startswith("agent.jsonl refused, nothing written: 1 bad line")
    assert _counts(tiny_benched) == before and _contents(tiny_benched) == contents


@pytest.mark.parametrize(("meta", "reason"), [
    ({"cutoff": "2019-01-01", "colour": "red"}, "unknown _meta key(s) 'colour'"),
    ({"cutoff": "last year"}, "_meta cutoff must be a date YYYY-MM-DD, got 'last year'"),
    ({"model": 3}, "_meta model must be a string"),
    ({"url": "javascript:alert(1)"}, "_meta url must start with https:// or http://"),
    ({"cutoff": "2024-01-01", "released": "2023-01-01"}, "cutoff 2024-01-01 is after released 2023-01-01"),
])
def test_a_bad_meta_line_is_refused_on_line_one(tiny_benched: Store, settings: Settings, meta: dict[str, Any],
                                                reason: str) -> None:
    before = _counts(tiny_benched)
    with pytest.raises(ImportRefused) as caught:
        import_reviews(tiny_benched, settings, "agent", _jsonl({"_meta": meta}, _review(0)))
    assert caught.value.problems[0].line == 1 and reason in caught.value.problems[0].reason
    assert _counts(tiny_benched) == before


def test_every_bad_line_is_collected_and_the_listing_is_capped(tiny_benched: Store, settings: Settings) -> None:
    lines: list[Any] = [_review(0)] + [{"paper_id": f"ghost{i}", "review": "x"} for i in range(25)] + [_review(1)]
    with pytest.raises(ImportRefused) as caught:
        import_reviews(tiny_benched, settings, "agent", _jsonl(*lines))
    refused = caught.value
    assert refused.total == 25 and [p.line for p in refused.problems] == list(range(2, 27))
    message = str(refused).splitlines()
    assert message[0].endswith("25 bad lines") and len(message) == 1 + 20 + 1
    assert message[1] == "  line 2: unknown paper id 'ghost0' (not in the store)" and message[-1] == "  ... and 5 more"
    assert refused.as_json()["bad_lines_total"] == 25 and len(refused.as_json()["bad_lines"]) == 25
    assert tiny_benched.scalar("SELECT count(*) FROM generations WHERE candidate = 'agent'") == 0


def test_file_size_limit_blank_lines_crlf_and_bom(tiny_benched: Store) -> None:
    with pytest.raises(ImportRefused, match=r"the file is 2,000 bytes \(limit 1,000\)"):
        read_import(b"x" * 2000, {"paper0"}, max_bytes=1000)
    with pytest.raises(ImportRefused, match="the file holds no reviews"):
        read_import(b"\n  \n", {"paper0"})
    data = b"\xef\xbb\xbf" + _jsonl({"_meta": {"model": "m"}}, "", "   ", _review(0)).replace(b"\n", b"\r\n")
    parsed = read_import(data, {"paper0"})
    assert parsed.meta == {"model": "m"} and [(r.line, r.paper_id) for r in parsed.reviews] == [(4, "paper0")]
    long_id = {"paper_id": "p" * 10_000, "review": "x"}
    with pytest.raises(ImportRefused) as caught:
        read_import(_jsonl(long_id), {"paper0"})
    assert len(str(caught.value)) < 200  # a hostile value is quoted short


def test_generated_at_with_and_without_timezone_is_utc(tiny_benched: Store, settings: Settings) -> None:
    data = _jsonl(_review(0, generated_at="2019-10-01T14:00:00+02:00"), _review(1, generated_at="2019-10-01T12:00"),
                  _review(2, generated_at="2019-10-01"))
    import_reviews(tiny_benched, settings, "agent", trust_declared=True, data=data)
    got = {r["paper_id"]: r["generated_at"] for r in tiny_benched.rows(
        "SELECT paper_id, generated_at FROM generations WHERE candidate = 'agent'")}
    assert got == {"paper0": datetime(2019, 10, 1, 12), "paper1": datetime(2019, 10, 1, 12),
                   "paper2": datetime(2019, 10, 1)}


# -- contamination: the bench's rule, not a second one ------------------------------------------------------------

def test_contamination_sealed_by_date_clean_by_cutoff(tiny_benched: Store, settings: Settings) -> None:
    # no cutoff: only what was generated before the reviews were public counts
    after, before = PUBLIC + timedelta(days=20), PUBLIC - timedelta(days=20)
    summary = import_reviews(tiny_benched, settings, "agent", trust_declared=True, data=_jsonl(
        _review(0, generated_at=after.isoformat()), _review(1, generated_at=before.isoformat()), _review(2)))
    pairs = {r["paper_id"]: (r["sealed"], r["clean"]) for r in clean_pairs(tiny_benched, "agent")}
    assert pairs == {"paper0": (False, False), "paper1": (True, True), "paper2": (False, False)}
    assert (summary["clean"], summary["sealed"], summary["contaminated"]) == (1, 1, 2)
    assert any("no generated_at and the model has no cutoff" in w for w in summary["warnings"])
    # a cutoff before the reviews were public: clean whatever the generation date
    summary = import_reviews(tiny_benched, settings, "agent", trust_declared=True, data=_jsonl(
        {"_meta": {"cutoff": "2019-06-01"}}, _review(0, generated_at=after.isoformat()), _review(2)))
    pairs = {r["paper_id"]: (r["sealed"], r["clean"]) for r in clean_pairs(tiny_benched, "agent")}
    assert pairs == {"paper0": (False, True), "paper2": (False, True)}
    assert summary["contaminated"] == 0
    # a cutoff on or after the day the reviews became public: contaminated unless sealed (the option overrides)
    import_reviews(tiny_benched, settings, "agent", trust_declared=True, data=_jsonl(
        {"_meta": {"cutoff": "2019-06-01"}}, _review(0, generated_at=after.isoformat()),
        _review(1, generated_at=before.isoformat())), options={"cutoff": "2019-11-08"})
    pairs = {r["paper_id"]: (r["sealed"], r["clean"]) for r in clean_pairs(tiny_benched, "agent")}
    assert pairs == {"paper0": (False, False), "paper1": (True, True)}
    assert not is_clean(None, PUBLIC, "imported") and is_clean(None, PUBLIC, "human") and is_clean(None, PUBLIC)


def test_an_undated_review_of_a_paper_not_yet_reviewed_is_sealed_by_its_import(tiny_benched: Store,
                                                                               settings: Settings) -> None:
    tiny_benched.con.execute("UPDATE papers SET reviews_public_at = ? WHERE paper_id = 'paper3'",
                        [datetime.now() + timedelta(days=30)])
    import_reviews(tiny_benched, settings, "agent", _jsonl(_review(3), _review(2)))
    pairs = {r["paper_id"]: (r["sealed"], r["clean"]) for r in clean_pairs(tiny_benched, "agent")}
    assert pairs == {"paper3": (True, True), "paper2": (False, False)}


# -- re-import: idempotent, and a changed file replaces the candidate's reviews -----------------------------------

def test_reimport_of_the_same_file_changes_nothing(tiny_benched: Store, settings: Settings) -> None:
    first = import_reviews(tiny_benched, settings, "agent", GOOD)
    before, contents = _counts(tiny_benched), _contents(tiny_benched)
    updated_at = tiny_benched.scalar("SELECT updated_at FROM candidates WHERE name = 'agent'")
    again = import_reviews(tiny_benched, settings, "agent", GOOD, now=datetime.now() + timedelta(hours=1))
    assert again["changed"] is False and (again["added"], again["replaced"], again["removed"]) == (0, 0, 0)
    # undated reviews keep the date of their first import: nothing is rewritten
    assert _counts(tiny_benched) == before and _contents(tiny_benched) == contents
    assert tiny_benched.scalar("SELECT updated_at FROM candidates WHERE name = 'agent'") == updated_at
    assert {k: first[k] for k in ("clean", "sealed", "contaminated")} == \
        {k: again[k] for k in ("clean", "sealed", "contaminated")}


def test_a_changed_file_replaces_the_reviews_and_drops_stale_scores(tiny_benched: Store, settings: Settings) -> None:
    import_reviews(tiny_benched, settings, "agent", _jsonl(_review(0), _review(1), _review(2)))
    score(tiny_benched, settings, None, ["gem-s"], "offline", "rules", estimator=FakeEstimator())
    old = {r["paper_id"]: r["generation_id"] for r in tiny_benched.rows(
        "SELECT paper_id, generation_id FROM generations WHERE candidate = 'agent'")}
    changed = _jsonl(_review(0), {"paper_id": "paper1", "review": "A new review of paper 1."}, _review(3))
    summary = import_reviews(tiny_benched, settings, "agent", changed)
    assert (summary["added"], summary["replaced"], summary["removed"], summary["reviews"]) == (1, 1, 1, 3)
    new = {r["paper_id"]: r["generation_id"] for r in tiny_benched.rows(
        "SELECT paper_id, generation_id FROM generations WHERE candidate = 'agent'")}
    assert set(new) == {"paper0", "paper1", "paper3"} and new["paper0"] == old["paper0"]
    assert new["paper1"] != old["paper1"]
    scored = {r["paper_id"]: r["generation_id"] for r in tiny_benched.rows(
        "SELECT DISTINCT paper_id, generation_id FROM scores WHERE candidate = 'agent'")}
    assert scored == {"paper0": old["paper0"]}  # unchanged review keeps its scores; the others are gone
    again = score(tiny_benched, settings, None, ["gem-s"], "offline", "rules", estimator=FakeEstimator())
    assert again["pairs_scored"] == 2 * 2  # only the new and the changed review are scored
    assert tiny_benched.scalar("SELECT count(*) FROM board_changes WHERE subject = 'agent'") == 2


# -- names ----------------------------------------------------------------------------------------------------------

def test_names_of_other_candidates_are_refused_both_ways(tiny_benched: Store, settings: Settings) -> None:
    before = _counts(tiny_benched)
    for name, reason in [("human", "bundled or configured"), ("generic", "bundled or configured"),
                         ("bad name!", "letters, digits")]:
        with pytest.raises(CandidateError, match=reason):
            import_reviews(tiny_benched, settings, name, GOOD)
    tiny_benched.con.execute("INSERT INTO candidates (name, kind, model, cutoff, params_json, updated_at) "
                        "VALUES ('Submitted-1', 'llm', 'openai/x', DATE '2020-01-01', '{}', now())")
    with pytest.raises(CandidateError, match="name already used by candidate 'Submitted-1' \\(kind llm\\)"):
        import_reviews(tiny_benched, settings, "submitted-1", GOOD)
    with pytest.raises(CandidateError, match="option cutoff must be a date"):
        import_reviews(tiny_benched, settings, "agent", GOOD, {"cutoff": "soon"})
    assert _counts(tiny_benched) == {**before, "candidates": before["candidates"] + 1}
    import_reviews(tiny_benched, settings, "agent", GOOD)
    configured = with_candidates(settings, {"name": "agent", "model": "openai/x", "cutoff": "2023-01-01"})
    with pytest.raises(CandidateError, match="name already used by imported reviews"):
        sync_candidates(tiny_benched, load_candidates(configured))
    with pytest.raises(CandidateError, match="kind 'imported' is not configured"):
        load_candidates(with_candidates(settings, {"name": "x", "kind": "imported"}))


# -- the command line, on the bundled sample with the default (offline) estimator ---------------------------------

@pytest.fixture(scope="module")
def sampled(bundled_db: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """The bundled store after `grebench bench --papers 6` (human baseline and controls), with the six papers."""
    target = tmp_path_factory.mktemp("sampled")
    shutil.copy2(bundled_db, target / "grebench.duckdb")
    store = open_store(target / "grebench.duckdb")
    make_splits(store, int(load_settings(env={**FAST_ENV, }).seed))  # the sample is drawn from the papers with a split
    store.close()
    result = CliRunner().invoke(main, ["--data-dir", str(target), "bench", "--papers", "6", "--json"])
    assert result.exit_code == 0, result.output
    store = open_store(target / "grebench.duckdb")
    try:
        papers = [r["paper_id"] for r in store.rows(
            "SELECT DISTINCT paper_id FROM generations WHERE candidate = 'human' ORDER BY paper_id")]
    finally:
        store.close()
    assert len(papers) == 6
    return target, papers


@pytest.fixture
def data_dir(sampled: tuple[Path, list[str]], tmp_path: Path) -> Path:
    """A writable copy of the sampled store (its papers in ``papers.json``)."""
    target = tmp_path / "data"
    target.mkdir()
    shutil.copy2(sampled[0] / "grebench.duckdb", target / "grebench.duckdb")
    (target / "papers.json").write_text(json.dumps(sampled[1]))
    return target


def _cli(data_dir: Path, *args: str) -> Any:
    return CliRunner().invoke(main, ["--data-dir", str(data_dir), *args])


def test_cli_import_then_score_puts_the_candidate_on_the_board(data_dir: Path, tmp_path: Path) -> None:
    papers = json.loads((data_dir / "papers.json").read_text())
    reviews = tmp_path / "agent.jsonl"
    reviews.write_bytes(_jsonl({"_meta": {"model": "agent-x", "cutoff": "2018-06-01"}},
                               *({"paper_id": p, "review": f"Summary: a paper. Weaknesses: baselines {i}."}
                                 for i, p in enumerate(papers))))  # the whole sample (issue 31)
    # without --trust-cutoff the declared cutoff is information: the papers' reviews were public, nothing is clean
    untrusted = _cli(data_dir, "bench", "import", "--candidate", "agent", str(reviews), "--json")
    assert untrusted.exit_code == 0, untrusted.output
    summary = json.loads(untrusted.stdout)
    assert (summary["clean"], summary["contaminated"], summary["cutoff_trusted"]) == (0, 6, False)
    assert summary["declared"] == {"cutoff": "2018-06-01"} and summary["cutoff"] is None
    result = _cli(data_dir, "bench", "import", "--candidate", "agent", str(reviews), "--trust-cutoff", "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert (summary["reviews"], summary["clean"], summary["papers_with_split"]) == (6, 6, 6)
    assert summary["cutoff_trusted"] is True and summary["cutoff"] == "2018-06-01"
    text = _cli(data_dir, "bench", "import", "--candidate", "agent", str(reviews), "--trust-cutoff")
    assert text.exit_code == 0 and "nothing changed" in text.output

    scored = _cli(data_dir, "score", "--json", "--metric", "gem-s", "--papers", "6")
    assert scored.exit_code == 0, scored.output
    board = _cli(data_dir, "leaderboard", "--json", "--metric", "gem-s")
    rows = {r["candidate"]: r for r in json.loads(board.stdout)["rows"]}
    assert rows["agent"]["kind"] == "imported" and rows["agent"]["papers"] == 6
    assert rows["agent"]["rank"] == 1 and rows["human"]["rank"] is None and rows["human"]["status"] == "reference"
    assert {r["rank"] for r in rows.values() if r["kind"] == "control"} == {None}
    shown = _cli(data_dir, "leaderboard", "--metric", "gem-s")
    assert "agent [imported]" in shown.output

    # a later bench run keeps the imported candidate (no re-import); scoring again has nothing new to score
    bench = _cli(data_dir, "bench", "--json", "--papers", "6")
    assert bench.exit_code == 0, bench.output
    assert json.loads(bench.stdout)["generations_written"] == 0
    again = json.loads(_cli(data_dir, "score", "--json", "--metric", "gem-s", "--papers", "6").stdout)
    assert again["pairs_scored"] == 0 and again["boards"]
    store = open_store(data_dir / "grebench.duckdb")
    try:
        assert store.scalar("SELECT count(*) FROM generations WHERE candidate = 'agent'") == 6
        assert store.scalar("SELECT kind FROM candidates WHERE name = 'agent'") == "imported"
    finally:
        store.close()


def test_cli_refusal_names_the_lines_and_exits_non_zero(data_dir: Path, tmp_path: Path) -> None:
    papers = json.loads((data_dir / "papers.json").read_text())
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(_jsonl({"paper_id": papers[0], "review": "fine"}, {"paper_id": "nope", "review": "x"},
                           {"paper_id": papers[1], "review": ""}))
    store = open_store(data_dir / "grebench.duckdb")
    before = _counts(store)
    store.close()
    text = _cli(data_dir, "bench", "import", "--candidate", "agent", str(bad))
    assert text.exit_code == 1
    assert "bad.jsonl refused, nothing written: 2 bad lines" in text.output
    assert "line 2: unknown paper id 'nope' (not in the store)" in text.output
    assert "line 3: review is empty" in text.output
    machine = _cli(data_dir, "bench", "import", "--candidate", "agent", str(bad), "--json")
    assert machine.exit_code == 1
    report = json.loads(machine.stdout)
    assert report["status"] == "refused" and report["bad_lines_total"] == 2
    assert report["bad_lines"] == [{"line": 2, "reason": "unknown paper id 'nope' (not in the store)"},
                                   {"line": 3, "reason": "review is empty"}]
    clash = _cli(data_dir, "bench", "import", "--candidate", "human", str(bad), "--json")
    assert clash.exit_code == 1 and "bundled or configured" in json.loads(clash.stdout)["error"]
    store = open_store(data_dir / "grebench.duckdb")
    try:
        assert _counts(store) == before
        assert store.scalar("SELECT count(*) FROM candidates WHERE name = 'agent'") == 0
    finally:
        store.close()

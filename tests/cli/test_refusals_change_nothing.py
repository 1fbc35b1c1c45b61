"""A refusal changes nothing (issue 51): every command, given a bad argument against a populated store, is refused
and leaves every table of the store exactly as it found it, row for row, with no run recorded.

Before, ``grebench bench --candidate nosuch`` resolved the run first: the recorded paper sample was deleted and
drawn again, the candidates rewritten and a ``failed`` run recorded before the refusal; ``exam --judge nosuch``
cleared the panel's stored state; ``site build --out`` into a folder that cannot be made recorded a failed run;
``replay`` with a reversed range ended in a traceback.  The store here is made the way the commands make one
(ingested papers, bench, score, validate, a published board version, a cut snapshot), and each refusal is
compared with every row of every table.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

import duckdb
import pytest
from click.testing import CliRunner, Result

from grebench.cli import main
from grebench.cli._main import COMMANDS
from grebench.store import open_store
from tests.bench.conftest import tiny_papers
from tests.conftest import FAST_ENV


def _cli(data: Path, *args: str) -> Result:
    return CliRunner().invoke(main, ["--data-dir", str(data), *args],
                              env={**FAST_ENV, "GREBENCH_CONFIG": None, "GREBENCH_BOOTSTRAP_SAMPLES": "50"})


@pytest.fixture(scope="module")
def populated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data dir with papers, generations, scores, boards, a validation report, a board version and a snapshot,
    all made through the CLI."""
    data = tmp_path_factory.mktemp("populated") / "data"
    store = open_store(data / "grebench.duckdb")
    with store.transaction():
        for paper in tiny_papers():
            store.upsert_paper(paper)
    store.close()
    for args in (["bench", "--papers", "3"], ["score", "--papers", "3"], ["validate"], ["site", "build"],
                 ["snapshot", "export"]):
        result = _cli(data, *args)
        assert result.exit_code == 0, (args, result.output)
    return data


def store_rows(db: Path) -> dict[str, tuple[int, str]]:
    """Every table: its row count and the SHA-256 of all its rows, every column, sorted (read-only)."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        out = {}
        for (table,) in con.execute("SELECT table_name FROM duckdb_tables() WHERE database_name = "
                                    "current_database() ORDER BY 1").fetchall():
            rows = sorted(repr(row) for row in con.execute(f'SELECT * FROM "{table}"').fetchall())
            out[table] = (len(rows), hashlib.sha256("\n".join(rows).encode()).hexdigest())
        return out
    finally:
        con.close()


def _bad_import_file(data: Path) -> str:
    path = data.parent / "reviews.jsonl"
    path.write_text('{"paper_id": "paper0", "review": "Summary: paper0 studies it. Weaknesses: none."}\n')
    return str(path)


#: (command, bad arguments, exit status, words the refusal must say); every command of the CLI appears.
CASES: list[tuple[str, list[str], int, tuple[str, ...]]] = [
    ("ingest", ["ingest", "--source", "nosuch:x"], 2, ("nosuch",)),
    ("links", ["links", "--paper", "nosuch"], 2, ("unknown paper id",)),
    ("extract", ["extract", "/nonexistent/paper.pdf"], 2, ("does not exist",)),
    ("stats", ["stats", "--bogus"], 2, ("--bogus",)),
    ("status", ["status", "--bogus"], 2, ("--bogus",)),
    ("check", ["check", "--bogus"], 2, ("--bogus",)),
    ("export", ["export", "--out", "{data}/grebench.duckdb"], 2, ("is a file",)),
    ("bench", ["bench", "--candidate", "nosuch"], 2, ("unknown candidate(s): nosuch", "known: human")),
    ("bench", ["bench", "import", "--candidate", "x", "--cutoff", "2025-13-45", "{import}"], 2,
     ("'2025-13-45' is not a date",)),
    ("score", ["score", "--papers", "0"], 2, ("--papers",)),
    ("leaderboard", ["leaderboard", "--venue", "NoSuch/2026"], 2, ("NoSuch/2026", "Test.cc/2019/Conference")),
    ("leaderboard", ["leaderboard", "--as-of", "yesterday"], 2, ("not a date",)),
    ("run", ["run", "--source", "nosuch:x"], 2, ("nosuch",)),
    ("validate", ["validate", "--estimator", "hf:smollm2-135m"], 2, ("no scores with estimator hf:smollm2-135m",
                                                                      "scored setups: offline")),
    ("judge", ["judge", "--judge", "nosuch"], 2, ("unknown judge(s): nosuch", "known: position")),
    ("exam", ["exam", "--judge", "nosuch"], 2, ("unknown judge(s): nosuch",)),
    ("site", ["site", "build", "--out", "/proc/grebench-nonexistent"], 2, ("--out", "cannot be created")),
    ("app", ["app", "--port", "99999"], 2, ("--port",)),
    ("serve", ["serve", "--once", "--job", "bogus"], 2, ("'bogus' is not one of",)),
    ("replay", ["replay", "--from", "2025-11-30", "--to", "2025-11-01"], 2, ("before the first", "nothing to replay")),
    ("snapshot", ["snapshot", "export", "--venue-year", "NoSuch"], 2, ("no venue-year 'NoSuch'", "known: ")),
    ("submit", ["submit", "--name", "x", "--model", "openai/x", "--cutoff", "soon", "--contact", "a@example.org"], 2,
     ("'soon' is not a date",)),
    # refusals of the request, not of its form: exit 1, and still nothing written
    ("submissions", ["submissions", "approve", "nosuch"], 1, ("no accepted submission 'nosuch'",)),
    ("models", ["models", "verify", "nosuch-model"], 1, ("nosuch-model",)),
]


def test_the_sweep_covers_every_command() -> None:
    assert {command for command, *_ in CASES} == set(COMMANDS)


@pytest.mark.parametrize(("command", "args", "status", "words"), CASES,
                         ids=[" ".join(c[1][:3]) for c in CASES])
def test_a_refused_command_changes_nothing_in_the_store(populated: Path, tmp_path: Path, command: str,
                                                        args: list[str], status: int, words: tuple[str, ...]) -> None:
    data = tmp_path / "data"
    shutil.copytree(populated, data)
    filled = {"{data}": str(data), "{import}": _bad_import_file(data)}
    argv = [filled.get(a, a.replace("{data}", str(data))) for a in args]
    before = store_rows(data / "grebench.duckdb")
    assert before["paper_samples"][0] > 0 and before["runs"][0] > 0 and before["board_versions"][0] > 0
    result = _cli(data, *argv)
    assert result.exit_code == status, result.output
    last = result.output.strip().splitlines()[-1]
    assert last.startswith("Error: ") and "Traceback" not in result.output, result.output
    for word in words:
        assert word in result.output, (word, result.output)
    after = store_rows(data / "grebench.duckdb")
    changed = {t: (before.get(t), after.get(t)) for t in set(before) | set(after) if before.get(t) != after.get(t)}
    assert not changed, changed


def test_a_run_records_what_the_command_exits_with(populated: Path, tmp_path: Path) -> None:
    """The recorded status is the command's outcome: an exam whose judge could not be examined exits 1 and its run
    is ``failed`` (it was recorded ``ok``), a plain one exits 0 and is ``ok``."""
    data = tmp_path / "data"
    shutil.copytree(populated, data)
    failed = _cli(data, "exam", "--estimator", "vllm:http://127.0.0.1:9")  # nothing listens on the discard port
    assert failed.exit_code == 1, failed.output
    passed = _cli(data, "exam")
    assert passed.exit_code == 0, passed.output
    store = open_store(data / "grebench.duckdb", read_only=True)
    try:
        runs: list[dict[str, Any]] = store.rows("SELECT status FROM runs WHERE command = 'exam' ORDER BY started_at")
        reasons = [r["reason"] for r in store.rows(
            "SELECT reason FROM run_failures JOIN runs USING (run_id) WHERE command = 'exam'")]
    finally:
        store.close()
    assert [r["status"] for r in runs] == ["failed", "ok"]
    assert reasons and all(r.startswith("not examined: ") for r in reasons)

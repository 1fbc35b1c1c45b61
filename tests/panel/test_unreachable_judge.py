"""A judge that cannot be reached is not examined, and does not count as failing (issue 51).

Before, ``grebench exam`` with an LLM judge whose server was down exited 0, showed "10/10 answers (done)" and marked
the judge as failing consistency, pertinence and self-confidence; nothing said "connection refused".  Now the judge
is "not examined: unreachable (<the connection error>)", left out of the pass thresholds, the exam stops asking it
after its first answers, the command exits 1 naming the cause, and the run is recorded ``failed``.
"""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from grebench.cli import main
from grebench.store import open_store
from tests.bench.conftest import tiny_papers
from tests.conftest import FAST_ENV


def _closed_port() -> int:
    with socket.socket() as sock:  # bound, then closed: nothing listens there
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _cli(data: Path, *args: str, config: Path | None = None) -> Result:
    extra = [] if config is None else ["--config", str(config)]
    return CliRunner().invoke(main, ["--data-dir", str(data), *extra, *args],
                              env={**FAST_ENV, "GREBENCH_CONFIG": None, "GREBENCH_BOOTSTRAP_SAMPLES": "50",
                                   "GREBENCH_LLM_MAX_RETRIES": "0"})


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("scored") / "data"
    store = open_store(data / "grebench.duckdb")
    with store.transaction():
        for paper in tiny_papers():
            store.upsert_paper(paper)
    store.close()
    for args in (["bench"], ["score"]):
        assert _cli(data, *args).exit_code == 0
    return data


def test_an_exam_against_a_dead_judge_says_unreachable_and_exits_1(scored: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    shutil.copytree(scored, data)
    config = tmp_path / "grebench.toml"
    config.write_text(f'[[judges]]\nname = "dead"\nmodel = "openai/dead"\n'
                      f'api_base = "http://127.0.0.1:{_closed_port()}/v1"\n')
    alone = _cli(data, "exam", "--json")  # the reference judges alone: their thresholds
    assert alone.exit_code == 0, alone.output
    result = _cli(data, "exam", "--json", config=config)
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout[:result.stdout.rindex("}") + 1])
    dead = next(r for r in report["rows"] if r["judge"] == "dead")
    assert dead["not_examined"].startswith("unreachable (") and "connection refused" in dead["not_examined"]
    assert dead["failed"] == [f"not examined: {dead['not_examined']}"]  # not "consistency, pertinence, ..."
    assert not dead["passed"] and dead["weight"] == 0 and dead["p_c"] is None and dead["p_p"] is None
    expected = json.loads(alone.stdout)
    assert (report["eta_c"], report["eta_p"]) == (expected["eta_c"], expected["eta_p"])  # not counted
    for row in expected["rows"]:
        [same] = [r for r in report["rows"] if r["judge"] == row["judge"]]
        assert same["passed"] == row["passed"]
    last = result.output.strip().splitlines()[-1]
    assert last.startswith("Error: judge dead not examined: unreachable (") and "connection refused" in last

    store = open_store(data / "grebench.duckdb", read_only=True)
    try:
        [run] = store.rows("SELECT run_id, status FROM runs WHERE command = 'exam' ORDER BY started_at DESC LIMIT 1")
        failures = store.run_failures(run["run_id"])
        asked = store.scalar("SELECT count(*) FROM llm_calls WHERE purpose = 'judge'")
    finally:
        store.close()
    assert run["status"] == "failed"
    assert [f["item"].rsplit(" ", 1)[-1] for f in failures] == ["dead"]
    assert 0 < asked <= 8  # stopped after its first chunk of answers (4 pairs in both orders), not 10s of calls

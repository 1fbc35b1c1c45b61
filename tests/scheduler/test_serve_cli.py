"""`grebench serve --once` as an operator meets it: the plan first, the run's paper sample, true exit codes."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from click.testing import CliRunner

from grebench.cli._main import main
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.openreview_server import FakeOpenReview
from tests.scheduler.conftest import add_papers, add_reviews, config_text


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_once_exits_1_and_names_the_failure_of_an_unreachable_venue(tmp_path: Path,
                                                                    llm: FakeOpenAIServer) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"  # nothing listens there
    cfg = tmp_path / "grebench.toml"
    cfg.write_text(config_text(tmp_path / "data", url, llm.url, openreview_max_retries=0), encoding="utf-8")
    result = CliRunner().invoke(main, ["--config", str(cfg), "serve", "--once", "--job", "poll", "--job", "site"])
    assert result.exit_code == 1, result.output
    poll = next(line for line in result.stdout.splitlines() if line.startswith("poll:"))
    assert poll.startswith("poll: failed — [ingest]") and "connection refused" in poll, poll
    assert "site: ok" in result.stdout  # one failing job does not stop the cycle


def test_serve_prints_its_plan_and_scores_the_runs_sample(tmp_path: Path, openreview: FakeOpenReview,
                                                          llm: FakeOpenAIServer) -> None:
    add_reviews(openreview, add_papers(openreview, 4))
    cfg = tmp_path / "grebench.toml"
    cfg.write_text(config_text(tmp_path / "data", openreview.url, llm.url), encoding="utf-8")
    result = CliRunner().invoke(main, ["--config", str(cfg), "serve", "--once", "--json", "--job", "poll", "--job",
                                       "score"], env={"GREBENCH_PAPERS": "2"})
    assert result.exit_code == 0, result.output
    plan = result.stderr.splitlines()
    assert plan[0].startswith("serve plan: jobs poll every 60 min, score every 60 min")
    assert plan[1].startswith("score job") and "2 papers, a seeded sample (as set)" in plan[1], plan[1]
    score = next(r for r in json.loads(result.stdout) if r["job"] == "score")
    assert score["summary"]["bench"]["sample"].startswith("seeded sample of 2 of 4 papers")
    assert score["summary"]["score"]["sample"].startswith("seeded sample of 2 of 4 papers")
    assert len(llm.chat_requests) == 2  # the candidate reviewed the sample, not every paper


def test_a_job_with_nothing_to_do_pulls_and_locks_no_model(tmp_path: Path) -> None:
    # the default setup (a local evaluation LM, local candidate and judge) on an empty store: nothing to score
    env = {"GREBENCH_ESTIMATOR": "hf:smollm2-135m", "GREBENCH_LOCAL_CANDIDATES": "smollm2-135m",
           "GREBENCH_LOCAL_JUDGES": "smollm2-135m", "GREBENCH_PAPERS": "auto", "HF_HUB_OFFLINE": "1",
           "GREBENCH_MODELS_DIR": str(tmp_path / "models")}
    result = CliRunner().invoke(main, ["--data-dir", str(tmp_path / "data"), "serve", "--once", "--json", "--job",
                                       "score"], env=env)
    assert result.exit_code == 0, result.output
    assert [r["status"] for r in json.loads(result.stdout)] == ["ok"]
    models = tmp_path / "models"
    assert not models.exists() or not any(models.iterdir())  # nothing pulled, no lock file taken

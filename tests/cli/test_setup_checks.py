"""Settings and parts are checked before any work (issue 22): one line naming what is wrong, exit 2, no stage run;
a failed stage is reported once and the stages that need it are skipped because of it; ingest limits."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from grebench.cli import main
from grebench.ingest import resolve_source, run_ingest
from grebench.pipeline import BaseStage, RunOptions, StageContext, run_stages
from grebench.registry import UnknownPart
from grebench.settings import Settings, load_settings
from grebench.store import Store
from tests.conftest import DATA_DIR, FAST_ENV


def _run(tmp_path: Path, *args: str, config: str | None = None, env: dict[str, str] | None = None):
    cfg = []
    if config is not None:
        path = tmp_path / "grebench.toml"
        path.write_text(config)
        cfg = ["--config", str(path)]
    return CliRunner().invoke(main, ["--data-dir", str(tmp_path / "data"), *cfg, *args],
                              env={**FAST_ENV, **(env or {})})


@pytest.mark.parametrize(("args", "config", "needle"), [
    (["run", "--estimator", "nosuch"], None, "--estimator = 'nosuch'"),
    (["run", "--preprocessor", "nosuch"], None, "--preprocessor = 'nosuch'"),
    (["run", "--source", "nosuch:x"], None, "--source = 'nosuch:x'"),
    (["run", "--papers", "-3"], None, "--papers"),
    (["run", "--estimator", "hf:no-such-model"], None, "not a built-in model"),
    (["run"], "bootstrap_samples = -5\n", "bootstrap_samples = -5 is out of range; it must be between 10 and"),
    (["run"], 'hf_dtype = "fp8"\n', "hf_dtype = 'fp8' is not allowed; one of: auto, float32, bfloat16, float16"),
    (["run"], 'app_port = "x"\n', "app_port must be int, got 'x'"),
    (["run"], "bench_concurrency = 2.5\n", "bench_concurrency must be a whole number"),
    (["run"], "env:GREBENCH_LOCAL_CANDIDATES=gpt-17", "local_candidates = 'gpt-17': 'gpt-17' is not a built-in model"),
    (["run"], 'proxy_estimator = "nosuch"\n', "proxy_estimator = 'nosuch'"),
    (["run", "--metric", "nosuch"], None, "'nosuch' is not one of 'gem', 'gem-s'"),
    (["run"], 'preprocessor = "nosuch"\n', "preprocessor = 'nosuch'"),
    (["run"], "env:GREBENCH_ESTIMATOR=hf:gpt-17", "estimator = 'hf:gpt-17': 'gpt-17' is not a built-in model"),
    (["run"], "env:GREBENCH_LOCAL_JUDGES=gpt-17", "local_judges = 'gpt-17': 'gpt-17' is not a built-in model"),
    (["run"], 'venues = "nosuch:x"\n', "venues = 'nosuch:x'"),
    (["run"], "seed = true\n", "seed must be int, got True"),
    (["score", "--estimator", "nosuch"], None, "--estimator = 'nosuch'"),
    (["score", "--metric", "nosuch"], None, "nosuch"),
    (["ingest", "--source", "nosuch:x"], None, "--source = 'nosuch:x'"),
])
def test_a_mistake_stops_the_command_before_any_stage(tmp_path: Path, args: list[str], config: str | None,
                                                      needle: str) -> None:
    env = None
    if config is not None and config.startswith("env:"):  # the environment wins over a file: set it there
        key, _, value = config[4:].partition("=")
        env, config = {key: value}, None
    result = _run(tmp_path, *args, config=config, env=env)
    assert result.exit_code == 2, result.output
    assert needle in result.output
    assert "[ingest]" not in result.output and "Traceback" not in result.output
    assert not (tmp_path / "data" / "grebench.duckdb").exists()  # nothing ran, nothing was written


class _Boom(BaseStage):
    name = "score"

    def run(self, ctx: StageContext) -> dict:
        raise UnknownPart("unknown estimator 'nosuch' (known: offline, hf, vllm, sglang)")


class _Needs(BaseStage):
    requires = ("score",)

    def __init__(self, name: str) -> None:
        self.name = name
        self.ran = False

    def run(self, ctx: StageContext) -> dict:
        self.ran = True
        return {}


def test_a_failed_stage_is_reported_once_and_its_dependents_are_skipped(store: Store, settings: Settings) -> None:
    boards, validate = _Needs("boards"), _Needs("validate")
    run_id = store.start_run("run", {})
    result = run_stages(StageContext(store, settings, run_id, RunOptions()), [_Boom(), boards, validate])
    assert not boards.ran and not validate.ran
    assert result.skipped == {"boards": "score", "validate": "score"}
    assert result.stages["validate"] == {"skipped": "because [score] failed"}
    [failure] = store.run_failures(run_id)
    assert failure["stage"] == "score" and failure["reason"].startswith("unknown estimator 'nosuch'")
    assert "None" not in failure["reason"] and "UnknownPart" not in failure["reason"]


def test_archive_records_over_a_limit_are_refused_with_their_line(tmp_path: Path, store: Store) -> None:
    good = (DATA_DIR / "archives" / "iclr2020_extra_no_abstract.jsonl").read_text().splitlines()
    first, second = json.loads(good[0]), json.loads(good[1])
    huge = dict(second, id="huge", abstract="x" * 50_000)
    many = dict(second, id="many", reviews=[dict(second["reviews"][0], id=f"r{i}") for i in range(7)])
    archive = tmp_path / "limits.jsonl"
    archive.write_text("\n".join([json.dumps(huge), json.dumps(many), "y" * 300_000, json.dumps(first),
                                  json.dumps(dict(first, id="late", reviews=[]))]) + "\n")
    settings = load_settings(env={**FAST_ENV, "GREBENCH_DATA_DIR": str(tmp_path / "d"),
                                  "GREBENCH_INGEST_MAX_ABSTRACT_CHARS": "20000",
                                  "GREBENCH_INGEST_MAX_REVIEWS_PER_PAPER": "5",
                                  "GREBENCH_INGEST_MAX_LINE_BYTES": "200000", "GREBENCH_INGEST_MAX_PAPERS": "1"})
    run_id = store.start_run("ingest", {})
    summary = run_ingest(resolve_source(f"archive:{archive}", settings), store, settings, run_id)
    reasons = {f["item"]: f["reason"] for f in summary.failures}
    assert "abstract is 50,000 characters (limit ingest_max_abstract_chars = 20,000)" in reasons["limits.jsonl:1"]
    assert "7 reviews (limit ingest_max_reviews_per_paper = 5)" in reasons["limits.jsonl:2"]
    assert "over 200,000 bytes" in reasons["limits.jsonl:3"]
    assert "more than 1 papers" in reasons["limits.jsonl:5"]
    assert summary.papers_added == 1  # the good line is ingested, nothing else is lost
    assert store.scalar("SELECT count(*) FROM papers WHERE paper_id = ?", [first["id"]]) == 1


def test_the_cli_says_a_stage_failure_once_and_the_stages_it_stopped(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import grebench.pipeline
    import grebench.pipeline._jobs

    # get past the setup check (it would refuse the estimator) to see how a failing stage is reported
    monkeypatch.setattr(grebench.pipeline, "check_setup", lambda *a, **k: None)
    monkeypatch.setattr(grebench.pipeline._jobs, "check_setup", lambda *a, **k: None)
    result = _run(tmp_path, "run", "--estimator", "nosuch", "--papers", "20")
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    failed = [line for line in lines if line.startswith("failed:")]
    assert len(failed) == 1 and failed[0].startswith("failed: [score] unknown estimator 'nosuch'"), failed
    assert "skipped: [validate] because [score] failed" in lines
    assert "skipped: [boards] because [score] failed" in lines
    assert "skipped: [score]" not in result.output  # the score stage's own "skipped" counts are no stage skip
    assert "None:" not in result.output and "no scores match" not in result.output


STAGE_MARKERS = ("[ingest]", "[bench]", "[panel]", "[score]", "[site]", "[boards]", "[validate]")


def _one_line_refusal(result, needle: str) -> None:
    """Exit 2, one error line naming what and why, no traceback, no stage started."""
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and needle in errors[0], result.output
    assert "Traceback" not in result.output
    assert not any(marker in result.output for marker in STAGE_MARKERS), result.output


@pytest.mark.parametrize(("args", "needle"), [
    (["--estimator", "vllm:"], "--estimator = 'vllm:': vllm estimator spec must be vllm:URL"),
    (["--estimator", "vllm: , "], "vllm estimator spec must be vllm:URL"),
    (["--estimator", "vllm:http://127.0.0.1:8000,"], "empty URL between commas"),
    (["--estimator", "vllm:ftp://127.0.0.1:8000"], "must start with http:// or https://"),
    (["--estimator", "vllm:127.0.0.1:8000"], "must start with http:// or https://"),
    (["--estimator", "vllm:http://"], "'http://' is not a URL with a host"),
    (["--estimator", "vllm:http://127.0.0.1:port"], "'http://127.0.0.1:port' is not a URL"),
    (["--estimator", "sglang:"], "--estimator = 'sglang:': sglang estimator spec must be sglang:URL"),
    (["--estimator", "sglang:http://127.0.0.1:99999"], "is not a URL (Port out of range"),
    (["--estimator", "offline:foo"], "--estimator = 'offline:foo': the offline estimator takes no argument"),
    (["--estimator", "hf:"], "--estimator = 'hf:': hf estimator spec must be hf:NAME"),
    (["--preprocessor", "rules:x"], "--preprocessor = 'rules:x': the rules preprocessor takes no argument"),
    (["--preprocessor", "litellm:"], "litellm preprocessor spec must be litellm:MODEL"),
    (["--source", "bundled:iclr1999"], "unknown bundled sample 'iclr1999'"),
    (["--source", "archive:/nonexistent/papers.jsonl"], "/nonexistent/papers.jsonl: no such file"),
    (["--source", "openreview:"], "openreview source spec must be openreview:VENUE_ID"),
])
def test_each_kind_checks_its_argument_before_any_stage(tmp_path: Path, args: list[str], needle: str) -> None:
    result = _run(tmp_path, "run", "--papers", "4", *args)
    _one_line_refusal(result, needle)
    assert not (tmp_path / "data").exists()  # nothing ran, nothing was written


def test_the_server_estimators_accept_a_list_of_urls() -> None:
    from grebench.scoring.estimators import estimator_info
    from grebench.scoring.estimators._server import server_urls

    assert server_urls("vllm", " http://127.0.0.1:8000 ,https://gpu-2.lan/base ") == [
        "http://127.0.0.1:8000", "https://gpu-2.lan/base"]
    check = estimator_info("vllm").check_arg
    assert check is not None
    check("http://localhost:30000")  # passes
    with pytest.raises(ValueError, match="query or fragment"):
        check("http://localhost:30000/?x=1")
    assert estimator_info("offline").check_arg is not None and estimator_info("hf").check_arg is not None


@pytest.mark.parametrize("case", ["a file", "under a file"])
def test_a_data_dir_that_cannot_hold_the_store_is_one_line(tmp_path: Path, case: str) -> None:
    afile = tmp_path / "afile"
    afile.write_text("not a directory")
    data_dir = afile if case == "a file" else afile / "data"
    for command in (["run", "--estimator", "offline", "--papers", "4"], ["ingest"], ["score"], ["export"]):
        result = CliRunner().invoke(main, ["--data-dir", str(data_dir), *command], env=FAST_ENV)
        _one_line_refusal(result, f"data_dir = '{data_dir}': " + (
            "it is a file, not a directory" if case == "a file" else f"it cannot be created: {afile} is a file"))
    assert afile.read_text() == "not a directory"


def _read_only_dir(tmp_path: Path) -> Path:
    """A directory this process cannot write: a 0555 one, or (as root, whom permissions do not stop) /proc/sys."""
    if os.geteuid() != 0:
        path = tmp_path / "ro"
        path.mkdir()
        path.chmod(0o555)
        return path
    if Path("/proc/sys").is_dir() and not os.access("/proc/sys", os.W_OK):
        return Path("/proc/sys")
    pytest.skip("running as root and no read-only directory to try (permissions do not stop root's writes)")


@pytest.mark.parametrize("case", ["read-only dir", "read-only parent"])
def test_a_read_only_data_dir_is_one_line_not_a_writer_conflict(tmp_path: Path, case: str) -> None:
    ro = _read_only_dir(tmp_path)
    data_dir = ro if case == "read-only dir" else ro / "grebench-data"
    try:
        for command in (["run", "--estimator", "offline", "--papers", "4"], ["serve", "--once"], ["export"]):
            result = CliRunner().invoke(main, ["--data-dir", str(data_dir), *command], env=FAST_ENV)
            why = ("the directory is read-only" if case == "read-only dir" else
                   f"it cannot be created: {ro} is read-only")
            _one_line_refusal(result, f"data_dir = '{data_dir}': {why}")
            assert "Only one grebench writer" not in result.output
        assert not (data_dir / "grebench.duckdb").exists()
    finally:
        if ro != Path("/proc/sys"):
            ro.chmod(0o755)


def test_a_read_only_store_file_is_one_line(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("running as root: a 0444 store file is writable for root, so there is no read-only store here")
    (tmp_path / "grebench.duckdb").write_bytes(b"")
    (tmp_path / "grebench.duckdb").chmod(0o444)
    result = CliRunner().invoke(main, ["--data-dir", str(tmp_path), "run", "--estimator", "offline", "--papers", "4"],
                                env=FAST_ENV)
    _one_line_refusal(result, f"the store {tmp_path / 'grebench.duckdb'} is read-only")


def test_a_site_dir_that_cannot_be_written_is_refused_before_the_work_not_after_it(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("not a directory")
    env = {**FAST_ENV, "GREBENCH_SITE_DIR": str(afile / "site")}
    for command in (["run", "--estimator", "offline", "--papers", "4"], ["serve", "--once"]):
        result = CliRunner().invoke(main, ["--data-dir", str(tmp_path / "data"), *command], env=env)
        _one_line_refusal(result, f"site_dir = '{afile / 'site'}': it cannot be created: {afile} is a file, not a "
                                  "directory (the site is built there)")
    assert not (tmp_path / "data" / "grebench.duckdb").exists()  # refused before the store: no run was started
    ingest = CliRunner().invoke(main, ["--data-dir", str(tmp_path / "data"), "ingest", "--limit", "2"], env=env)
    assert ingest.exit_code == 0, ingest.output  # a job that builds no site is not refused

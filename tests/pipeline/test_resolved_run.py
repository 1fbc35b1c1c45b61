"""Issue 32: a job's setup and sample are resolved once, in one place, and every stage reads that.

Behaviour: the main job resolves its run once (after ingest), draws the sample once, and the bench, score, validate
and panel stages all see that one object; readers (validate, exam, judge) use the stored scored setup by equality.
Structure: no module outside the resolver picks ``option or setting`` for the setup, reads the sample table, or
calls the resolver (a stage that resolved its own would fail here).
"""

from __future__ import annotations

import ast
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest

import grebench
import grebench.pipeline._resolve as resolve_module
import grebench.pipeline._sample as sample_module
from grebench.pipeline import (
    BenchSummary,
    BoardsSummary,
    IngestSummary,
    JobObserver,
    PanelSummary,
    ResolvedRun,
    RunOptions,
    ScoreSummary,
    SetupError,
    SiteSummary,
    StageSummary,
    ValidateSummary,
    run_job,
    scored_setups,
)
from grebench.settings import SECTIONS, Settings, load_settings
from grebench.store import open_store
from tests.conftest import FAST_ENV

PACKAGE = Path(grebench.__file__).parent
CONTRACTS: dict[str, type[StageSummary]] = {
    "ingest": IngestSummary, "bench": BenchSummary, "score": ScoreSummary, "boards": BoardsSummary,
    "validate": ValidateSummary, "panel": PanelSummary, "site": SiteSummary}


class _Seen(JobObserver):
    def __init__(self) -> None:
        self.runs: list[ResolvedRun] = []
        self.stages: list[str] = []

    def resolved(self, run: ResolvedRun) -> None:
        self.runs.append(run)

    def stage(self, name: str) -> None:
        self.stages.append(name)


def _settings(tmp_path: Path, **env: str) -> Settings:
    return load_settings(env={**FAST_ENV, "GREBENCH_DATA_DIR": str(tmp_path / "data"), **env})


def test_the_main_job_resolves_once_after_ingest_and_every_stage_reads_that_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: dict[str, int] = {"resolve_run": 0, "draw_sample": 0}
    real_resolve, real_draw = resolve_module.resolve_run, sample_module.draw_sample

    def counted_resolve(*args: Any, **kwargs: Any) -> ResolvedRun:
        calls["resolve_run"] += 1
        return real_resolve(*args, **kwargs)

    def counted_draw(*args: Any, **kwargs: Any) -> Any:
        calls["draw_sample"] += 1
        return real_draw(*args, **kwargs)

    monkeypatch.setattr(resolve_module, "resolve_run", counted_resolve)
    monkeypatch.setattr(resolve_module, "draw_sample", counted_draw)
    settings = _settings(tmp_path, GREBENCH_PAPERS="5")
    seen = _Seen()
    store = open_store(settings.db_path)
    try:
        done = run_job(settings, "run", RunOptions(), open_store=lambda: nullcontext(store), observer=seen)
        assert done.status == "ok", done.failures
        assert calls == {"resolve_run": 1, "draw_sample": 1}
        assert len(seen.runs) == 1 and seen.stages.index("bench") == 1  # resolved after ingest, before bench
        run = done.run
        assert run is not None and run.paper_ids is not None and len(run.paper_ids) == 5
        # the run the job ended with is the one it resolved, never replaced (issue 49): the ids its score stage
        # produced are in the store, where validate and the panel read them, as a job that only reads does
        assert run is seen.runs[0] and run.scored is None and run.draws
        scored = run.scored_setup(store)
        assert scored is not None and scored == scored_setups(store, "offline", "rules")
        sampled = [r[0] for r in store.con.execute("SELECT paper_id FROM paper_samples ORDER BY 1").fetchall()]
        assert tuple(sampled) == run.paper_ids
        # every stage worked on that sample: generations of the human baseline exist only for those papers
        benched = {r[0] for r in store.con.execute(
            "SELECT DISTINCT paper_id FROM generations WHERE candidate = 'human'").fetchall()}
        assert benched == set(run.paper_ids)
        validate = done.result.stages["validate"]
        assert (validate["estimator"], validate["preprocessor"]) == (scored.estimator_id, scored.preprocessor_id)
        assert done.result.stages["panel"]["gem_metric"] and done.result.stages["panel"]["exam"]
        # each stage returns what its typed contract declares (the commands read the summaries through it)
        for name, summary in done.result.stages.items():
            assert not CONTRACTS[name].from_json(summary).extra, (name, CONTRACTS[name].from_json(summary).extra)
    finally:
        store.close()


def test_every_stage_that_scores_takes_the_run_s_estimator_which_the_runner_releases(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 49: the resolved run holds the estimator (a handle, decided once); the score stage and the gem judge's
    exam texts take their instance from it, no stage builds one from a spec, and the runner closes what was built
    after each stage (a model's memory is back before the next stage) and at the job's end."""
    import grebench.scoring.estimators as estimators_module
    from grebench.scoring import EstimatorHandle

    gets: list[tuple[int, str]] = []
    closes: list[int] = []
    real_get, real_close = EstimatorHandle.get, EstimatorHandle.close

    def spied_get(self: EstimatorHandle, *args: Any, **kwargs: Any) -> Any:
        gets.append((id(self), self.spec))
        return real_get(self, *args, **kwargs)

    def spied_close(self: EstimatorHandle) -> None:
        closes.append(len(self._built))
        real_close(self)

    def no_spec_builds(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"an estimator built from a spec outside the run's handle: {args[:1]}")

    monkeypatch.setattr(EstimatorHandle, "get", spied_get)
    monkeypatch.setattr(EstimatorHandle, "close", spied_close)
    monkeypatch.setattr(estimators_module, "resolve_estimator", no_spec_builds)
    settings = _settings(tmp_path, GREBENCH_PAPERS="4")
    store = open_store(settings.db_path)
    try:
        done = run_job(settings, "run", RunOptions(), open_store=lambda: nullcontext(store))
        assert done.status == "ok", done.failures
        run = done.run
        assert run is not None and run.estimator_handle is not None
        mine = id(run.estimator_handle)
        assert gets and {h for h, _ in gets} == {mine}, gets  # the score stage's and the panel's: one handle
        assert done.result.stages["panel"]["exam"], "the gem judge was examined (its exam texts scored)"
        # built once per stage that scored (the score stage's raw and preprocessed texts share it; every venue's
        # exam texts share the panel's), each closed after its stage, and nothing left at the job's end
        assert run.estimator_handle.builds == 2 and run.estimator_handle._built == {}
        assert sum(n for n in closes) == 2
    finally:
        store.close()


def test_readers_use_the_scored_setup_and_sample_by_equality(tmp_path: Path) -> None:
    settings = _settings(tmp_path, GREBENCH_PAPERS="4")
    store = open_store(settings.db_path)
    try:
        assert run_job(settings, "run", RunOptions(), open_store=lambda: nullcontext(store)).status == "ok"
        sample = store.con.execute("SELECT paper_id FROM paper_samples ORDER BY 1").fetchall()
        # a reader job on other settings (every paper, another estimator) keeps what the scores were made with
        other = settings.replace(papers="all", estimator="hf:smollm2-135m")
        seen = _Seen()
        done = run_job(other, _job("validate"), RunOptions(),
                       open_store=lambda: nullcontext(store), observer=seen)
        run = seen.runs[0]
        assert (run.estimator, run.preprocessor, run.whence) == ("offline", "rules",
                                                                  "the setup this store was scored with")
        assert [(p,) for p in run.paper_ids or ()] == sample  # the sample is read back, not drawn again
        assert store.con.execute("SELECT paper_id FROM paper_samples ORDER BY 1").fetchall() == sample
        assert done.status == "ok"
        # a named spec that was never scored is not matched loosely to another id of its kind; it is refused before
        # the run is recorded (issue 51: a refusal changes nothing)
        runs = store.scalar("SELECT count(*) FROM runs")
        with pytest.raises(SetupError, match="no scores with estimator hf:smollm2-135m"):
            run_job(other, _job("validate"), RunOptions(estimator="hf:smollm2-135m"),
                    open_store=lambda: nullcontext(store))
        assert store.scalar("SELECT count(*) FROM runs") == runs
    finally:
        store.close()


def _job(name: str) -> Any:
    from grebench.pipeline import Job

    return Job.of(name)


#: Where the setup may be picked from options and settings, the sample table read, and the resolver called.
RESOLVER = {"pipeline/_resolve.py", "pipeline/_check.py", "pipeline/_sample.py", "pipeline/_runner.py",
            "pipeline/_jobs.py", "settings.py"}
SETUP_FIELDS = {"estimator", "preprocessor", "papers", "proxy_estimator", "local_judges"}
#: Where a setting of the setup (estimator, preprocessor, proxy, sample, judges) is read: the resolver alone (issue 49:
#: the setup check and the sample's sizing ask it too).
SETUP_READERS = {"pipeline/_resolve.py", "settings.py"}
SECTION_KEYS = {section.key for section in SECTIONS}
RESOLVER_CALLS = {"resolve_run", "resolve_setup", "draw_sample", "recorded_sample", "scored_setups", "chosen",
                  "papers_size"}


def _modules() -> list[tuple[str, ast.Module]]:
    return [(str(path.relative_to(PACKAGE)), ast.parse(path.read_text(encoding="utf-8")))
            for path in sorted(PACKAGE.rglob("*.py"))]


def test_no_module_but_the_resolver_picks_the_setup_from_settings() -> None:
    offenders = []
    for name, tree in _modules():
        if name in SETUP_READERS:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
                    "listed", "value") and node.args and isinstance(node.args[0], ast.Constant) and \
                    node.args[0].value in SETUP_FIELDS:  # settings.listed("local_judges")
                offenders.append(f"{name}:{node.lineno} {ast.unparse(node)}")
            if not (isinstance(node, ast.Attribute) and node.attr in SETUP_FIELDS):
                continue
            owner = node.value  # settings.scoring.estimator (a section) or settings.estimator
            if isinstance(owner, ast.Attribute) and owner.attr in SECTION_KEYS:
                owner = owner.value
            if (isinstance(owner, ast.Name) and owner.id in {"settings", "s"}) or \
                    (isinstance(owner, ast.Attribute) and owner.attr == "settings"):
                offenders.append(f"{name}:{node.lineno} {ast.unparse(node)}")
    assert offenders == [], "resolve the setup in grebench/pipeline/_resolve.py and read ctx.resolved: " + \
        ", ".join(offenders)


def test_no_stage_or_command_calls_the_resolver_itself() -> None:
    # serve's plan states the score job's setup; a snapshot's rebuild reads the sample of its own temporary store
    allowed = RESOLVER | {"pipeline/__init__.py", "cli/_plan.py", "pipeline/_rebuild.py"}
    offenders = []
    for name, tree in _modules():
        if name in allowed:
            continue
        for node in ast.walk(tree):
            called = node.func if isinstance(node, ast.Call) else None
            ident = getattr(called, "id", None) or getattr(called, "attr", None)
            if ident in RESOLVER_CALLS:
                offenders.append(f"{name}:{node.lineno} {ident}()")
    assert offenders == [], ", ".join(offenders)


def test_no_stage_replaces_the_run() -> None:
    """Issue 49: the run is set once, by the runner; a stage that assigned ``ctx.run`` (as the score stage did, with
    the ids it scored) would make the stages after it read something a job that only reads never sees."""
    offenders = []
    for name, tree in _modules():
        if name == "pipeline/_runner.py":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Attribute) and t.attr == "run" and isinstance(t.value, ast.Name)
                    and t.value.id == "ctx" for t in node.targets):
                offenders.append(f"{name}:{node.lineno}")
    assert offenders == [], ", ".join(offenders)


def test_the_sample_table_is_read_only_by_the_resolver_and_the_boards_report() -> None:
    allowed = {"pipeline/_sample.py", "scoring/_boards.py"}  # a board says which papers it covers
    offenders = [name for name, _tree in _modules() if name not in allowed and not name.startswith("store/")
                 and "FROM paper_samples" in (PACKAGE / name).read_text(encoding="utf-8")]
    assert offenders == []


def test_a_fast_proxy_scored_beside_is_never_the_readers_default(store: Any) -> None:
    from grebench.pipeline._resolve import record_scored
    from grebench.scoring import ScoredSetup

    main = ScoredSetup("hf:smollm2-135m", "rules", "hf:smollm2-135m@1234abcd:dtype=bfloat16", "rules-v6")
    proxy = ScoredSetup("offline", "rules", "offline:wb-bigram:corpus=ab12", "rules-v6")
    record_scored(store, main, "run-1")
    record_scored(store, proxy, "run-1", role="proxy")  # scored after the main one, in the same job
    assert scored_setups(store) == main
    assert scored_setups(store, "offline") == scored_setups(store, proxy.estimator_id) == proxy  # named: found
    assert scored_setups(store, "hf:smollm2-135m", "rules-v6") == main
    assert scored_setups(store, "hf:smollm2") is None and scored_setups(store, "hf") is None  # equality only

"""Every stage fingerprint is composed from its declared inputs (issue 61): each stage that may be skipped declares
the settings it reads (:class:`grebench.settings.StageInputs`); running it with settings that record every read
fails on one declared neither as an input nor as operational; changing a declared input changes the fingerprint,
changing an operational one does not.

The stages are run as the runner runs them (``fingerprint``, ``run``, ``intact``) on a small scored store, with a
recording :class:`grebench.settings.Settings` (its values a :class:`tests.fakes.settings_reads.Reads` mapping:
every section, property and ``value()`` reads through it).  A stage that reads the job's resolved run
(``validate``) also has what it reads of the run recorded: each part is either the stage's scope (the scored setup
and metrics it validates) or resolved from settings the stage declares as its job's inputs (the fast proxy)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grebench.bench import run_bench
from grebench.pipeline import STAGES, RunOptions, StageContext
from grebench.pipeline._resolve import record_scored
from grebench.pipeline._runner import BaseStage, Stage, check_stages
from grebench.scoring import ScoredSetup
from grebench.settings import Settings, StageInputs, load_settings
from grebench.store import Store, open_store
from tests.bench.conftest import tiny_papers
from tests.conftest import FAST_ENV
from tests.fakes.settings_reads import Reads
from tests.scoring.parts import score

#: the stages whose fingerprint the runner compares (the panel compares its own, per venue-year: tests/panel)
RUNNER_STAGES = ("boards", "validate", "site")
#: what a stage may read of the job's resolved run: "scope" for a part the stage's scope is made of (a change is a
#: new scope, so a new fingerprint), else the settings the part is resolved from, which the stage must declare as
#: its job's inputs (their resolved value in its fingerprint).  A part not listed here fails the test.
RUN_PARTS: dict[str, str | frozenset[str]] = {
    "scored_setup": "scope", "metrics": "scope", "estimator": "scope", "preprocessor": "scope",
    "proxy_setup": frozenset({"proxy_estimator"}),
    # validate reads only whether the sample's papers have abstracts, and that is in its fingerprint
    "sample": "scope",
}
#: a changed value for every declared input of the stages above (the test fails when an input is added without one)
CHANGED: dict[str, Any] = {"bootstrap_samples": 40, "seed": 11, "board_max_missing_share": 0.15,
                           "control_model": "openai/some-model", "snapshot_archive_max_mb": 1,
                           "site_contact": "board@example.org", "site_source_url": "https://example.org/src",
                           "site_data_licence": "CC BY-SA 4.0"}
#: a changed value for every declared operational setting: none may change a fingerprint
OPERATIONAL_CHANGED: dict[str, Any] = {"data_dir": "elsewhere", "site_dir": "elsewhere-site"}
PROXY = ScoredSetup("fake-proxy", "rules", "fake-proxy:v1", "")  # its preprocessor id: the main one's (below)


class _RunReads:
    """The job's resolved run, recording the name of every part a stage reads of it."""

    def __init__(self, run: Any, seen: set[str]) -> None:
        self._run, self._seen = run, seen

    def __getattr__(self, name: str) -> Any:
        self._seen.add(name)
        return getattr(self._run, name)


def _settings(tmp_path: Path, **env: str) -> Settings:
    return load_settings(env={**FAST_ENV, "GREBENCH_DATA_DIR": str(tmp_path / "data"),
                              "GREBENCH_BOOTSTRAP_SAMPLES": "30", **env})


@pytest.fixture
def scored(tmp_path: Path) -> Iterator[Store]:
    """A file store with the tiny papers benched and scored (offline, rules), the setup recorded as the score stage
    records it, and the scores of a fake fast proxy beside them (a copy of the main ones, one pair changed)."""
    settings = _settings(tmp_path)
    store = open_store(settings.db_path)
    with store.transaction():
        for paper in tiny_papers():
            store.upsert_paper(paper)
    run_id = store.start_run("score", {})
    run_bench(store, settings, run_id)
    summary = score(store, settings, run_id, ["gem-s"], "offline", "rules")
    record_scored(store, ScoredSetup("offline", "rules", summary["estimator"], summary["preprocessor"]), run_id)
    proxy = ScoredSetup(PROXY.estimator_spec, "rules", PROXY.estimator_id, summary["preprocessor"])
    record_scored(store, proxy, run_id, role="proxy")
    columns = [c for c in store.columns("scores") if c != "estimator"]
    cols = ", ".join(columns)
    store.con.execute(f"INSERT INTO scores (estimator, {cols}) SELECT ?, {cols} FROM scores WHERE estimator = ?",
                      [PROXY.estimator_id, summary["estimator"]])
    yield store
    store.con.close()


def _context(stage: Stage, store: Store, settings: Settings, recording: Settings | None = None,
             run_parts: set[str] | None = None) -> StageContext:
    """The stage's context as a job makes it: a stage that reads the run has it resolved (from ``settings``, as
    ``check_stages`` resolves a reading job's run); the stage then reads ``recording`` (default: ``settings``)."""
    ctx = StageContext(store, settings, store.start_run(stage.name, {}), RunOptions())
    if stage.needs_run(ctx):
        check_stages(ctx, [stage])
        if run_parts is not None:
            ctx.run = _RunReads(ctx.run, run_parts)  # type: ignore[assignment]
    if recording is not None:
        ctx.settings = recording
    return ctx


def _print(name: str, store: Store, settings: Settings) -> str:
    stage = STAGES[name]
    ctx = _context(stage, store, settings)
    print_ = stage.fingerprint(ctx)
    assert print_ is not None, name
    return print_[1]


def _declared(name: str) -> StageInputs:
    declared = STAGES[name].inputs
    assert declared is not None, f"the {name} stage has a fingerprint and declares no inputs"
    return declared


def test_every_stage_with_a_fingerprint_declares_its_inputs() -> None:
    """A stage whose fingerprint the runner compares (or the panel, which compares its own) declares what it reads,
    and a stage that declares inputs has a fingerprint made of them."""
    for name, stage in STAGES.items():
        has_print = type(stage).fingerprint is not BaseStage.fingerprint or name == "panel"
        assert (stage.inputs is not None) == has_print, name
    assert {n for n, s in STAGES.items() if type(s).fingerprint is not BaseStage.fingerprint} == set(RUNNER_STAGES)


@pytest.mark.parametrize("name", RUNNER_STAGES)
def test_a_stage_reads_only_the_settings_it_declares(name: str, scored: Store, tmp_path: Path) -> None:
    """The stage's fingerprint, its work and its intact check read no setting outside its declaration, and no job
    input from the settings (that value is the job's); what it reads of the resolved run is its scope or is
    resolved from its declared job inputs."""
    stage = STAGES[name]
    declared = _declared(name)
    settings = _settings(tmp_path, GREBENCH_PROXY_ESTIMATOR=PROXY.estimator_spec)
    seen: set[str] = set()
    parts: set[str] = set()
    recording = Settings(values=Reads(settings.values, seen), tables=settings.tables)
    ctx = _context(stage, scored, settings, recording, parts)
    print_ = stage.fingerprint(ctx)
    summary = dict(stage.run(ctx))
    assert print_ is not None and stage.intact(ctx, summary), summary
    assert seen, "the recorder saw no read"
    undeclared = sorted(seen - declared.names)
    assert not undeclared, f"the {name} stage read settings it does not declare: {undeclared}"
    assert not seen & set(declared.job), f"the {name} stage read its job's inputs from the settings"
    for part in sorted(parts):
        assert part in RUN_PARTS, f"the {name} stage read {part!r} of the resolved run: say what it is resolved from"
        source = RUN_PARTS[part]
        if isinstance(source, frozenset):
            assert source <= set(declared.job), \
                f"the {name} stage read {part!r} of the run, resolved from {sorted(source)}: undeclared job inputs"
    if name == "validate":  # the recorder saw the reads this test is about
        assert {"control_model", "bootstrap_samples", "seed"} <= seen and "proxy_setup" in parts
        assert summary["agreement"] and summary["agreement"][0]["proxy"] == PROXY.estimator_id
    if name == "site":
        assert "snapshot_archive_max_mb" in seen


@pytest.mark.parametrize("name", RUNNER_STAGES)
def test_changing_a_declared_input_changes_the_fingerprint_and_an_operational_one_does_not(
        name: str, scored: Store, tmp_path: Path) -> None:
    declared = _declared(name)
    settings = _settings(tmp_path)
    first = _print(name, scored, settings)
    assert _print(name, scored, settings) == first  # stable
    for input_name in declared.inputs:
        if input_name in declared.job:
            continue  # the job's value: below
        assert input_name in CHANGED, f"give the declared input {input_name} a changed value in CHANGED"
        value = CHANGED[input_name]
        assert value != settings.value(input_name), input_name
        assert _print(name, scored, settings.replace(**{input_name: value})) != first, \
            f"{input_name} is not in the {name} stage's fingerprint"
    for op in declared.operational:
        assert op in OPERATIONAL_CHANGED, f"give the operational setting {op} a changed value"
        value = str(tmp_path / OPERATIONAL_CHANGED[op]) if op.endswith("_dir") else OPERATIONAL_CHANGED[op]
        assert _print(name, scored, settings.replace(**{op: value})) == first, f"{op} changed the {name} print"
    assert _print(name, scored, settings.replace(llm_timeout_s=3.0)) == first  # not read at all


def test_validate_reruns_when_the_job_s_fast_proxy_or_its_scores_change(scored: Store, tmp_path: Path) -> None:
    """The proxy the report compares with is the job's (``proxy_estimator`` resolved to a scored setup): another
    proxy, none, or other scores of the same proxy give another fingerprint; a proxy setting nothing was scored with
    is no proxy."""
    settings = _settings(tmp_path)
    with_proxy = _print("validate", scored, settings.replace(proxy_estimator=PROXY.estimator_spec))
    without = _print("validate", scored, settings.replace(proxy_estimator=""))
    assert with_proxy != without
    assert _print("validate", scored, settings.replace(proxy_estimator="unscored-proxy")) == without
    scored.con.execute("UPDATE scores SET pmi = pmi + 1 WHERE estimator = ? AND rowid = (SELECT min(rowid) FROM "
                       "scores WHERE estimator = ?)", [PROXY.estimator_id, PROXY.estimator_id])
    assert _print("validate", scored, settings.replace(proxy_estimator=PROXY.estimator_spec)) != with_proxy
    assert _print("validate", scored, settings.replace(proxy_estimator="")) == without  # not the job's proxy


def test_a_declaration_names_only_settings_and_a_job_must_give_its_values(settings: Settings) -> None:
    with pytest.raises(KeyError, match="nosuch"):
        StageInputs(("seed", "nosuch"))
    with pytest.raises(ValueError, match="both"):
        StageInputs(("seed",), operational=("seed",))
    with pytest.raises(ValueError, match="not inputs"):
        StageInputs(("seed",), job=("proxy_estimator",))
    declared = StageInputs(("seed", "proxy_estimator"), job=("proxy_estimator",))
    with pytest.raises(KeyError, match="proxy_estimator"):
        settings.inputs(declared)
    assert settings.inputs(declared, {"proxy_estimator": "p"}) == {"seed": settings.seed, "proxy_estimator": "p"}

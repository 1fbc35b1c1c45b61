"""The panel's fingerprint is made of its declared inputs (issue 49): a panel run reads no setting it did not
declare, and changing any declared input runs the panel again instead of reusing stale results."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from grebench.panel import _state, run_panel
from grebench.settings import SETTINGS, Settings
from grebench.store import Store
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.settings_reads import Reads, undeclared_reads
from tests.panel.builders import UNSCORED, VENUE, build_venue
from tests.panel.test_llm_judge import longer_reply


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(reply=longer_reply) as s:
        yield s


def _values(settings: Settings, url: str) -> tuple[dict[str, Any], dict[str, Any]]:
    values = {**settings.values, "bootstrap_samples": 20, "llm_max_retries": 0, "exam_pairs": 6, "debate_rounds": 1}
    tables = {"judges": [{"name": "jx", "model": "openai/fake-model", "api_base": url, "family": "x"}]}
    return values, tables


def test_the_declared_inputs_are_settings() -> None:
    declared = {s.name for s in SETTINGS}
    for name in (*_state.INPUTS, *_state.LOCAL_JUDGE_INPUTS, *_state.OPERATIONAL):
        assert name in declared or isinstance(getattr(Settings, name, None), property), name
    assert not set(_state.INPUTS + _state.LOCAL_JUDGE_INPUTS) & set(_state.OPERATIONAL)


def test_a_panel_run_reads_only_declared_settings(server: FakeOpenAIServer, settings: Settings,
                                                  store: Store) -> None:
    """Every setting the panel reads (reference judges, an LLM judge at a fake endpoint, debates, the exam,
    the rankings) is a declared input or declared operational: a new setting read by the panel fails here until it
    is put in the fingerprint or said not to change results."""
    build_venue(store, {"llm-x": "x", "llm-y": "y"})
    values, tables = _values(settings, server.url)
    seen: set[str] = set()
    summary = run_panel(store, Settings(values=Reads(values, seen), tables=tables), None, **UNSCORED)
    assert summary["votes"] > 0 and server.chat_requests  # the LLM judge was asked: its reads are in `seen`
    assert not undeclared_reads(seen), f"the panel read settings it does not declare: {undeclared_reads(seen)}"
    assert {"seed", "exam_pairs", "exam_llm_pairs", "bootstrap_samples"} <= seen  # the recorder saw the reads


#: a changed value for each declared input (the test fails when an input is added without one here); one of
#: ``_state.JOB_INPUTS`` is the job's value passed to the panel, not a setting
CHANGED: dict[str, Any] = {
    "seed": 7, "exam_pairs": 8, "exam_llm_pairs": 4, "panel_pairs_per_paper": 2, "panel_llm_pairs_per_paper": 1,
    "bootstrap_samples": 25, "debate_rounds": 0, "judges_see_machine_metrics": True,
    "local_judges": ("smollm2-135m",),
}
LOCAL_CHANGED: dict[str, Any] = {"hf_device": "cpu", "hf_dtype": "bfloat16", "local_streams": 3}


def test_changing_any_declared_input_changes_the_fingerprint(settings: Settings, store: Store) -> None:
    build_venue(store)
    assert set(CHANGED) == set(_state.INPUTS) and set(LOCAL_CHANGED) == set(_state.LOCAL_JUDGE_INPUTS)
    assert set(_state.JOB_INPUTS) <= set(_state.INPUTS)

    def print_(values: dict[str, Any], tables: dict[str, Any] | None = None,
               local_judges: tuple[str, ...] = ()) -> str:
        return _state.fingerprint(store, Settings(values=values, tables=tables or {}), VENUE, None, False, None,
                                  None, None, local_judges=local_judges)

    base = dict(settings.values)
    first = print_(base)
    assert print_(dict(base)) == first  # stable
    for name, value in CHANGED.items():
        if name in _state.JOB_INPUTS:
            assert print_(base, local_judges=value) != first, f"the job's {name} is not in the panel's fingerprint"
            continue
        assert value != base[name], name
        assert print_({**base, name: value}) != first, f"{name} is not in the panel's fingerprint"
    local = ("smollm2-135m",)
    for name, value in LOCAL_CHANGED.items():
        assert value != base[name], name
        assert print_({**base, name: value}, local_judges=local) != print_(base, local_judges=local), name
        assert print_({**base, name: value}) == first, f"{name} reran a panel that has no local judge"
    assert print_(base, {"judges": [{"name": "j", "model": "openai/x"}]}) != first
    for name in ("llm_timeout_s", "data_dir", "local_server_startup_s"):  # operational: the results stay
        assert print_({**base, name: 1.5 if name != "data_dir" else "/elsewhere"}) == first, name


def test_the_fingerprint_has_the_job_s_local_judges_not_the_setting_s(settings: Settings, store: Store) -> None:
    """What the panel used is fingerprinted: a job whose local judges differ from the setting (an option, a resolved
    run) reruns when they change, and a changed setting the job did not use reruns nothing."""
    build_venue(store)
    base = dict(settings.values)

    def print_(setting: str, job: tuple[str, ...]) -> str:
        return _state.fingerprint(store, Settings(values={**base, "local_judges": setting}), VENUE, None, False,
                                  None, None, None, local_judges=job)

    assert print_("", ("smollm2-135m",)) == print_("smollm2-135m, other", ("smollm2-135m",))
    assert print_("smollm2-135m", ()) == print_("", ())
    assert print_("smollm2-135m", ()) != print_("smollm2-135m", ("smollm2-135m",))
    # the local judge's inputs come with the job's local judge, not with the setting's
    assert print_("", ("smollm2-135m",)) != _state.fingerprint(
        store, Settings(values={**base, "hf_dtype": "bfloat16"}), VENUE, None, False, None, None, None,
        local_judges=("smollm2-135m",))


def test_flipping_exam_llm_pairs_reruns_the_panel(server: FakeOpenAIServer, settings: Settings,
                                                  store: Store) -> None:
    """The stale-results bug of issue 49: exam_llm_pairs was not in the fingerprint, so a changed value reused the
    old exam of the LLM judge."""
    build_venue(store, {"llm-x": "x", "llm-y": "y"})
    values, tables = _values(settings, server.url)
    exam = "SELECT created_at FROM judge_exams WHERE judge = 'jx'"
    run_panel(store, Settings(values=values, tables=tables), None, **UNSCORED)
    written = store.scalar(exam)
    same = run_panel(store, Settings(values=values, tables=tables), None, **UNSCORED)
    assert same["skipped_venues"] == [VENUE] and store.scalar(exam) == written
    fewer = run_panel(store, Settings(values={**values, "exam_llm_pairs": 2}, tables=tables), None, **UNSCORED)
    assert fewer["skipped_venues"] == [] and store.scalar(exam) > written  # the LLM judge's exam was taken again


def test_a_core_run_gives_every_judge_the_bounded_exam_and_reruns_when_that_changes(settings: Settings,
                                                                                  store: Store) -> None:
    """``bounded_exam`` (a core run's panel): the reference judges take the exam an LLM judge takes, at most
    ``exam_llm_pairs`` pairs per test, and the fingerprint tells the two exams apart."""
    import json

    build_venue(store, {"llm-x": "x", "llm-y": "y"})
    values = {**settings.values, "bootstrap_samples": 20, "exam_pairs": 12, "exam_llm_pairs": 2}
    pairs = "SELECT details_json FROM judge_exams WHERE judge = 'length'"
    run_panel(store, Settings(values=values), None, **UNSCORED)
    full = json.loads(store.scalar(pairs))["pairs"]
    bounded = run_panel(store, Settings(values=values), None, **UNSCORED, bounded_exam=True)
    assert bounded["skipped_venues"] == []  # not the full exam's stored results
    asked = json.loads(store.scalar(pairs))["pairs"]
    assert max(full.values()) > 2 and all(n <= 2 for n in asked.values()) and asked["consistency"] == 2
    again = run_panel(store, Settings(values=values), None, **UNSCORED, bounded_exam=True)
    assert again["skipped_venues"] == [VENUE]

"""Every command uses the setup that was scored, or says what it will run (issue 26): on a store scored with
``--estimator offline``, ``exam``, ``judge`` and ``validate`` work with ``offline`` even when the settings name a
language model, print the plan first, and the gem judge scores its exam texts with the very estimator (same corpus,
same id) that made the stored scores."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from click.testing import CliRunner

from grebench.cli import main
from grebench.pipeline import scored_setups
from grebench.scoring import RULES_ID
from grebench.store import open_store
from tests.conftest import FAST_ENV

#: The settings name the default language model; the store below is scored with the offline proxy.
LM_ENV = {**FAST_ENV, "GREBENCH_ESTIMATOR": "hf:smollm2-135m"}


@pytest.fixture(scope="module")
def offline_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("scored") / "data"
    result = CliRunner().invoke(main, ["--data-dir", str(data), "run", "--estimator", "offline", "--papers", "4"],
                                env=FAST_ENV)
    assert result.exit_code == 0, result.output
    return data


def _gem_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "gem judge" in r.getMessage()]


def test_the_store_records_the_specs_it_was_scored_with(offline_store: Path) -> None:
    store = open_store(offline_store / "grebench.duckdb", read_only=True)
    try:
        scored = scored_setups(store)
        assert scored is not None and (scored.estimator_spec, scored.preprocessor_spec) == ("offline", "rules")
        assert scored.estimator_id.startswith("offline:wb-bigram") and scored.preprocessor_id == RULES_ID
        # typed columns: a reader names the spec or the id, and both find the same setup (no LIKE, no guess)
        assert scored_setups(store, scored.estimator_id) == scored_setups(store, "offline") == scored
        assert scored_setups(store, "offline:wb") is None and scored_setups(store, "hf:smollm2-135m") is None
    finally:
        store.close()


@pytest.mark.parametrize("command", ["exam", "judge"])
def test_exam_and_judge_use_the_scored_estimator_and_say_so_first(offline_store: Path, command: str,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    result = CliRunner().invoke(main, ["--data-dir", str(offline_store), command], env=LM_ENV)
    assert result.exit_code == 0, result.output
    first = result.output.splitlines()[0]
    assert first.startswith(f"{command}: the gem judge scores with evaluation LM offline"), first
    assert "(the setup this store was scored with)" in first and "loads no model" in first
    assert "smollm2" not in result.output  # the settings' language model is neither pulled nor named
    assert not (offline_store / "models" / "smollm2-135m").exists()
    assert _gem_warnings(caplog) == []  # the exam texts were scored with the stored scores' estimator


def test_a_named_estimator_wins_and_is_said(offline_store: Path) -> None:
    result = CliRunner().invoke(main, ["--data-dir", str(offline_store), "exam", "--estimator", "vllm:"],
                                env=LM_ENV)
    assert result.exit_code == 2 and "--estimator = 'vllm:'" in result.output  # checked before the plan
    assert "the gem judge scores" not in result.output


def test_validate_reads_the_scored_setup(offline_store: Path) -> None:
    result = CliRunner().invoke(main, ["--data-dir", str(offline_store), "validate", "--json"], env=LM_ENV)
    assert result.exit_code == 0, result.output
    assert '"estimator": "offline:wb-bigram' in result.output


def test_a_fresh_run_scores_the_exam_texts_without_a_corpus_mismatch(tmp_path: Path,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    result = CliRunner().invoke(main, ["--data-dir", str(tmp_path / "d"), "run", "--estimator", "offline",
                                       "--papers", "4", "--json"], env=FAST_ENV)
    assert result.exit_code == 0, result.output
    assert _gem_warnings(caplog) == [], _gem_warnings(caplog)
    panel = json.loads(result.stdout)["stages"]["panel"]
    assert panel["estimator_calls"] > 0  # the exam texts were scored (by the stored scores' estimator), not skipped


def test_site_build_reads_the_stored_boards_and_loads_no_model(offline_store: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["--data-dir", str(offline_store), "site", "build", "--out",
                                       str(tmp_path / "site"), "--json"], env=LM_ENV)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["boards"] > 0
    assert "offline word model" in (tmp_path / "site" / "index.html").read_text()  # the scored estimator's words
    assert not (offline_store / "models" / "smollm2-135m").exists()

"""Issue 32: arranging the code differently changes no published number.

A small offline run (the bundled ICLR 2026 sample, 8 seeded papers, the offline word model, the built-in judges),
then the commands that read its scores (validate, exam, judge) on the same store: boards, validation, the panel and
the sample must equal what the code published before the setup was resolved in one place
(``tests/data/golden/run_offline_8.json``, written by the code at commit f12f8f9 with ``--regenerate``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from grebench.cli import main
from grebench.store import open_store
from tests.conftest import DATA_DIR, FAST_ENV
from tests.pipeline._numbers import published_numbers

GOLDEN = DATA_DIR / "golden" / "run_offline_8.json"


def _invoke(env: dict[str, str], *args: str) -> dict[str, Any]:
    result = CliRunner().invoke(main, [*args, "--json"], env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.stdout))


def _numbers(data_dir: Path) -> dict[str, Any]:
    store = open_store(data_dir / "grebench.duckdb", read_only=True)
    try:
        return published_numbers(store)
    finally:
        store.close()


def test_run_then_readers_publish_the_same_numbers(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    env = {**FAST_ENV, "GREBENCH_DATA_DIR": str(tmp_path / "data"), "GREBENCH_PAPERS": "8"}
    _invoke(env, "run")
    after_run = _numbers(tmp_path / "data")
    for command in (["validate"], ["exam"], ["judge"]):
        _invoke(env, *command)
    after_readers = _numbers(tmp_path / "data")
    if request.config.getoption("--regenerate-golden", default=False):
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(json.dumps({"run": after_run, "readers": after_readers}, indent=1, sort_keys=True) + "\n",
                          encoding="utf-8")
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert len(after_run["sample"]) == 8 and after_run["boards"] and after_run["panel"] and after_run["validation"]
    for part in golden["run"]:
        assert after_run[part] == golden["run"][part], f"the run published other {part}"
        assert after_readers[part] == golden["readers"][part], f"validate/exam/judge left other {part}"

"""The boards' fingerprint is made of their declared inputs (issue 49): computing the boards reads no setting
outside their declaration (:data:`BOARDS`: the inputs :data:`BOARD_INPUTS`, nothing operational), and changing any
input changes the fingerprint (the board stage runs again).  The stage as the runner runs it:
``tests/pipeline/test_fingerprint_reads.py``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from grebench.scoring import boards_fingerprint, compute_boards
from grebench.scoring._boards import BOARD_INPUTS, BOARDS
from grebench.settings import Settings, load_settings
from grebench.store import Store
from tests.conftest import FAST_ENV
from tests.fakes.settings_reads import Reads
from tests.store.test_snapshot import scored  # noqa: F401  (fixture)

CHANGED: dict[str, Any] = {"bootstrap_samples": 40, "seed": 11, "board_max_missing_share": 0.15}


def test_computing_the_boards_reads_only_declared_settings_and_each_changes_the_print(
        scored: Store, tmp_path: Path) -> None:  # noqa: F811
    settings = load_settings(env={**FAST_ENV, "GREBENCH_DATA_DIR": str(tmp_path / "d"),
                                  "GREBENCH_BOOTSTRAP_SAMPLES": "30"})
    seen: set[str] = set()
    summary = compute_boards(scored, Settings(values=Reads(settings.values, seen), tables={}))
    assert summary["boards"], summary
    assert set(BOARD_INPUTS) & seen and not seen - BOARDS.names, sorted(seen)
    assert set(CHANGED) == set(BOARD_INPUTS)  # every declared input has a changed value below
    first = boards_fingerprint(scored, settings)
    assert boards_fingerprint(scored, settings) == first
    for name, value in CHANGED.items():
        assert value != settings.values[name], name
        assert boards_fingerprint(scored, settings.replace(**{name: value})) != first, name
    assert boards_fingerprint(scored, settings.replace(llm_timeout_s=3.0)) == first  # not an input

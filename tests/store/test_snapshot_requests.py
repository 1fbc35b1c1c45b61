"""A snapshot requested while `grebench serve` holds the store is cut, or fails loudly; never dropped silently."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import date
from pathlib import Path

from grebench.pipeline import SnapshotStage, StageContext
from grebench.settings import load_settings
from grebench.store import Store
from tests.conftest import FAST_ENV
from tests.store.test_snapshot import scored  # noqa: F401  (fixture)


def test_requests_by_slug_name_or_id_are_cut_and_unknown_ones_recorded(
        scored: Store, tmp_path: Path) -> None:  # noqa: F811
    settings = load_settings(env={**FAST_ENV, "GREBENCH_DATA_DIR": str(tmp_path / "src")})
    # the command line writes what the user typed (here while the store is held, as `serve` would hold it)
    held = subprocess.run([sys.executable, "-m", "grebench.cli", "snapshot", "export", "--venue-year",
                           "Test-cc-2019-Conference", "--venue-year", "NoSuch-2031",
                           "--data-dir", str(tmp_path / "src")],
                          capture_output=True, text=True, timeout=120, env={**os.environ, **FAST_ENV})
    assert held.returncode == 0 and "requested" in held.stderr, held.stderr
    assert sorted(json.loads(settings.snapshot_requests_path.read_text())) == ["NoSuch-2031", "Test-cc-2019-Conference"]
    summary = SnapshotStage(today=date(2019, 6, 1)).run(StageContext(scored, settings, "run-1"))
    assert [c["reason"] for c in summary["cut"]] == ["on-demand"]
    assert (Path(summary["cut"][0]["path"]) / "manifest.json").is_file()
    failures = scored.rows("SELECT stage, item, reason AS error FROM run_failures WHERE run_id = 'run-1'")
    assert [(f["stage"], f["item"]) for f in failures] == [("snapshot", "NoSuch-2031")]
    assert "no venue-year" in failures[0]["error"]
    assert not settings.snapshot_requests_path.exists()

"""`import grebench` (and every stage's package) must not drag in heavy or networked libraries; Ray only with
`--executor ray`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import FAST_ENV

HEAVY = ("torch", "litellm", "gradio", "openreview", "transformers", "datasketch", "ray")


def test_importing_the_package_and_stages_imports_no_heavy_library() -> None:
    code = (
        "import sys, grebench, grebench.cli, grebench.settings, grebench.store, grebench.ingest, "
        "grebench.bench, grebench.scoring, grebench.site, grebench.scheduler, grebench.models, grebench.runtime\n"
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"imported at package import time: {out.stdout.strip()}"


def test_a_run_without_the_ray_executor_never_imports_ray(tmp_path: Path) -> None:
    """`grebench run` (ingest, bench, score, validate, panel, site) with the default executor builds its estimators
    without importing Ray, whether Ray is installed or not."""
    code = ("import sys\n"
            "from grebench.cli import main\n"
            "try:\n"
            "    main(['run', '--papers', '3', '--json'], standalone_mode=False)\n"
            "finally:\n"
            "    print('RAY-IMPORTED' if 'ray' in sys.modules else 'NO-RAY', file=sys.stderr)\n")
    env = {**os.environ, **FAST_ENV, "GREBENCH_DATA_DIR": str(tmp_path / "data"), "GREBENCH_VALIDATION": "core"}
    env.pop("GREBENCH_EXECUTOR", None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout)["resolved"]["estimator"] == "offline"
    assert out.stderr.strip().endswith("NO-RAY"), out.stderr[-500:]

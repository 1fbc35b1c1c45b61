"""`import grebench` (and every stage's package) must not drag in heavy or networked libraries."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("torch", "litellm", "gradio", "openreview", "transformers", "datasketch")


def test_importing_the_package_and_stages_imports_no_heavy_library() -> None:
    code = (
        "import sys, grebench, grebench.cli, grebench.settings, grebench.store, grebench.ingest, "
        "grebench.bench, grebench.scoring, grebench.site, grebench.scheduler, grebench.models, grebench.runtime\n"
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"imported at package import time: {out.stdout.strip()}"

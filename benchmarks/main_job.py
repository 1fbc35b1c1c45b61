"""Wall time of the main job (`grebench run`) on the bundled data, per stage, first run vs immediate rerun.

Usage: .venv/bin/python benchmarks/main_job.py [--source bundled] [--keep DIR]

Runs the real CLI twice in a fresh data directory and prints both runs side by side, the rerun/first ratio,
and the estimator and LLM calls of the rerun (which should be zero). Ends with one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _run(data_dir: Path, source: str) -> tuple[float, dict]:
    env = {**os.environ, "GREBENCH_DATA_DIR": str(data_dir)}
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "grebench.cli", "run", "--source", source, "--json"],
                         env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if out.returncode not in (0, 1):
        sys.exit(f"grebench run failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return wall, json.loads(out.stdout)


def _calls(summary: dict) -> dict[str, int]:
    stages = summary.get("stages", {})
    llm = sum(int(stages.get(name, {}).get("calls_made", 0)) for name in ("bench", "score", "panel"))
    return {"estimator_calls": int(stages.get("score", {}).get("estimator_calls", 0)), "llm_calls": llm}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default="bundled")
    parser.add_argument("--keep", type=Path, default=None, help="Data directory to use and keep.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = args.keep or Path(tmp) / "data"
        first_wall, first = _run(data_dir, args.source)
        rerun_wall, rerun = _run(data_dir, args.source)
    stages = list(first.get("seconds", {}))
    print(f"{'stage':<12}{'first run (s)':>15}{'rerun (s)':>12}")
    for stage in stages:
        print(f"{stage:<12}{first['seconds'][stage]:>15.2f}{rerun['seconds'].get(stage, 0):>12.2f}")
    print(f"{'wall':<12}{first_wall:>15.2f}{rerun_wall:>12.2f}")
    result = {
        "first_run_s": round(first_wall, 2), "rerun_s": round(rerun_wall, 2),
        "rerun_ratio": round(rerun_wall / first_wall, 3),
        "first_stage_s": first.get("seconds", {}), "rerun_stage_s": rerun.get("seconds", {}),
        "rerun": _calls(rerun), "first": _calls(first),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()

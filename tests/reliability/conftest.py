"""Reliability suite fixtures: a small archive cut from the bundled sample, config files, CLI runs, fuzz profiles.

Markers: ``fuzz`` (property-based tests; CI runs the small ``ci`` Hypothesis profile), ``long`` (only with
``GREBENCH_RELIABILITY_LONG=1``: the benchmark-size runs). Profiles: ``ci`` (default) and ``long``
(``--hypothesis-profile=long``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from grebench.ingest._archive import bundled_path

settings.register_profile("ci", max_examples=40, deadline=2000, derandomize=True, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("long", max_examples=3000, deadline=10_000, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

SMALL_PAPERS = 20  # bundled papers in the small archive (a full run on it takes ~8 s on 2 cores)
LONG = os.environ.get("GREBENCH_RELIABILITY_LONG") == "1"


def pytest_configure(config: pytest.Config) -> None:
    """Register this suite's markers (the project runs with --strict-markers)."""
    config.addinivalue_line("markers", "fuzz: property-based fuzzing (bounded examples in CI)")
    config.addinivalue_line("markers", "long: benchmark-size reliability runs (GREBENCH_RELIABILITY_LONG=1)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip ``long`` tests unless asked for."""
    if LONG:
        return
    skip = pytest.mark.skip(reason="long run: set GREBENCH_RELIABILITY_LONG=1")
    for item in items:
        if "long" in item.keywords:
            item.add_marker(skip)


def write_small_archive(path: Path, papers: int = SMALL_PAPERS) -> Path:
    """The first ``papers`` lines of the bundled sample as an archive file."""
    with bundled_path().open(encoding="utf-8") as src:
        lines = [next(src) for _ in range(papers)]
    path.write_text("".join(lines), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def small_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An archive of the first :data:`SMALL_PAPERS` bundled papers."""
    return write_small_archive(tmp_path_factory.mktemp("archive") / "small.jsonl")


def toml_value(value: Any) -> str:
    """A scalar as TOML."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(value)


def write_config(path: Path, data_dir: Path, llm_url: str | None = None, candidate: str = "fakellm",
                 **values: Any) -> Path:
    """A settings TOML: small bootstrap and exam, optional LLM candidate on ``llm_url`` (cutoff before the data)."""
    base = {"data_dir": str(data_dir), "bootstrap_samples": 50, "exam_pairs": 10, **values}
    lines = [f"{k} = {toml_value(v)}" for k, v in base.items()]
    if llm_url:
        lines += ["", "[[candidates]]", f'name = "{candidate}"', 'model = "openai/fake-model"',
                  f'api_base = "{llm_url}"', 'cutoff = "2019-06-01"']
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def cli_env(config: Path) -> dict[str, str]:
    """The environment of a CLI subprocess: this config, no inherited data dir."""
    env = {k: v for k, v in os.environ.items() if k not in ("GREBENCH_DATA_DIR", "GREBENCH_CONFIG")}
    return {**env, "GREBENCH_CONFIG": str(config), "PYTHONUNBUFFERED": "1"}


def cli(config: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """Run ``grebench ARGS`` to the end."""
    return subprocess.run([sys.executable, "-m", "grebench.cli", *args], env=cli_env(config), capture_output=True,
                          text=True, timeout=timeout)


def cli_popen(config: Path, *args: str, stderr: Path) -> subprocess.Popen[bytes]:
    """Start ``grebench ARGS`` (stdout dropped, stderr to a file)."""
    with stderr.open("wb") as err:
        return subprocess.Popen([sys.executable, "-m", "grebench.cli", *args], env=cli_env(config),
                                stdout=subprocess.DEVNULL, stderr=err)


@contextmanager
def tmpfs(path: Path, size: str, what: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (mount's ``size=``) mounted on ``path`` (made here), unmounted afterwards; the test is
    skipped, saying ``what`` is not tested, where mounting is not permitted."""
    path.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip() or done.returncode}): {what} skipped")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)

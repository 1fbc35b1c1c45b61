"""The tiny checkpoint as a session fixture; the builders live in :mod:`tests.scoring.tiny_builders`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.scoring.tiny_builders import (  # noqa: F401  (re-exported for the tests)
    BUNDLED,
    CHAT_TEMPLATE,
    SPECIAL,
    build_tiny_llama,
    bundled_papers,
    judgment_corpus,
    rules_lines,
    sample_requests,
)


@pytest.fixture(scope="session")
def tiny_llama_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny checkpoint, built once per test session (import this fixture into a test module to use it)."""
    return build_tiny_llama(tmp_path_factory.mktemp("tiny-llama") / "ckpt")

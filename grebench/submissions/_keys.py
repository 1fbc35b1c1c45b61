"""A submitted key in the process environment for the duration of one evaluation, never longer."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from grebench.llm import SUBMISSION_KEY_PREFIX


@contextmanager
def key_in_env(sub_id: str, key: str | None) -> Iterator[str | None]:
    """A submitted key in a process-only environment variable for the duration of one evaluation.

    The LLM client reads keys from the variable a candidate names; the variable is removed afterwards and its
    name (never the key) is all that reaches the request cache.
    """
    if not key:
        yield None
        return
    name = f"{SUBMISSION_KEY_PREFIX}{sub_id.upper()}"
    os.environ[name] = key
    try:
        yield name
    finally:
        os.environ.pop(name, None)

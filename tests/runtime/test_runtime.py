"""The runtime package: light to import, and its pool of servers resolves nothing until a server is asked for."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from grebench.bench import CANDIDATE_KINDS
from grebench.runtime import LOCAL_CONTEXT_TOKENS, LocalModel, LocalServers
from grebench.settings import Settings


def test_importing_the_runtime_and_probing_the_machine_stays_light() -> None:
    """No torch, transformers, gguf or litellm: a server's process or a dtype probe imports them, not the import."""
    code = ("import sys, grebench.runtime as r; r.usable_cores(); r.cpu_flags(); r.default_device('cpu'); "
            "r.free_port(); print([x for x in ('torch', 'transformers', 'gguf', 'litellm') if x in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_local_model_is_cached_by_checkpoint_and_dtype_and_sized_for_the_default_context(
        settings: Settings) -> None:
    model = LocalModel("smollm2-135m", Path("/models/smollm2-135m"), "smollm2-135m", "cuda", "bfloat16")
    assert model.endpoint_id == "local:smollm2-135m:bfloat16"
    s = settings.replace(bench_concurrency=3)
    assert model.concurrency(s) == model.concurrency(s, LOCAL_CONTEXT_TOKENS) == (3, "cuda: bench_concurrency = 3")


def test_a_local_candidate_defaults_to_the_runtime_s_context(settings: Settings) -> None:
    """The bench's ``kind = "local"`` and the pool agree on the context a call fills unless it says otherwise."""
    candidate = CANDIDATE_KINDS.get("local").obj.parse(
        {"name": "tiny", "kind": "local", "model": "./ckpt", "cutoff": "2024-01-01"}, "test", settings)
    assert candidate.params["context_tokens"] == LOCAL_CONTEXT_TOKENS


def test_a_pool_that_started_nothing_closes_without_work(settings: Settings) -> None:
    with LocalServers(settings) as servers:
        assert servers.running == []
    assert servers.running == []

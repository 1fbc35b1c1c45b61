"""``executor = ray`` for local candidates (issue 61): the batches of the plan made here are decoded on Ray actors of a
local Ray (two CPUs, one torch thread each) and give the texts and records of a one-thread in-process run; a stop
after the first batch keeps what arrived and a rerun decodes only the rest."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grebench import stop
from grebench.bench import run_bench
from grebench.runtime import LocalGenerator, plan_batches
from grebench.settings import Settings
from grebench.store import Store
from tests.bench.conftest import with_candidates
from tests.scoring.tiny_llama import tiny_llama_dir  # noqa: F401

ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install -e '.[hf,ray]')")
torch = pytest.importorskip("torch")

pytestmark = pytest.mark.slow

GENERATIONS = """SELECT paper_id, status, text, tokens_in, tokens_out, flags_json FROM generations
                 WHERE candidate = 'tiny' ORDER BY paper_id"""


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture
def two_a_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plans of two prompts a batch (four papers: two batches, one for each actor)."""
    monkeypatch.setattr(LocalGenerator, "plan", lambda self, prompts, new, budget: plan_batches(
        {k: len(v) for k, v in prompts.items()}, new, self.kv_bytes_per_token, budget, self.dtype, max_batch=2))


@pytest.fixture
def one_thread() -> Iterator[None]:
    """This process decodes on one torch thread, as each actor does (thread counts change float sums)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _tiny(settings: Settings, tiny_llama_dir: Path, executor: str) -> Settings:  # noqa: F811
    entry = {"name": "tiny", "kind": "local", "model": str(tiny_llama_dir), "cutoff": "2019-01-01",
             "params": {"max_tokens": 24, "context_tokens": 4096}}
    return with_candidates(settings, entry, hf_dtype="float32", hf_device="cpu", executor=executor)


def _rows(store: Store) -> list[dict[str, Any]]:
    rows = store.rows(GENERATIONS)
    for r in rows:
        flags = json.loads(r.pop("flags_json"))
        r["generation"] = {k: v for k, v in flags["generation"].items()}
    return rows


def test_local_batches_on_ray_actors_write_the_in_process_texts(
        ray_cluster: None, tiny_store: Store, settings: Settings, tiny_llama_dir: Path,  # noqa: F811
        two_a_batch: None, one_thread: None, monkeypatch: pytest.MonkeyPatch) -> None:
    import grebench.runtime._ray_generate as ray_generate

    pids: list[list[int]] = []
    real = ray_generate.generate_on_ray

    def recorded(*args: Any, **kwargs: Any) -> list[int]:
        pids.append(real(*args, **kwargs))
        return pids[-1]

    monkeypatch.setattr("grebench.runtime.generate_on_ray", recorded)
    local = run_bench(tiny_store, _tiny(settings, tiny_llama_dir, "local"), None, ["tiny"])
    expected = _rows(tiny_store)
    tiny_store.con.execute("DELETE FROM generations WHERE candidate = 'tiny'")
    on_ray = run_bench(tiny_store, _tiny(settings, tiny_llama_dir, "ray"), None, ["tiny"])
    assert on_ray["calls_made"] == local["calls_made"] == 4 and on_ray["failed"] == 0
    got = _rows(tiny_store)
    assert got == expected  # texts, token counts, and each generation's record (plan, batch, engine, dtype)
    assert len({r["generation"]["batch_plan"] for r in got}) == 1 and {r["generation"]["batches"] for r in got} == {2}
    [made] = pids
    assert len(made) == 2 and os.getpid() not in made  # both batches decoded in actors, not here


def test_a_stop_after_the_first_batch_on_ray_keeps_it_and_a_rerun_decodes_the_rest(
        ray_cluster: None, tiny_store: Store, settings: Settings, tiny_llama_dir: Path,  # noqa: F811
        two_a_batch: None, monkeypatch: pytest.MonkeyPatch) -> None:
    import grebench.runtime._ray_generate as ray_generate

    s = _tiny(settings, tiny_llama_dir, "ray")
    written: list[list[str]] = []
    real = ray_generate.generate_on_ray

    def stop_after_first(*args: Any, **kwargs: Any) -> list[int]:
        on_batch = args[8]

        def each(batch: list[Any]) -> None:
            on_batch(batch)
            written.append([g.key for g in batch])
            if len(written) == 1:
                stop.request_stop(signal.SIGTERM)

        return real(*args[:8], each, *args[9:], **kwargs)

    monkeypatch.setattr("grebench.runtime.generate_on_ray", stop_after_first)
    try:
        with pytest.raises(stop.Interrupted):
            run_bench(tiny_store, s, None, ["tiny"])
    finally:
        stop.reset()
    texts = {r["paper_id"] for r in tiny_store.rows(GENERATIONS)}
    assert len(written) == 1 and texts == set(written[0])  # the batch that arrived was written, nothing else
    summary = run_bench(tiny_store, s, None, ["tiny"])
    assert summary["cached"] == 2 and summary["calls_made"] == 2
    assert len(written) == 2 and not set(written[1]) & set(written[0])
    assert len({r["paper_id"] for r in tiny_store.rows(GENERATIONS)}) == 4

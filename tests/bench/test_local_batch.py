"""``kind = "local"`` reviews decoded in this process in a deterministic batch plan across papers (issue 47 §2)."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from contextlib import contextmanager
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


def test_the_plan_sorts_by_length_and_cuts_by_bytes_and_rows() -> None:
    lengths = {"c": 300, "a": 100, "b": 100, "d": 900, "e": 50}
    plan = plan_batches(lengths, max_new_tokens=100, kv_bytes_per_token=1000, budget_bytes=2_000_000,
                        dtype="float32", max_batch=16)
    # sorted by length, then key; four rows padded to 300 + 100 tokens take 1.6 MB, and with the 900-token prompt
    # five rows would take 5 MB: it decodes on its own
    assert plan.batches == (("e", "a", "b", "c"), ("d",))
    assert plan.where("c") == (0, 4) and plan.where("d") == (1, 1)
    assert plan_batches(lengths, 100, 1000, 2_000_000, "float32", max_batch=2).batches == \
        (("e", "a"), ("b", "c"), ("d",))
    # the plan depends on its inputs only: the same inputs, the same id; another budget, another plan
    again = plan_batches(dict(reversed(list(lengths.items()))), 100, 1000, 2_000_000, "float32", max_batch=16)
    assert again == plan and again.id == plan.id
    assert plan_batches(lengths, 100, 1000, 10_000_000, "float32").id != plan.id


class Recorded:
    """A progress display that records its tasks: (label, total, unit, every advance)."""

    def __init__(self) -> None:
        self.tasks: list[tuple[str, int | None, str, list[int]]] = []

    @contextmanager
    def task(self, label: str, total: int | None = None, unit: str = "items") -> Iterator[Any]:
        steps: list[int] = []
        self.tasks.append((label, total, unit, steps))

        class Task:
            def advance(self, n: int = 1) -> None:
                steps.append(n)

            def set_total(self, total: int | None) -> None:
                pass

        yield Task()


def _tiny(settings: Settings, tiny_llama_dir: Path, **extra: Any) -> Settings:  # noqa: F811
    entry = {"name": "tiny", "kind": "local", "model": str(tiny_llama_dir), "cutoff": "2019-01-01",
             "params": {"max_tokens": 24, "context_tokens": 4096}}
    return with_candidates(settings, entry, hf_dtype="float32", hf_device="cpu", **extra)


def _texts(store: Store) -> dict[str, str]:
    return {r["paper_id"]: r["text"] for r in store.rows(
        "SELECT paper_id, text FROM generations WHERE candidate = 'tiny' AND status = 'ok'")}


def test_local_reviews_decode_in_one_recorded_plan_and_a_rerun_reproduces_them(
        tiny_store: Store, settings: Settings, tiny_llama_dir: Path) -> None:  # noqa: F811
    pytest.importorskip("torch")
    s = _tiny(settings, tiny_llama_dir)
    progress = Recorded()
    first = run_bench(tiny_store, s, None, ["tiny"], progress=progress)
    assert first["calls_made"] == 4 and first["failed"] == 0
    # progress in decoded token slots, advanced step by step (its ETA is the measured speed), never ahead of work
    [(label, total, _unit, steps)] = [t for t in progress.tasks if t[2] == "tokens"]
    assert "decoding 4 reviews in 1 batch" in label and total == 4 * 24 and sum(steps) == total and len(steps) > 1
    rows = tiny_store.rows("SELECT * FROM generations WHERE candidate = 'tiny' ORDER BY paper_id")
    assert len(rows) == 4 and all(r["status"] == "ok" and r["text"] and r["tokens_out"] for r in rows)
    made = [json.loads(r["flags_json"])["generation"] for r in rows]
    assert {m["engine"] for m in made} == {"transformers-generate"} and {m["dtype"] for m in made} == {"float32"}
    assert len({m["batch_plan"] for m in made}) == 1 and {m["batch_size"] for m in made} == {4}  # one batch
    assert not tiny_store.rows("SELECT * FROM llm_calls")  # no server, no call through an endpoint

    again = run_bench(tiny_store, s, None, ["tiny"])  # stored: nothing is loaded or decoded
    assert again["calls_made"] == 0 and again["cached"] == 4
    texts = _texts(tiny_store)
    tiny_store.con.execute("DELETE FROM generations WHERE candidate = 'tiny'")
    run_bench(tiny_store, s, None, ["tiny"])  # the same engine, dtype and plan: the same text
    assert _texts(tiny_store) == texts


def test_a_stop_between_batches_keeps_the_batches_done_and_a_rerun_decodes_only_the_rest(
        tiny_store: Store, settings: Settings, tiny_llama_dir: Path,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    s = _tiny(settings, tiny_llama_dir)
    monkeypatch.setattr(LocalGenerator, "plan", lambda self, prompts, new, budget: plan_batches(
        {k: len(v) for k, v in prompts.items()}, new, self.kv_bytes_per_token, budget, self.dtype, max_batch=2))
    batches: list[list[str]] = []
    real_run = LocalGenerator.run

    def run_then_stop(self: LocalGenerator, plan: Any, prompts: Any, on_batch: Any, on_step: Any = None) -> None:
        def each(batch: list[Any]) -> None:
            on_batch(batch)
            batches.append([g.key for g in batch])
            if len(batches) == 1:
                stop.request_stop(signal.SIGTERM)

        real_run(self, plan, prompts, each, on_step)

    monkeypatch.setattr(LocalGenerator, "run", run_then_stop)
    try:
        with pytest.raises(stop.Interrupted):
            run_bench(tiny_store, s, None, ["tiny"])
    finally:
        stop.reset()
    assert len(batches) == 1 and set(_texts(tiny_store)) == set(batches[0])  # the first batch was written
    summary = run_bench(tiny_store, s, None, ["tiny"])
    assert summary["cached"] == 2 and summary["calls_made"] == 2
    assert len(batches) == 2 and not set(batches[1]) & set(batches[0]) and len(_texts(tiny_store)) == 4


def test_prompts_are_prefilled_in_chunks_on_a_cpu_and_give_the_text_of_one_forward(
        tiny_llama_dir: Path) -> None:  # noqa: F811
    """A batch's prompts are read in chunks of PREFILL_CHUNK tokens on a CPU (its attention scores then never span
    the whole prompt at once): part of the plan and of each generation's record, and the greedy text of a row far
    shorter than the chunk (whole chunks of it are padding) is the text of reading the prompts in one forward."""
    pytest.importorskip("torch")
    from grebench.runtime import _generate

    gen = LocalGenerator(tiny_llama_dir, "cpu", "float32")
    prompts = {"short": gen.prompt_ids([("user", "A short review, please.")]),
               "long": gen.prompt_ids([("user", " ".join(["the method and the results"] * 60))])}
    assert len(prompts["long"]) - len(prompts["short"]) > 40
    plan = gen.plan(prompts, 12, 10 ** 9)
    assert plan.prefill_chunk == _generate.PREFILL_CHUNK
    chunked = _generate.BatchPlan(plan.batches, 12, plan.budget_bytes, plan.kv_bytes_per_token, "float32", 16)
    whole = _generate.BatchPlan(plan.batches, 12, plan.budget_bytes, plan.kv_bytes_per_token, "float32", None)
    assert len({chunked.id, whole.id}) == 2  # the chunk is part of the plan's name
    texts: dict[int | None, dict[str, str]] = {}
    for p in (chunked, whole):
        out: list[Any] = []
        gen.run(p, prompts, out.extend)
        texts[p.prefill_chunk] = {g.key: g.text for g in out}
        assert {g.provenance["prefill_chunk"] for g in out} == {p.prefill_chunk}
    assert texts[16] == texts[None] and all(texts[16].values())

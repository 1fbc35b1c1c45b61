"""Local candidates' reviews written in this process, in deterministic batches across papers (issue 47 §2).

``transformers serve`` answered one request at a time on a CPU (its continuous batching shares a decoding step
between the calls in flight, but a 2-core AVX2 EPYC still spent 202 s on 3 reviews, and 8.6 minutes with a
neighbour).  Here the prompts of every paper a candidate still has to review are read and decoded together with
``model.generate``: one left-padded batch per decoding step reads the weights once for every paper in it.

Greedy decoding in a batch is not the text of one prompt alone (the padded positions change the floating-point sums
of attention), so the batches are a *plan*, fixed before any work and recorded with every generation it made
(:class:`BatchPlan`): the prompts sorted by length (then by key), cut in order into batches whose KV cache fits
``local_batch_mib`` (prompt of the batch's longest + ``max_tokens``, per row) and holds at most
:data:`MAX_BATCH` rows.  The plan depends only on the prompts, the checkpoint's shape, ``max_tokens`` and the setting
— never on the machine's free memory or speed — so the same engine, dtype and plan give the same text on a rerun
(tested).  A batch is written as soon as it is decoded: a crash loses at most the batch in flight, and a rerun plans
what is left.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from grebench import stop
from grebench._offline import apply_offline_defaults
from grebench.runtime._load import load_causal_lm
from grebench.runtime._memory import bound_allocations, release_memory

log = logging.getLogger(__name__)

#: The engine named in every generation this module writes (the generation's provenance).
ENGINE = "transformers-generate"
#: The KV cache of a batch: allocated once at (its longest prompt + ``max_tokens``) per row, where a growing cache
#: copied every layer's keys and values at every step (14 % of a CPU's decoding time under py-spy; 10 % faster
#: static, the same tokens on the bundled prompts).
CACHE = "static"
#: At most this many prompts decode together (beyond it a 2-core CPU gains little per step and a crash loses more).
MAX_BATCH = 16
#: Prompt tokens of a batch read per forward on a CPU (transformers' ``prefill_chunk_size``).  Reading a left-padded
#: batch's prompts in one forward materialises every head's attention scores over the whole prompt: 9 rows of 1,400
#: tokens peaked at 2.80 GB for SmolLM2-135M, 1.79 GB in chunks of 512 tokens (8 % slower to prefill, decoding
#: unchanged; ``benchmarks/memory_phases.py``); 9 rows of 1,300 tokens held to AVX2: 1,639 MB in chunks of 512,
#: 1,593 MB in chunks of 256 (0.96× the time).  Part of the plan: chunking changes the sums of the attention and
#: so, rarely, a greedy token.
PREFILL_CHUNK = 256


@dataclass(frozen=True)
class BatchPlan:
    """Which prompts decode together, fixed before any decoding: ``batches`` of prompt keys, in order.

    ``rows_bytes`` is the KV-cache budget each batch was cut to, ``kv_bytes_per_token`` what one token costs in the
    model's cache at its dtype; ``id`` names the plan in every generation it made."""

    batches: tuple[tuple[str, ...], ...]
    max_new_tokens: int
    budget_bytes: int
    kv_bytes_per_token: int
    dtype: str
    prefill_chunk: int | None = None  # prompt tokens per prefill forward (None: the whole prompt at once)

    @property
    def id(self) -> str:
        """A stable name of the plan: the same prompts, shape, dtype and budget give the same id on every machine."""
        facts = asdict(self)
        if facts["prefill_chunk"] is None:  # a plan without chunking keeps the id it always had
            del facts["prefill_chunk"]
        blob = json.dumps(facts, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    @property
    def slots(self) -> int:
        """The token slots the plan may decode: every row × ``max_new_tokens`` (what progress counts)."""
        return sum(len(batch) for batch in self.batches) * self.max_new_tokens

    def where(self, key: str) -> tuple[int, int]:
        """(batch index, batch size) of a prompt key."""
        for i, batch in enumerate(self.batches):
            if key in batch:
                return i, len(batch)
        raise KeyError(key)


def plan_batches(lengths: Mapping[str, int], max_new_tokens: int, kv_bytes_per_token: int, budget_bytes: int,
                 dtype: str, max_batch: int = MAX_BATCH, prefill_chunk: int | None = None) -> BatchPlan:
    """Cut the prompts (key → prompt tokens) into batches: sorted by length then key, a batch ends where one more
    row would make its KV cache (rows × (its longest prompt + ``max_new_tokens``) × ``kv_bytes_per_token``) exceed
    ``budget_bytes``, or at ``max_batch`` rows; a prompt too long for the budget alone decodes on its own."""
    order = sorted(lengths, key=lambda k: (lengths[k], k))
    batches: list[tuple[str, ...]] = []
    current: list[str] = []
    for key in order:
        rows = len(current) + 1
        need = rows * (lengths[key] + max_new_tokens) * kv_bytes_per_token  # the longest so far is this one
        if current and (rows > max_batch or need > budget_bytes):
            batches.append(tuple(current))
            current = []
        current.append(key)
    if current:
        batches.append(tuple(current))
    return BatchPlan(tuple(batches), max_new_tokens, budget_bytes, kv_bytes_per_token, dtype, prefill_chunk)


@dataclass
class Generated:
    """One prompt's text as decoded in its batch."""

    key: str
    text: str
    tokens_in: int
    tokens_out: int
    finish: str                  # "stop" (end of turn) or "length" (max_new_tokens reached)
    seconds: float               # the batch's wall time (shared by its rows)
    batch: int
    batch_size: int
    provenance: dict[str, Any] = field(default_factory=dict)


def kv_bytes_per_token(config: Any, dtype: str) -> int:
    """Bytes one token takes in a decoder's KV cache: keys and values of every layer's KV heads."""
    heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    width = 2 if dtype in ("bfloat16", "float16") else 4
    return int(2 * config.num_hidden_layers * heads * head_dim * width)


def checkpoint_kv_bytes_per_token(path: Any, dtype: str) -> int:
    """:func:`kv_bytes_per_token` of a checkpoint directory, read from its ``config.json`` (no model loaded)."""
    from pathlib import Path
    from types import SimpleNamespace

    config = json.loads((Path(path) / "config.json").read_text(encoding="utf-8"))
    config = config.get("text_config", config)  # a multimodal checkpoint nests the decoder's
    return kv_bytes_per_token(SimpleNamespace(**{"num_key_value_heads": None, "head_dim": None, **config}), dtype)


class LocalGenerator:
    """A local checkpoint loaded in this process for greedy batched generation; :meth:`close` frees it.

    ``path``, ``device`` and ``dtype`` come from :func:`grebench.runtime.resolve_local` (the dtype the machine's
    probe chose, the same as a server's)."""

    def __init__(self, path: Any, device: str, dtype: str, label: str = "", weights: bool = True) -> None:
        apply_offline_defaults()
        bound_allocations()
        import torch
        import transformers
        from transformers import AutoTokenizer

        self.label, self.device, self.dtype = label or str(path), device, dtype
        self.tokenizer: Any = AutoTokenizer.from_pretrained(path, local_files_only=True)
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.model: Any = None
        self.kv_bytes = checkpoint_kv_bytes_per_token(path, dtype)
        if weights:  # without: the prompts and the plan only (the batches decode on Ray actors that load their own)
            model: Any = load_causal_lm(path, dtype)  # one copy of the weights at a time (issue 47)
            self.model = model.to(device).eval()
        self.versions = {"torch": torch.__version__, "transformers": transformers.__version__}

    @property
    def kv_bytes_per_token(self) -> int:
        """What one token costs in this model's KV cache."""
        return self.kv_bytes

    def prompt_ids(self, messages: Sequence[tuple[str, str]]) -> list[int]:
        """The token ids of a chat prompt through the checkpoint's chat template, ready for the assistant's turn."""
        chat = [{"role": role, "content": content} for role, content in messages]
        ids = self.tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=True)
        if isinstance(ids, Mapping):  # newer transformers return a BatchEncoding
            ids = ids["input_ids"]
        return [int(i) for i in ids]

    def plan(self, prompts: Mapping[str, Sequence[int]], max_new_tokens: int, budget_bytes: int) -> BatchPlan:
        """The batch plan of these prompts (:func:`plan_batches`)."""
        return plan_batches({k: len(v) for k, v in prompts.items()}, max_new_tokens, self.kv_bytes_per_token,
                            budget_bytes, self.dtype, prefill_chunk=PREFILL_CHUNK if self.device == "cpu" else None)

    def run(self, plan: BatchPlan, prompts: Mapping[str, Sequence[int]],
            on_batch: Callable[[list[Generated]], None], on_step: Callable[[int], None] | None = None) -> None:
        """Decode every batch of ``plan`` in order, handing each batch's texts to ``on_batch`` as soon as it is done;
        a stop request (SIGTERM) is honoured between batches.  ``on_step(rows)`` is called after every decoding step
        with the rows it advanced, and once more at the end of a batch with the steps it did not need (progress in
        the plan's token slots, :meth:`BatchPlan.slots`, so its ETA is the measured decoding speed)."""
        for index in range(len(plan.batches)):
            stop.check()
            on_batch(self.decode(plan, index, prompts, on_step))

    def decode(self, plan: BatchPlan, index: int, prompts: Mapping[str, Sequence[int]],
               on_step: Callable[[int], None] | None = None) -> list[Generated]:
        """Decode batch ``index`` of ``plan`` (its rows padded together, as the plan fixes them): the same texts
        whichever process decodes it, with the same engine, dtype and threads."""
        import torch
        from transformers import StoppingCriteria, StoppingCriteriaList

        class Steps(StoppingCriteria):  # a hook on every decoding step that never stops one
            def __init__(self, rows: int) -> None:
                self.rows, self.steps = rows, 0

            def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
                self.steps += 1
                if on_step is not None:
                    on_step(self.rows)
                return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)

        if self.model is None:
            raise RuntimeError("this generator was made without its weights (plan only)")
        eos = self._stop_ids()
        keys = plan.batches[index]
        rows = [list(prompts[k]) for k in keys]
        width = max(len(r) for r in rows)
        pad = int(self.tokenizer.pad_token_id)
        ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows], device=self.device)
        mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows], device=self.device)
        started = time.monotonic()
        steps = Steps(len(keys))
        with torch.inference_mode():
            out = self.model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=plan.max_new_tokens,
                                      do_sample=False, temperature=None, top_p=None, top_k=None,
                                      eos_token_id=eos, pad_token_id=pad, cache_implementation=CACHE,
                                      prefill_chunk_size=plan.prefill_chunk,
                                      stopping_criteria=StoppingCriteriaList([steps]))
        seconds = time.monotonic() - started
        if on_step is not None and plan.max_new_tokens > steps.steps:  # every row ended early
            on_step(len(keys) * (plan.max_new_tokens - steps.steps))
        done = []
        for key, row, new in zip(keys, rows, out[:, width:].tolist(), strict=True):
            end = next((i for i, t in enumerate(new) if t in eos), None)
            kept = new if end is None else new[:end]
            done.append(Generated(
                key=key, text=self.tokenizer.decode(kept, skip_special_tokens=True).strip(),
                tokens_in=len(row), tokens_out=len(kept) + (0 if end is None else 1),
                finish="length" if end is None else "stop", seconds=seconds, batch=index,
                batch_size=len(keys), provenance=self.provenance(plan, index, len(keys))))
        log.info("local generation %s: batch %d/%d (%d prompts) in %.1f s", self.label, index + 1,
                 len(plan.batches), len(keys), seconds)
        return done

    def provenance(self, plan: BatchPlan, index: int, size: int) -> dict[str, Any]:
        """What a generation records of how it was made: the engine and its versions, the device and dtype, and its
        place in the batch plan."""
        return {"engine": ENGINE, **self.versions, "device": self.device, "dtype": self.dtype, "cache": CACHE,
                "batch_plan": plan.id, "batch": index, "batch_size": size, "batches": len(plan.batches),
                "batch_budget_bytes": plan.budget_bytes, "max_new_tokens": plan.max_new_tokens,
                "prefill_chunk": plan.prefill_chunk}

    def _stop_ids(self) -> list[int]:
        ids = {int(self.tokenizer.eos_token_id)} if self.tokenizer.eos_token_id is not None else set()
        config = getattr(self.model, "generation_config", None)
        extra = getattr(config, "eos_token_id", None)
        ids.update(int(i) for i in (extra if isinstance(extra, list) else [extra] if extra is not None else []))
        return sorted(ids)

    def close(self) -> None:
        """Free the model (its memory goes back before the scoring loads the evaluation LM)."""
        self.model = None
        release_memory("local generation")  # collects the model, then returns its pages

    def __enter__(self) -> LocalGenerator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

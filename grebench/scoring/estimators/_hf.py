"""The hf estimator: any local causal-LM checkpoint through transformers, scored by teacher forcing.

Speed without changing numbers — two levels of KV-cache reuse, batched across every paper of a call:

1. every distinct prefix of the call (system prompt + synopsis: one per paper) runs once, in token-budget batches;
2. from them, every distinct prompt up to the end of the assistant header — the first reviewer's lines, or "Not
   available." for the marginal — runs once per (paper, first review), in token-budget batches that span papers,
   each row against its own paper's prefix cache;
3. each target (a reference's lines + end-of-turn) then runs only its own tokens against its context's cache, in
   token-budget batches that span papers too.

Contexts of different lengths share a batch through a padded KV tensor whose real slots are recorded
(:class:`_Contexts`: a prefix shorter than the batch's longest leaves pad slots between it and the first review),
an explicit attention mask and explicit position ids: pads are masked out, so they never reach a scored token, and
in float32 the result equals a plain forward of each whole prompt (to 1e-5).  Without a GPU a call holds one paper
(levels 1-3 then run per paper); with one, a call holds as many papers as the plain path's (the scoring engine asks
``papers_per_batch``), so reuse computes the necessary tokens in batches as large as the plain path's.

The LM head runs only at the positions that predict scored tokens (in chunks, so a
128k vocabulary never materialises for a whole batch), the log-softmax is taken in float32, everything under
``torch.inference_mode``.

Reuse or not is measured, per device, never guessed (``hf_prefix_reuse = auto``).  Reuse computes about half the
positions of a plain forward; whether that is faster depends on the device.  :func:`measure_reuse` times both paths
on a fixed paper-shaped request set in five interleaved rounds; :func:`decide_reuse` takes the timings' verdict when
four rounds agree and the FLOP count's otherwise, and reuse is kept only where it is as faithful to the float32
forward as the plain path is (within 0.05 nats per 100 scored tokens of the plain path's own drift: bfloat16 kernels
over a padded cache drift, but so does any bfloat16 batch); the record is cached per machine, device and estimator
id, and re-taken on a quieter start when it was measured on a busy machine.  The estimator id says ``:kv=plain`` when
a low-precision run does not reuse (the two paths agree to 1e-5 in float32).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Required, TypedDict, TypeVar, cast

from grebench import stop
from grebench._offline import apply_offline_defaults
from grebench.runtime import bound_allocations, load_causal_lm
from grebench.scoring._request import LogprobRequest, LogprobResult
from grebench.scoring.estimators import ESTIMATORS, EstimatorContext, dtype_tolerance, served_model_label
from grebench.scoring.estimators._tokenize import TARGET_RULE, RequestTokenizer, TokenizedRequest, template_sha8
from grebench.settings import ScoringSettings

_DTYPES = ("float32", "bfloat16", "float16")
REUSE_CHOICES = ("auto", "on", "off")
REUSE_MIN_SPEEDUP = 1.1
REUSE_MAX_DELTA_PER_100 = 0.05
#: Scored positions per LM-head chunk: bounds the float32 logits to chunk × vocabulary (1 GiB at 128k).  On a CPU
#: the chunk is smaller still (:meth:`HFEstimator.head_chunk`).
HEAD_CHUNK = 2048
#: On a CPU the logits of one LM-head chunk and their log-softmax (float32, two copies) hold at most this share of
#: ``hf_batch_mib``: 2,048 positions of SmolLM2's 49,152-token vocabulary are 0.8 GB, and scoring one real paper
#: peaked at 2.42 GB with them, 1.78 GB in chunks of 256 (no slower; ``benchmarks/memory_phases.py``).
HEAD_SHARE = 0.25
#: A forward's fixed cost on a GPU, in token positions: batches are cut to minimise padded positions + this per
#: forward (:func:`_cut`).  Measured on an H200 at Llama-3.1-8B shape (bf16, ``benchmarks/scoring_engine.py --shape
#: llama-3.1-8b --profile``): the reuse path cut by the CPU's padding rule ran 99 forwards per 16-paper call with
#: 2.8 s of GPU work in 10.4 s of wall time, about 75 ms of Python, launches and syncs per forward, against ~35 µs
#: per position.  A constant, not a timing, so that a run's batches — and its bfloat16 numbers — are reproducible.
GPU_FORWARD_OVERHEAD = 2048
#: What one forward may hold on a CPU beside the weights (``hf_batch_mib``): a token budget alone let a batch of short
#: targets copy its context's KV cache once per row (160 rows of a 2,000-token context: 15 GB for a 135M model) and
#: the first run's peak RSS reach 7.7 GB.  Batches are cut by :meth:`HFEstimator.row_bytes` as well as by tokens.
#: The setting's default, one source of it (one paper's 32 requests held to AVX2 in float32,
#: ``benchmarks/memory_phases.py --child scoring smollm2-135m auto MIB``: 256 MiB peaked at 1,394–1,450 MB, 160 at
#: 1,295, 128 at 1,211, in the same time: 45.7–47.6 s).
DEFAULT_BATCH_BYTES = int(ScoringSettings.hf_batch_mib.default) * 2 ** 20
_T = TypeVar("_T")
log = logging.getLogger(__name__)


def _config_sha8(path: Path) -> str:
    cfg = path / "config.json"
    return hashlib.sha256(cfg.read_bytes()).hexdigest()[:8] if cfg.exists() else "noconfig"


@dataclass
class _Contexts:
    """Cached contexts of one batch: KV per layer (``[contexts, heads, slots, head_dim]``), which slots of each
    context hold its real tokens (``valid``, bool ``[contexts, slots]``: the others are pads, masked out) and the
    position of the token after each context (``next_pos``).  ``used`` (one past each context's last real slot) and
    ``padded`` (whether any slot of a context below ``used`` is a pad) are the same facts kept on the host, so that
    choosing a kernel or a cache width never waits for the GPU."""

    kv: list[tuple[Any, Any]]
    valid: Any
    next_pos: Any
    used: list[int]
    padded: list[bool]


@dataclass
class _Row:
    """One scored sequence: ``inputs`` run after ``ctx`` cached tokens; the last len(labels) inputs predict labels."""

    req: int
    group: int              # index into the KV tensors of the current chunk (-1: no cache)
    ctx: int                # cached context length
    inputs: list[int]
    labels: list[int]
    skip: tuple[int, ...] = ()    # label positions not scored (:data:`~._tokenize.TARGET_RULE`)
    choice: tuple[int, ...] = ()  # label positions scored as a choice among the judgment verbs


def _cut(items: list[_T], length: Callable[[_T], int], budget: int, max_waste: float = 0.1,
         overhead: int = 0) -> list[list[_T]]:
    """Cut items sorted by ascending length into right-padded batches of ≤ ``budget`` tokens with padding included.

    ``overhead == 0`` (a CPU: a forward's fixed cost is small beside its tokens'): a batch also ends where padding
    would exceed ``max_waste`` of its tokens (pads are computed for nothing).  ``overhead > 0`` (a GPU, where a
    forward's fixed cost — Python, launches, a sync — is worth thousands of token positions of a large model): the
    cut that minimises padded positions + ``overhead`` per batch, found exactly by dynamic programming over the
    sorted items (a batch is a run of consecutive items, padded to its last, longest one)."""
    if overhead > 0 and items:
        return _cut_by_cost(items, [length(it) for it in items], budget, overhead)
    batches: list[list[_T]] = []
    cur: list[_T] = []
    total = 0
    for it in items:
        n = length(it)
        padded = (len(cur) + 1) * n
        if cur and (padded > budget or total + n < (1 - max_waste) * padded):
            batches.append(cur)
            cur, total = [], 0
        cur.append(it)
        total += n
    if cur:
        batches.append(cur)
    return batches


def _cut_by_cost(items: list[_T], lengths: list[int], budget: int, overhead: int) -> list[list[_T]]:
    """best[j] = least cost of the first j items; a batch items[i:j] costs (j - i) × lengths[j - 1] + overhead and
    holds at most ``budget`` padded tokens (a single item always fits)."""
    n = len(items)
    best = [0.0] + [float("inf")] * n
    start = [0] * (n + 1)
    for j in range(1, n + 1):
        width = max(1, lengths[j - 1])
        for i in range(j - 1, max(-1, j - 1 - max(1, budget // width)), -1):
            cost = best[i] + (j - i) * width + overhead
            if cost < best[j]:
                best[j], start[j] = cost, i
    batches: list[list[_T]] = []
    j = n
    while j > 0:
        batches.append(items[start[j]:j])
        j = start[j]
    return batches[::-1]


class HFEstimator:
    """Teacher-forced log-probs from a local transformers checkpoint, with two-level prefix KV reuse."""

    def __init__(self, path: str, dtype: str = "bfloat16", device: str = "auto", batch_tokens: int = 16_384,
                 reuse_prefix: bool = True, batch_bytes: int = DEFAULT_BATCH_BYTES) -> None:
        """``reuse_prefix``: run the two-level prefix cache (True) or plain forwards of whole prompts (False);
        :func:`make_hf` decides it per device with :func:`measure_reuse`."""
        apply_offline_defaults()
        bound_allocations()  # before the model's first allocation (issue 47: the score stage's resident memory)
        import torch
        from transformers import AutoTokenizer

        root = Path(path).expanduser().resolve()
        if not root.is_dir():
            raise ValueError(f"hf estimator: {root} is not a local checkpoint directory")
        if dtype not in _DTYPES:
            raise ValueError(f"hf_dtype must be one of {_DTYPES}, got {dtype!r}")
        self.device = torch.device("cuda" if device == "auto" and torch.cuda.is_available() else
                                   "cpu" if device == "auto" else device)
        self.tokenizer = AutoTokenizer.from_pretrained(root, local_files_only=True)
        self.model = load_causal_lm(root, dtype)  # one copy of the weights at a time (issue 47)
        # transformers' stubs type the wrapped ``to`` as taking the model itself; a torch.device is what it accepts
        self.model.to(self.device).eval()  # type: ignore[arg-type]
        self.encode = RequestTokenizer(self.tokenizer)
        self.batch_tokens = batch_tokens
        self.batch_bytes = batch_bytes
        self.reuse_prefix = reuse_prefix
        self.dtype = dtype
        self.reuse_record: ReuseRecord | None = None
        self.positions_fed = 0  # token positions run through the model, pads included (what was computed)
        self.id = (f"hf:{root}@{_config_sha8(root)}:dtype={dtype}:chat={template_sha8(self.tokenizer)}"
                   f":target={TARGET_RULE}")

    @classmethod
    def from_model(cls, model: Any, tokenizer: Any, id: str, batch_tokens: int = 16_384) -> HFEstimator:
        """Wrap an already loaded model and tokenizer (benchmarks with random weights use this)."""
        self = cls.__new__(cls)
        self.model, self.tokenizer, self.id = model.eval(), tokenizer, id
        self.device = next(model.parameters()).device
        self.encode = RequestTokenizer(tokenizer)
        self.batch_tokens, self.reuse_prefix = batch_tokens, True
        self.batch_bytes = DEFAULT_BATCH_BYTES
        self.dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
        self.reuse_record = None
        self.positions_fed = 0
        return self

    @property
    def papers_per_batch(self) -> int:
        """Papers the scoring engine gives one call: one on a CPU (a paper takes seconds to minutes there, so the
        progress bar and the cache move per paper and a crash loses at most one paper); on a GPU many, so that the
        plain path's batches span papers and fill the token budget (a paper is ~10k prompt tokens)."""
        if self.device.type == "cpu":
            return 1
        return max(8, 4 * self.batch_tokens // 8192)  # both paths batch across papers

    @property
    def forward_overhead(self) -> int:
        """A forward's fixed cost in token positions, for :func:`_cut`: 0 on a CPU (batches cut by padding share, as
        they always were there), :data:`GPU_FORWARD_OVERHEAD` on a GPU."""
        return 0 if self.device.type == "cpu" else GPU_FORWARD_OVERHEAD

    @property
    def head_chunk(self) -> int:
        """Scored positions per LM-head chunk: :data:`HEAD_CHUNK`, and on a CPU at most what keeps the chunk's float32
        logits and log-softmax within :data:`HEAD_SHARE` of :attr:`batch_bytes` (at least 64)."""
        if self.device.type != "cpu":
            return HEAD_CHUNK
        vocab = int(self.model.get_output_embeddings().weight.shape[0])
        return min(HEAD_CHUNK, max(64, int(self.batch_bytes * HEAD_SHARE) // (2 * 4 * vocab)))

    def row_bytes(self, width: int, context: int = 0) -> int:
        """What one row of ``width`` input tokens after ``context`` cached tokens holds during a forward: its copy of
        the context's KV cache and its own, the attention scores and weights of every head, and the widest
        activations of a layer (the MLP's)."""
        cfg = self.model.config
        heads = int(cfg.num_attention_heads)
        kv_heads = int(getattr(cfg, "num_key_value_heads", None) or heads)
        head_dim = int(getattr(cfg, "head_dim", None) or cfg.hidden_size // heads)
        width_bytes = 2 if self.dtype in ("bfloat16", "float16") else 4
        kv = 2 * int(cfg.num_hidden_layers) * kv_heads * head_dim * width_bytes
        mlp = (4 * int(cfg.hidden_size) + 3 * int(getattr(cfg, "intermediate_size", 4 * cfg.hidden_size))) * 4
        return (context + width) * kv + 2 * heads * width * (context + width) * 4 + width * mlp

    def _within_bytes(self, batch: list[_T], width: Callable[[_T], int], context: Callable[[_T], int]
                      ) -> list[list[_T]]:
        """``batch`` (sorted by width) cut in order into runs whose rows, each padded to the run's widest and
        longest context, hold at most :attr:`batch_bytes` (:meth:`row_bytes`); a row over it alone runs alone."""
        out: list[list[_T]] = []
        cur: list[_T] = []
        w = c = 0
        for item in batch:
            nw, nc = max(w, width(item)), max(c, context(item))
            if cur and (len(cur) + 1) * self.row_bytes(nw, nc) > self.batch_bytes:
                out.append(cur)
                cur, nw, nc = [], width(item), context(item)
            cur.append(item)
            w, c = nw, nc
        if cur:
            out.append(cur)
        return out

    def logprobs(self, requests: Sequence[LogprobRequest]) -> list[LogprobResult]:
        """Summed log-probs of each target (its tokens plus the end-of-turn suffix), in request order."""
        return self.logprobs_with(requests, self.reuse_prefix)

    def logprobs_with(self, requests: Sequence[LogprobRequest], reuse: bool) -> list[LogprobResult]:
        """:meth:`logprobs` through the given path: two-level prefix reuse (True) or plain forwards (False)."""
        import torch

        toks = [self.encode(r) for r in requests]
        sums: list[float] = [0.0] * len(requests)
        with torch.inference_mode():
            if not reuse:
                rows = [_Row(i, -1, 0, t.ids[:-1], t.ids[-t.n_target:], t.skip, t.choice) for i, t in enumerate(toks)]
                self._score_rows(rows, None, sums)
            else:
                self._score_reused(toks, sums)
        return [LogprobResult(v, t.n_target - len(t.skip)) for v, t in zip(sums, toks, strict=True)]

    def _score_reused(self, toks: list[TokenizedRequest], sums: list[float]) -> None:
        """Levels 1-3 over every paper of the call: prefixes in batches, then (prefix, first review) contexts in
        batches across papers, then the targets of each context batch."""
        by_prefix: dict[tuple[int, ...], dict[tuple[int, ...], list[int]]] = {}
        for i, t in enumerate(toks):
            by_prefix.setdefault(t.prefix, {}).setdefault(t.rest[:len(t.rest) - t.n_target], []).append(i)
        over = self.forward_overhead
        for prefixes in _cut(sorted(by_prefix, key=len), len, self.batch_tokens, overhead=over):
            stop.check()
            level1 = self._contexts(None, [(0, p) for p in prefixes])
            groups = [(k, shared) for k, p in enumerate(prefixes) for shared in by_prefix[p]]
            ordered = sorted(groups, key=lambda g: len(g[1]))
            lengths = [len(p) for p in prefixes]

            def prefix_of(group: tuple[int, tuple[int, ...]], n: list[int] = lengths) -> int:
                return n[group[0]]

            for chunk in (part for cut in _cut(ordered, lambda g: len(g[1]), self.batch_tokens, overhead=over)
                          for part in self._within_bytes(cut, lambda g: len(g[1]), prefix_of)):
                stop.check()
                # each group's context ends one token early: its last token is the first input of its targets
                level2 = self._contexts(level1, [(k, shared[:-1]) for k, shared in chunk])
                after = [len(prefixes[k]) + len(shared) - 1 for k, shared in chunk]
                rows = [_Row(i, g, after[g], [shared[-1], *toks[i].rest[len(shared):-1]],
                             list(toks[i].rest[len(shared):]), toks[i].skip, toks[i].choice)
                        for g, (k, shared) in enumerate(chunk) for i in by_prefix[prefixes[k]][shared]]
                self._score_rows(rows, level2, sums)

    def _contexts(self, past: _Contexts | None, items: list[tuple[int, Sequence[int]]]) -> _Contexts | None:
        """Run each item's tokens after its parent context in ``past`` (item = (index into past, tokens); no past:
        from the start) in one right-padded forward; None when there is nothing cached and nothing to run."""
        import torch
        from transformers import DynamicCache

        dev = self.device
        width = max(len(tokens) for _, tokens in items)
        sel = self._tensor([parent for parent, _ in items])
        lengths = self._tensor([len(tokens) for _, tokens in items])
        if width == 0:
            return None if past is None else _Contexts(
                [(k.index_select(0, sel), v.index_select(0, sel)) for k, v in past.kv],
                past.valid.index_select(0, sel), past.next_pos.index_select(0, sel),
                [past.used[p] for p, _ in items], [past.padded[p] for p, _ in items])
        ids = self._tensor([list(tokens) + [self._pad_id()] * (width - len(tokens)) for _, tokens in items])
        real = torch.arange(width, device=dev)[None, :] < lengths[:, None]
        self.positions_fed += int(ids.numel())
        if past is None:  # right pads only: a real token never sees one (causal), no mask needed
            out = self.model.base_model(input_ids=ids, use_cache=True)
            valid, start = real, torch.zeros(len(items), dtype=torch.long, device=dev)
            used, padded = [len(tokens) for _, tokens in items], [False] * len(items)
        else:
            before = past.valid.index_select(0, sel)
            start = past.next_pos.index_select(0, sel)
            cache = DynamicCache(ddp_cache_data=[(k.index_select(0, sel), v.index_select(0, sel)) for k, v in past.kv])
            slots = int(past.valid.shape[1])
            # a parent whose real tokens stop short of the cache's width leaves pad slots before this pass's tokens
            used = [slots + len(tokens) if tokens else past.used[p] for p, tokens in items]
            padded = [past.padded[p] or (bool(tokens) and past.used[p] < slots) for p, tokens in items]
            # one paper, or prefixes of one length: no pad slot to hide, the causal kernel
            if not any(past.padded[p] or past.used[p] < slots for p, _ in items):
                out = self.model.base_model(input_ids=ids, past_key_values=cache, use_cache=True)
            else:
                # a pad slot of this pass may attend to its own row (finite values, never read): only the parent's
                # pads are masked, so no query row is ever fully masked
                mask = torch.cat([before, torch.ones_like(real)], dim=1).long()
                out = self.model.base_model(input_ids=ids, past_key_values=cache, attention_mask=mask, use_cache=True,
                                            position_ids=start[:, None] + torch.arange(width, device=dev)[None, :])
            valid = torch.cat([before, real], dim=1)
        return _Contexts([(layer.keys, layer.values) for layer in out.past_key_values.layers], valid,
                         start + lengths, used, padded)

    def _tensor(self, data: list[Any]) -> Any:
        """An int64 tensor of ``data`` on the device.  On a GPU it is copied from pinned memory without blocking: a
        plain copy from pageable memory makes the host wait until the GPU has finished all queued work, so every
        batch's index tensors would drain the queue before the next batch is launched."""
        import torch

        t = torch.tensor(data, dtype=torch.long)
        if self.device.type != "cuda":
            return t
        return t.pin_memory().to(self.device, non_blocking=True)

    def _pad_id(self) -> int:
        return self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0

    def _score_rows(self, rows: list[_Row], kv: _Contexts | None, sums: list[float]) -> None:
        """Sort rows by length, cut into batches of ≤ batch_tokens padded input tokens, add each row's sum."""
        import torch

        rows.sort(key=lambda r: (len(r.inputs), r.ctx))
        done: list[tuple[list[_Row], Any]] = []
        context = (lambda r: kv.used[r.group]) if kv is not None else (lambda r: 0)
        for cut in _cut(rows, lambda r: len(r.inputs), self.batch_tokens, overhead=self.forward_overhead):
            for batch in self._within_bytes(cut, lambda r: len(r.inputs), context):
                stop.check()  # a forward batch is the request boundary of a local model
                done.append((batch, self._score_batch(batch, kv)))
        # read back once: a read per batch would make the host wait for the GPU before it queues the next batch
        values = torch.cat([out for _, out in done]).tolist() if done else []
        for row, val in zip([row for batch, _ in done for row in batch], values, strict=True):
            sums[row.req] = val

    def _score_batch(self, batch: list[_Row], kv: _Contexts | None) -> Any:
        """Each row's summed log-prob, as a float64 tensor on the device."""
        import torch
        from transformers import DynamicCache

        dev = self.device
        width = max(len(r.inputs) for r in batch)
        if dev.type == "cuda" and kv is None:  # tensor-core friendly widths; right pads never reach a scored token
            width = -(-width // 8) * 8
        ids = self._tensor([r.inputs + [self._pad_id()] * (width - len(r.inputs)) for r in batch])
        self.positions_fed += int(ids.numel())
        kwargs: dict[str, Any] = {}
        if kv is not None:
            sel = self._tensor([r.group for r in batch])
            valid = kv.valid.index_select(0, sel)
            n_ctx = max(1, max(kv.used[r.group] for r in batch))  # slots past every row's context are not read
            kwargs["past_key_values"] = DynamicCache(ddp_cache_data=[
                (k[:, :, :n_ctx].index_select(0, sel), v[:, :, :n_ctx].index_select(0, sel)) for k, v in kv.kv])
            # context slots that are not a row's own real tokens (pads, another group's tokens) are masked out
            kwargs["attention_mask"] = torch.cat([valid[:, :n_ctx],
                                                  torch.ones(len(batch), width, dtype=torch.bool, device=dev)],
                                                 dim=1).long()
            kwargs["position_ids"] = kv.next_pos.index_select(0, sel)[:, None] + torch.arange(width, device=dev)[None]
        hidden = self.model.base_model(input_ids=ids, use_cache=kv is not None, **kwargs).last_hidden_state
        rows_i, labels, choice = [], [], []
        cols: list[int] = []
        for b, r in enumerate(batch):
            n, skip, picks = len(r.labels), set(r.skip), set(r.choice)
            start = len(r.inputs) - n
            for j in range(n):
                if j not in skip:
                    rows_i.append(b)
                    cols.append(start + j)
                    labels.append(r.labels[j])
                    choice.append(j in picks)
        rows_t = self._tensor(rows_i)
        h = hidden[rows_t, self._tensor(cols)]
        labels_t = self._tensor(labels)
        verbs = self._tensor(list(self.encode.verb_ids))
        head = self.model.get_output_embeddings()
        parts = []
        step = self.head_chunk
        for a in range(0, len(labels), step):
            logp = torch.log_softmax(head(h[a:a + step]).float(), dim=-1)
            lp = logp.gather(1, labels_t[a:a + step, None])[:, 0]
            if any(choice[a:a + step]):  # a verb: its probability among the four verbs
                norm = torch.logsumexp(logp.index_select(1, verbs), dim=-1)
                lp = torch.where(self._tensor(choice[a:a + step]).bool(), lp - norm, lp)
            parts.append(lp)
        tok_lp = torch.cat(parts) if parts else torch.zeros(0, device=dev)
        return torch.zeros(len(batch), dtype=torch.float64, device=dev).index_add_(0, rows_t, tok_lp.double())


_WORDS = ("the", "model", "method", "results", "paper", "proposed", "training", "data", "experiments", "baseline",
          "authors", "show", "performance", "approach", "learning", "network", "loss", "we", "evaluate", "on",
          "benchmark", "improves", "compared", "with", "prior", "work", "analysis", "theoretical", "empirical",
          "representation", "attention", "gradient", "accuracy", "robust", "generalization", "scale", "a", "of",
          "in", "to", "and", "is", "not", "clear", "why", "ablation", "missing", "strong", "novel", "limited")


def probe_requests(n_papers: int = 1, seed: int = 20241031) -> list[LogprobRequest]:
    """A fixed, paper-shaped request set: per paper a 220-word synopsis, 3 references and 3 candidates of 12 lines
    of ~11 words (the bundled data's median shape), each reference with its marginal and one request per candidate."""
    rng = random.Random(seed)

    def text(words: int) -> str:
        return " ".join(rng.choice(_WORDS) for _ in range(words)).capitalize() + "."

    def review() -> str:
        return "\n".join("The reviewer " + rng.choice(("appreciates", "criticizes", "questions", "suggests")) + " "
                         + text(10) for _ in range(12))

    reqs: list[LogprobRequest] = []
    for p in range(n_papers):
        synopsis, refs, cands = text(220), [review() for _ in range(3)], [review() for _ in range(3)]
        for ref in refs:
            reqs.append(LogprobRequest(f"probe-{p}", synopsis, None, ref))
            reqs += [LogprobRequest(f"probe-{p}", synopsis, c, ref) for c in cands]
    return reqs


def _timed(est: HFEstimator, reqs: list[LogprobRequest], reuse: bool) -> tuple[list[float], float]:
    import torch

    if est.device.type == "cuda":
        torch.cuda.synchronize()
    t = time.perf_counter()
    vals = [r.logprob for r in est.logprobs_with(reqs, reuse)]
    if est.device.type == "cuda":
        torch.cuda.synchronize()
    return vals, time.perf_counter() - t


def reuse_pays(speedup: float, reuse_drift: float, plain_drift: float) -> bool:
    """The rule: reuse only where it is faster by a margin and as faithful as the plain forward: its mean deviation
    from the float32 plain forward (nats per 100 scored tokens) may exceed the plain forward's own by at most
    :data:`REUSE_MAX_DELTA_PER_100`."""
    return speedup >= REUSE_MIN_SPEEDUP and reuse_drift <= plain_drift + REUSE_MAX_DELTA_PER_100


#: Timed rounds of the reuse probe (each times both paths, in alternating order) and how many must agree.
PROBE_ROUNDS = 5
PROBE_AGREE = 4
#: With inconclusive timings, reuse where the plain path computes at least this many times the positions.
FLOP_PRIOR_RATIO = 1.5

def decide_reuse(rounds: Sequence[tuple[float, float]], flop_ratio: float) -> tuple[bool, str, str]:
    """(reuse faster, basis, evidence) from timed rounds of (plain seconds, reuse seconds) and the positions the
    plain path runs per position of the reuse path.

    Timings decide when they agree: reuse when at least :data:`PROBE_AGREE` rounds have it
    :data:`REUSE_MIN_SPEEDUP` times faster, plain when as many have it slower.  Otherwise (a machine whose load
    changed during the probe, two paths within noise of each other) the FLOP count decides: reuse where the plain
    path computes :data:`FLOP_PRIOR_RATIO` times its work.  One slow round, whichever path it hit, changes nothing.
    """
    ratios, faster, slower = _tally(rounds)
    need = min(PROBE_AGREE, len(ratios))
    median = ratios[len(ratios) // 2]
    timed = f"reuse {median:.2f}x plain (median of {len(ratios)} interleaved rounds, {ratios[0]:.2f}-{ratios[-1]:.2f})"
    if faster >= need:
        return True, "timings", f"{timed}; {faster}/{len(ratios)} rounds >= {REUSE_MIN_SPEEDUP}x"
    if slower >= need:
        return False, "timings", f"{timed}; {slower}/{len(ratios)} rounds slower"
    return (flop_ratio >= FLOP_PRIOR_RATIO, "flop prior",
            f"{timed}: inconclusive, so the FLOP count decides: plain runs {flop_ratio:.2f}x the positions "
            f"(reuse if >= {FLOP_PRIOR_RATIO})")


def _tally(rounds: Sequence[tuple[float, float]]) -> tuple[list[float], int, int]:
    """(sorted reuse speed-ups, rounds with reuse at least :data:`REUSE_MIN_SPEEDUP` faster, rounds with it slower)."""
    ratios = sorted(plain / max(reuse, 1e-9) for plain, reuse in rounds)
    return ratios, sum(r >= REUSE_MIN_SPEEDUP for r in ratios), sum(r < 1.0 for r in ratios)


def _settled(rounds: Sequence[tuple[float, float]]) -> bool:
    """Whether the timings of :data:`PROBE_ROUNDS` rounds would decide as these do whatever the rounds not run yet
    show: :data:`PROBE_AGREE` of them already agree (then the rest is not timed)."""
    _ratios, faster, slower = _tally(rounds)
    return max(faster, slower) >= PROBE_AGREE


def _load() -> float | None:
    from grebench.runtime import load_average

    return load_average()


def _neighbours() -> Any:
    """What other work takes of the cores while the probe runs (:class:`grebench.runtime.Neighbours`)."""
    from grebench.runtime import Neighbours

    return Neighbours()


class ReuseRecord(TypedDict, total=False):
    """Whether the hf estimator reuses a prompt's cached prefix, and why (:func:`choose_reuse`): the setting, the rule
    (float32 on a CPU), a cached probe of this machine, or a probe now (its timings and drifts); cached as JSON."""

    reuse: Required[bool]
    source: str                     # setting | rule | cache | probe
    basis: str
    why: str
    speedup: float
    rounds: list[list[float]]
    flop_ratio: float
    reuse_drift_per_100_tokens: float
    plain_drift_per_100_tokens: float
    max_delta_per_100_tokens: float
    plain_s: float
    reuse_s: float
    requests: int
    load_before: float | None
    load_after: float | None
    cores: int
    others_cores: float | None
    busy: bool
    key: str                        # the machine, device and estimator the probe was taken for
    created_at: str
    file: str | None


def measure_reuse(est: HFEstimator) -> ReuseRecord:
    """Time both paths on :func:`probe_requests` and decide (:func:`decide_reuse`, then the fidelity rule).

    One warm-up each, then up to :data:`PROBE_ROUNDS` rounds that time both paths in alternating order (a load
    change on a shared machine hits both), ending once :data:`PROBE_AGREE` rounds agree: the rounds left could not
    change the verdict (:func:`_settled`).  Faithfulness is measured against the float32 plain forward of the same
    weights (the model is upcast in place for that one pass and cast back, which is lossless): in bfloat16 *every* path
    drifts from it (different kernels, batch shapes and accumulation orders: measured 0.4 nats per 100 scored
    tokens on a CPU, plain or not), so the reuse path is held to the plain path's own drift plus
    :data:`REUSE_MAX_DELTA_PER_100`, not to zero.  The load average before and after is kept with the record.
    """
    import torch

    from grebench.runtime import probe_busy, usable_cores

    load_before, neighbours = _load(), _neighbours()
    reqs = probe_requests(probe_papers(est))
    n_target = [est.encode(r).n_target for r in reqs]
    _timed(est, reqs[:2], False)
    _timed(est, reqs[:2], True)
    rounds: list[tuple[float, float]] = []
    fed: dict[bool, int] = {}
    plain: list[float] = []
    reuse: list[float] = []
    for k in range(PROBE_ROUNDS):
        timing: dict[bool, float] = {}
        for path in ((False, True) if k % 2 == 0 else (True, False)):
            before = est.positions_fed
            vals, timing[path] = _timed(est, reqs, path)
            fed[path] = est.positions_fed - before
            if path:
                reuse = vals
            else:
                plain = vals
        rounds.append((timing[False], timing[True]))
        if _settled(rounds):
            break
    dtype = next(est.model.parameters()).dtype
    if dtype == torch.float32:
        ref = plain
    else:
        # buffers kept in float32 by the loader (the rotary frequencies) would come back from float() → to(dtype)
        # in the low precision: every later score of this process would then differ from one whose probe was read
        # from the cache, so they are put back as they were
        saved = {name: buf.detach().clone() for name, buf in est.model.named_buffers()}
        try:
            est.model.float()
            ref, _ = _timed(est, reqs, False)
        finally:
            est.model.to(dtype)  # type: ignore[arg-type]  # transformers' stubs type the wrapped ``to`` narrowly
            for name, buf in saved.items():
                est.model.get_buffer(name).data = buf

    def drift(vals: list[float]) -> float:
        return sum(abs(a - b) for a, b in zip(vals, ref, strict=True)) / sum(n_target) * 100

    flop_ratio = fed[False] / max(1, fed[True])
    faster, basis, evidence = decide_reuse(rounds, flop_ratio)
    reuse_drift, plain_drift = drift(reuse), drift(plain)
    between = max(abs(a - b) / n * 100 for a, b, n in zip(reuse, plain, n_target, strict=True))
    faithful = reuse_drift <= plain_drift + REUSE_MAX_DELTA_PER_100
    t_plain = sorted(p for p, _ in rounds)[len(rounds) // 2]
    t_reuse = sorted(r for _, r in rounds)[len(rounds) // 2]
    others, load_after, cores = neighbours.cores(), _load(), usable_cores()
    busy = probe_busy(others, load_before, cores)
    why = (f"{evidence}; drift from float32 {reuse_drift:.4f} (reuse) vs {plain_drift:.4f} (plain) nats per 100 "
           f"scored tokens (reuse only if <= plain's + {REUSE_MAX_DELTA_PER_100})")
    return {"reuse": faster and faithful, "basis": basis, "speedup": round(t_plain / max(t_reuse, 1e-9), 3),
            "rounds": [[round(p, 4), round(r, 4)] for p, r in rounds], "flop_ratio": round(flop_ratio, 3),
            "reuse_drift_per_100_tokens": round(reuse_drift, 5), "plain_drift_per_100_tokens": round(plain_drift, 5),
            "max_delta_per_100_tokens": round(between, 5), "plain_s": round(t_plain, 3), "reuse_s": round(t_reuse, 3),
            "requests": len(reqs), "load_before": load_before, "load_after": load_after, "cores": cores,
            "others_cores": None if others is None else round(others, 2),
            "busy": busy, "why": why}


def probe_papers(est: HFEstimator) -> int:
    """Papers in the probe set: as many as the scoring engine gives one call of the plain path on this device.

    On a CPU that is one paper (both paths are compute-bound there).  On a GPU the plain path's advantage is that
    its batches span papers; a one-paper probe hides it.  Measured on an H100 at Llama-3.1-8B shape (bf16, 50 papers,
    ``benchmarks/scoring_engine.py --shape llama-3.1-8b``): a one-paper probe chose reuse (1.15x), which then ran the
    set at 0.9x the authors'-style loop, while the plain path ran it at 2.24x.
    """
    if est.device.type == "cpu":
        return 1
    return max(8, 4 * est.batch_tokens // 8192)


def _device_key(est: HFEstimator) -> dict[str, Any]:
    import torch

    from grebench.runtime import machine_key

    key = {**machine_key(), "device": str(est.device), "batch_tokens": est.batch_tokens}
    if est.device.type == "cuda":
        key["gpu"] = torch.cuda.get_device_name(est.device)
    papers = probe_papers(est)
    if papers > 1:  # a record from the one-paper probe is not reused on such a device
        key["probe_papers"] = papers
    return key


#: Where the answer is known in advance no probe runs: in float32 on a CPU the reuse path computes about 40 % of a
#: plain forward's positions (the FLOP count of :func:`probe_requests`: plain runs 2.51× the positions) and gives the
#: same log-probs to 1e-5 nats, and every probe taken on a CPU chose it (an AMX Xeon in bfloat16 5 of 5, an AVX2-only
#: EPYC in float32 5 of 5 beside other work and 2.15× quiet; docs/results.md); the probe cost 2.5-3.9 minutes of a
#: first run there.  A low precision or a GPU, where padding drift and kernel launch costs decide, is still measured.
def reuse_by_rule(est: HFEstimator) -> ReuseRecord | None:
    """The reuse record decided without timing (float32 on a CPU: reuse), or None where only a probe can tell."""
    if est.device.type != "cpu" or est.dtype != "float32":
        return None
    return {"reuse": True, "source": "rule", "basis": "flops",
            "why": "float32 on a CPU: reuse runs about 40 % of a plain forward's positions and equals it to 1e-5 "
                   "nats, so no probe is needed"}


def choose_reuse(est: HFEstimator, setting: str, cache_dir: Path | None) -> ReuseRecord:
    """Apply ``hf_prefix_reuse`` to ``est``: ``on``/``off`` as given; ``auto`` from the cached record of this
    machine, device and estimator id, else measured now (:func:`measure_reuse`) and cached.  Returns the record;
    the estimator id gets ``:kv=plain`` when a low-precision estimator runs without reuse."""
    from grebench.runtime import quieter_now

    if setting not in REUSE_CHOICES:
        raise ValueError(f"hf_prefix_reuse must be one of {', '.join(REUSE_CHOICES)}, got {setting!r}")
    base_id = est.id
    if setting != "auto":
        record: ReuseRecord = {"reuse": setting == "on", "source": "setting"}
    elif known := reuse_by_rule(est):
        record = known
    else:
        key = json.dumps({**_device_key(est), "estimator": base_id}, sort_keys=True)
        file = None if cache_dir is None else cache_dir / f"{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"
        cached = None
        if file is not None and file.is_file():
            try:
                cached = json.loads(file.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                cached = None
        if isinstance(cached, dict) and cached.get("key") == key and isinstance(cached.get("reuse"), bool) \
                and not quieter_now(cached, _load):
            record = cast(ReuseRecord, {**cached, "source": "cache", "file": str(file)})  # checked above
        else:
            record = {**measure_reuse(est), "key": key,
                      "created_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}
            if file is not None:
                file.parent.mkdir(parents=True, exist_ok=True)
                tmp = file.with_suffix(".tmp")
                tmp.write_text(json.dumps(record, indent=1), encoding="utf-8")
                tmp.replace(file)
            record = {**record, "source": "probe", "file": str(file) if file else None}
    est.reuse_prefix = bool(record["reuse"])
    est.reuse_record = record
    if not est.reuse_prefix and est.dtype != "float32":
        est.id = f"{base_id}:kv=plain"
    return record


def check_hf_arg(arg: str) -> None:
    """``hf:`` needs a NAME or PATH (whether the name is a built-in model or the path a checkpoint directory is
    checked too: ``catalogue_arg``)."""
    if not arg:
        raise ValueError("hf estimator spec must be hf:NAME (a built-in evaluation LM) or hf:PATH (a local checkpoint)")


@ESTIMATORS.register("hf", spec="hf:NAME|PATH",
                     summary="a built-in evaluation LM (grebench models list) or a local transformers checkpoint",
                     local_model=True, in_process=True, catalogue_arg=True, check_arg=check_hf_arg,
                     label=served_model_label("hf"),
                     tolerance=dtype_tolerance)
def make_hf(arg: str, context: EstimatorContext) -> HFEstimator:
    """``hf:NAME`` (a catalogue model, pulled and checked on first use) or ``hf:PATH`` (a local checkpoint).

    ``hf_dtype = auto`` runs the dtype :func:`grebench.runtime.choose_dtype` picks.  A catalogue model's id names the
    model and its weights' hash, not the directory it sits in, so its scores compare across machines:
    ``hf:NAME@<checkpoint sha8>:dtype=<dtype>:chat=<template sha8>:target=<target rule>``.
    """
    from grebench.models import MODELS, installed, resolve_checkpoint
    from grebench.runtime import choose_dtype

    check_hf_arg(arg)
    s = context.settings
    path, label = resolve_checkpoint(s, arg, context.progress)
    dtype, _why = choose_dtype(s, arg, s.scoring.hf_device, s.scoring.hf_dtype, context.progress)
    estimator = HFEstimator(str(path), dtype=dtype, device=s.scoring.hf_device, batch_tokens=s.scoring.hf_batch_tokens,
                            batch_bytes=s.scoring.hf_batch_mib * 2 ** 20)
    manifest = installed(s, label) if label in MODELS else None  # a path's label is absolute: never a name
    if manifest is not None:
        estimator.id = (f"hf:{label}@{manifest['checkpoint_sha256'][:8]}:dtype={dtype}"
                        f":chat={template_sha8(estimator.tokenizer)}:target={TARGET_RULE}")
    if s.scoring.hf_prefix_reuse == "auto" and reuse_by_rule(estimator) is None:
        with context.progress.task("reuse probe", total=1, unit="steps") as task:
            record = choose_reuse(estimator, s.scoring.hf_prefix_reuse, s.reuse_probes_path)
            task.advance()
    else:  # decided without a measurement: nothing to show progress of
        record = choose_reuse(estimator, s.scoring.hf_prefix_reuse, s.reuse_probes_path)
    log.info("hf estimator on %s: %s (%s%s)", estimator.device,
             "prefix reuse" if estimator.reuse_prefix else "plain forward batched across papers", record["source"],
             ": " + record["why"] if "why" in record else "")
    return estimator

"""The hf estimator: any local causal-LM checkpoint through transformers, scored by teacher forcing.

Speed without changing numbers — two levels of KV-cache reuse:

1. the per-paper prefix (system prompt + synopsis) is run once per (paper, synopsis);
2. from it, the prompt up to the end of the assistant header — the first reviewer's lines, or "Not available." for
   the marginal — is run once per (paper, first review), in one batch for all first reviews of the paper;
3. each target (a reference's lines + end-of-turn) then runs only its own tokens against its group's cache.

Target rows are sorted by length and cut into token-budget batches; rows whose contexts differ in length share one
batch through a padded KV tensor, an explicit attention mask and explicit position ids (pads are masked out, so they
never reach a scored token).  The LM head runs only at the positions that predict scored tokens, the log-softmax is
taken in float32, everything under ``torch.inference_mode``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from grebench._offline import apply_offline_defaults
from grebench.scoring._request import LogprobRequest, LogprobResult
from grebench.scoring.estimators import ESTIMATORS, EstimatorContext
from grebench.scoring.estimators._tokenize import RequestTokenizer, TokenizedRequest, template_sha8

_DTYPES = ("float32", "bfloat16", "float16")
_T = TypeVar("_T")


def _config_sha8(path: Path) -> str:
    cfg = path / "config.json"
    return hashlib.sha256(cfg.read_bytes()).hexdigest()[:8] if cfg.exists() else "noconfig"


@dataclass
class _Row:
    """One scored sequence: ``inputs`` run after ``ctx`` cached tokens; the last len(labels) inputs predict labels."""

    req: int
    group: int              # index into the KV tensors of the current chunk (-1: no cache)
    ctx: int                # cached context length
    inputs: list[int]
    labels: list[int]


def _cut(items: list[_T], length: Callable[[_T], int], budget: int, max_waste: float = 0.1) -> list[list[_T]]:
    """Cut items sorted by ascending length into right-padded batches of ≤ ``budget`` tokens with padding included;
    a batch also ends where padding would exceed ``max_waste`` of its tokens (pads are computed for nothing)."""
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


class HFEstimator:
    """Teacher-forced log-probs from a local transformers checkpoint, with two-level prefix KV reuse."""

    def __init__(self, path: str, dtype: str = "bfloat16", device: str = "auto", batch_tokens: int = 16_384,
                 reuse_prefix: bool = True) -> None:
        apply_offline_defaults()
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        root = Path(path).expanduser().resolve()
        if not root.is_dir():
            raise ValueError(f"hf estimator: {root} is not a local checkpoint directory")
        if dtype not in _DTYPES:
            raise ValueError(f"hf_dtype must be one of {_DTYPES}, got {dtype!r}")
        self.device = torch.device("cuda" if device == "auto" and torch.cuda.is_available() else
                                   "cpu" if device == "auto" else device)
        self.tokenizer = AutoTokenizer.from_pretrained(root, local_files_only=True)
        self.model = AutoModelForCausalLM.from_pretrained(root, dtype=getattr(torch, dtype), local_files_only=True,
                                                          attn_implementation="sdpa")
        # transformers' stubs type the wrapped ``to`` as taking the model itself; a torch.device is what it accepts
        self.model.to(self.device).eval()  # type: ignore[arg-type]
        self.encode = RequestTokenizer(self.tokenizer)
        self.batch_tokens = batch_tokens
        self.reuse_prefix = reuse_prefix
        self.id = f"hf:{root}@{_config_sha8(root)}:dtype={dtype}:chat={template_sha8(self.tokenizer)}"

    @classmethod
    def from_model(cls, model: Any, tokenizer: Any, id: str, batch_tokens: int = 16_384) -> HFEstimator:
        """Wrap an already loaded model and tokenizer (benchmarks with random weights use this)."""
        self = cls.__new__(cls)
        self.model, self.tokenizer, self.id = model.eval(), tokenizer, id
        self.device = next(model.parameters()).device
        self.encode = RequestTokenizer(tokenizer)
        self.batch_tokens, self.reuse_prefix = batch_tokens, True
        return self

    @property
    def papers_per_batch(self) -> int:
        """Papers the scoring engine gives one call: one on a CPU (a paper takes seconds to minutes there, so the
        progress bar and the cache move per paper and a crash loses at most one paper), more on a GPU."""
        return 1 if self.device.type == "cpu" else 8

    def logprobs(self, requests: Sequence[LogprobRequest]) -> list[LogprobResult]:
        """Summed log-probs of each target (its tokens plus the end-of-turn suffix), in request order."""
        import torch

        toks = [self.encode(r) for r in requests]
        sums: list[float] = [0.0] * len(requests)
        with torch.inference_mode():
            if not self.reuse_prefix:
                rows = [_Row(i, -1, 0, t.ids[:-1], t.ids[-t.n_target:]) for i, t in enumerate(toks)]
                self._score_rows(rows, None, sums)
            else:
                by_prefix: dict[tuple[int, ...], dict[tuple[int, ...], list[int]]] = {}
                for i, t in enumerate(toks):
                    by_prefix.setdefault(t.prefix, {}).setdefault(t.rest[:len(t.rest) - t.n_target], []).append(i)
                for prefix, groups in by_prefix.items():
                    self._score_prefix(prefix, groups, toks, sums)
        return [LogprobResult(v, t.n_target) for v, t in zip(sums, toks, strict=True)]

    def _score_prefix(self, prefix: tuple[int, ...], groups: dict[tuple[int, ...], list[int]],
                      toks: list[TokenizedRequest], sums: list[float]) -> None:
        """Level 1 (prefix) once, level 2 (first review + header) per group in batches, then the targets."""
        import torch

        past = None
        if prefix:
            out = self.model.base_model(input_ids=torch.tensor([prefix], device=self.device), use_cache=True)
            past = [(layer.keys, layer.values) for layer in out.past_key_values.layers]
        for chunk in _cut(sorted(groups, key=len), len, self.batch_tokens):
            kv = self._group_cache(past, len(prefix), chunk)
            rows = [_Row(i, k, len(prefix) + len(s) - 1, [s[-1], *toks[i].rest[len(s):-1]],
                         list(toks[i].rest[len(s):])) for k, s in enumerate(chunk) for i in groups[s]]
            self._score_rows(rows, kv, sums)

    def _group_cache(self, past: list[tuple[Any, Any]] | None, n_prefix: int,
                     chunk: list[tuple[int, ...]]) -> list[tuple[Any, Any]] | None:
        """KV of prefix + each group's shared tokens but the last (right-padded rows, one per group)."""
        import torch
        from transformers import DynamicCache

        width = max(len(s) for s in chunk) - 1
        if width <= 0:
            return None if past is None else [(k.expand(len(chunk), -1, -1, -1), v.expand(len(chunk), -1, -1, -1))
                                               for k, v in past]
        pad = self._pad_id()
        ids = torch.tensor([list(s[:-1]) + [pad] * (width - len(s) + 1) for s in chunk], device=self.device)
        cache = None
        if past is not None:
            cache = DynamicCache(ddp_cache_data=[(k.expand(len(chunk), -1, -1, -1), v.expand(len(chunk), -1, -1, -1))
                                                 for k, v in past])
        out = self.model.base_model(input_ids=ids, past_key_values=cache, use_cache=True)
        return [(layer.keys, layer.values) for layer in out.past_key_values.layers]

    def _pad_id(self) -> int:
        return self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0

    def _score_rows(self, rows: list[_Row], kv: list[tuple[Any, Any]] | None, sums: list[float]) -> None:
        """Sort rows by length, cut into batches of ≤ batch_tokens padded input tokens, add each row's sum."""
        rows.sort(key=lambda r: (len(r.inputs), r.ctx))
        for batch in _cut(rows, lambda r: len(r.inputs), self.batch_tokens):
            for row, val in zip(batch, self._score_batch(batch, kv), strict=True):
                sums[row.req] = val

    def _score_batch(self, batch: list[_Row], kv: list[tuple[Any, Any]] | None) -> list[float]:
        import torch
        from transformers import DynamicCache

        dev = self.device
        width = max(len(r.inputs) for r in batch)
        ids = torch.tensor([r.inputs + [self._pad_id()] * (width - len(r.inputs)) for r in batch], device=dev)
        kwargs: dict[str, Any] = {}
        if kv is not None:
            n_ctx = max(r.ctx for r in batch)
            sel = torch.tensor([r.group for r in batch], device=dev)
            kwargs["past_key_values"] = DynamicCache(ddp_cache_data=[
                (k[:, :, :n_ctx].index_select(0, sel), v[:, :, :n_ctx].index_select(0, sel)) for k, v in kv])
            ctx = torch.tensor([r.ctx for r in batch], device=dev)
            # context slots beyond a row's own context hold another group's pads: masked out
            keep = torch.arange(n_ctx, device=dev)[None, :] < ctx[:, None]
            kwargs["attention_mask"] = torch.cat([keep, torch.ones(len(batch), width, dtype=torch.bool, device=dev)],
                                                 dim=1).long()
            kwargs["position_ids"] = ctx[:, None] + torch.arange(width, device=dev)[None, :]
        hidden = self.model.base_model(input_ids=ids, use_cache=kv is not None, **kwargs).last_hidden_state
        rows_i, labels = [], []
        cols: list[int] = []
        for b, r in enumerate(batch):
            n = len(r.labels)
            rows_i += [b] * n
            cols += range(len(r.inputs) - n, len(r.inputs))
            labels += r.labels
        rows_t = torch.tensor(rows_i, device=dev)
        h = hidden[rows_t, torch.tensor(cols, device=dev)]
        logp = torch.log_softmax(self.model.get_output_embeddings()(h).float(), dim=-1)
        tok_lp = logp.gather(1, torch.tensor(labels, device=dev)[:, None])[:, 0]
        out = torch.zeros(len(batch), dtype=torch.float64, device=dev).index_add_(0, rows_t, tok_lp.double())
        return out.tolist()


@ESTIMATORS.register("hf", spec="hf:NAME|PATH",
                     summary="a built-in evaluation LM (grebench models list) or a local transformers checkpoint")
def make_hf(arg: str, context: EstimatorContext) -> HFEstimator:
    """``hf:NAME`` (a catalogue model, pulled and checked on first use) or ``hf:PATH`` (a local checkpoint).

    ``hf_dtype = auto`` runs the dtype :func:`grebench.models.choose_dtype` picks.  A catalogue model's id names the
    model and its weights' hash, not the directory it sits in, so its scores compare across machines:
    ``hf:NAME@<checkpoint sha8>:dtype=<dtype>:chat=<template sha8>``.
    """
    from grebench.models import MODELS, choose_dtype, installed, resolve_checkpoint

    if not arg:
        raise ValueError("hf estimator spec must be hf:NAME (a built-in evaluation LM) or hf:PATH (a local checkpoint)")
    s = context.settings
    path, label = resolve_checkpoint(s, arg, context.progress)
    dtype, _why = choose_dtype(s, arg, s.hf_device, s.hf_dtype, context.progress)
    estimator = HFEstimator(str(path), dtype=dtype, device=s.hf_device, batch_tokens=s.hf_batch_tokens)
    manifest = installed(s, label) if label in MODELS else None  # a path's label is absolute: never a name
    if manifest is not None:
        estimator.id = (f"hf:{label}@{manifest['checkpoint_sha256'][:8]}:dtype={dtype}"
                        f":chat={template_sha8(estimator.tokenizer)}")
    return estimator

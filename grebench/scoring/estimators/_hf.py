"""The hf estimator: any local causal-LM checkpoint through transformers, scored by teacher forcing.

Speed without changing numbers: the per-paper prefix (system prompt + synopsis) is run once and its KV cache reused
for the marginal and every candidate's conditional of that paper; requests of a paper are sorted by length and cut
into token-budget batches, right-padded (pads sit after every scored position, so under the causal mask they never
influence a scored token and no attention mask is needed); the LM head runs only at scored positions and the
log-softmax is taken in float32; everything under ``torch.inference_mode``.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from grebench._offline import apply_offline_defaults
from grebench.scoring._request import LogprobRequest, LogprobResult
from grebench.scoring.estimators._tokenize import RequestTokenizer, TokenizedRequest, template_sha8

_DTYPES = ("float32", "bfloat16", "float16")


def _config_sha8(path: Path) -> str:
    cfg = path / "config.json"
    return hashlib.sha256(cfg.read_bytes()).hexdigest()[:8] if cfg.exists() else "noconfig"


class HFEstimator:
    """Teacher-forced log-probs from a local transformers checkpoint, with per-paper prefix KV reuse."""

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
        self.model = AutoModelForCausalLM.from_pretrained(root, dtype=getattr(torch, dtype), local_files_only=True)
        self.model.to(self.device).eval()
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

    def logprobs(self, requests: Sequence[LogprobRequest]) -> list[LogprobResult]:
        """Summed log-probs of each target (its tokens plus the end-of-turn suffix), in request order."""
        import torch

        toks = [self.encode(r) for r in requests]
        groups: dict[tuple[int, ...], list[int]] = {}
        for i, t in enumerate(toks):
            groups.setdefault(t.prefix if self.reuse_prefix else (), []).append(i)
        out: list[LogprobResult | None] = [None] * len(requests)
        with torch.inference_mode():
            for prefix, idx in groups.items():
                past = self._prefix_cache(prefix) if prefix else None
                idx.sort(key=lambda i: len(toks[i].ids) if not prefix else len(toks[i].rest))
                for batch in self._batches(idx, toks, len(prefix)):
                    for i, res in zip(batch, self._score(past, len(prefix), [toks[i] for i in batch]), strict=True):
                        out[i] = res
        return [r for r in out if r is not None]

    def _prefix_cache(self, prefix: tuple[int, ...]) -> Any:
        import torch

        ids = torch.tensor([prefix], device=self.device)
        return self.model(input_ids=ids, use_cache=True, logits_to_keep=1).past_key_values

    def _batches(self, idx: list[int], toks: list[TokenizedRequest], n_prefix: int) -> list[list[int]]:
        batches: list[list[int]] = []
        cur: list[int] = []
        for i in idx:  # sorted ascending: the last one is the longest, padding stays small
            length = (len(toks[i].rest) if n_prefix else len(toks[i].ids)) + n_prefix
            if cur and length * (len(cur) + 1) > self.batch_tokens:
                batches.append(cur)
                cur = []
            cur.append(i)
        if cur:
            batches.append(cur)
        return batches

    def _score(self, past: Any, n_prefix: int, items: list[TokenizedRequest]) -> list[LogprobResult]:
        import torch

        seqs = [list(t.rest) if past is not None else t.ids for t in items]
        width = max(len(s) for s in seqs)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        ids = torch.tensor([s + [pad] * (width - len(s)) for s in seqs], device=self.device)
        kwargs: dict[str, Any] = {}
        if past is not None:
            cache = copy.deepcopy(past)
            if len(items) > 1:
                cache.batch_repeat_interleave(len(items))
            kwargs["past_key_values"] = cache
        hidden = self.model.base_model(input_ids=ids, use_cache=past is not None, **kwargs).last_hidden_state
        # position j predicts token j+1: the scored tokens are the last n_target of each sequence
        rows, cols, labels = [], [], []
        for b, (s, t) in enumerate(zip(seqs, items, strict=True)):
            start = len(s) - t.n_target
            rows += [b] * t.n_target
            cols += range(start - 1, len(s) - 1)
            labels += s[start:]
        rows_t = torch.tensor(rows, device=self.device)
        h = hidden[rows_t, torch.tensor(cols, device=self.device)]
        logp = torch.log_softmax(self.model.get_output_embeddings()(h).float(), dim=-1)
        tok_lp = logp.gather(1, torch.tensor(labels, device=self.device)[:, None])[:, 0]
        sums = torch.zeros(len(items), dtype=torch.float64, device=self.device).index_add_(0, rows_t, tok_lp.double())
        return [LogprobResult(float(v), t.n_target) for v, t in zip(sums.tolist(), items, strict=True)]

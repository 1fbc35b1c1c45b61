"""Evaluation-LM estimators for GEM / GEM-S, resolved from a spec string.

``offline`` (embedded n-gram + copy LM), ``hf:PATH`` (transformers), ``vllm:URL[,URL...]`` and ``sglang:URL``
(servers).  Implementations are imported lazily: importing this package never imports torch or httpx clients.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from grebench.scoring.estimators._base import Estimator

if TYPE_CHECKING:
    from grebench.settings import Settings

__all__ = ["Estimator", "resolve_estimator"]


def resolve_estimator(
    spec: str, settings: Settings, corpus: Mapping[str, Sequence[str]] | None = None
) -> Estimator:
    """Build the estimator named by ``spec``; ``corpus`` (paper_id -> review judgment texts) is needed by offline."""
    kind, _, arg = spec.strip().partition(":")
    if kind == "offline":
        if corpus is None:
            raise ValueError("the offline estimator needs the corpus of human-review judgment lines")
        from grebench.scoring.estimators._offline import OfflineEstimator

        return OfflineEstimator(corpus)
    if kind == "hf":
        if not arg:
            raise ValueError("hf estimator spec must be hf:PATH (a local checkpoint directory)")
        from grebench.scoring.estimators._hf import HFEstimator

        return HFEstimator(arg, dtype=settings.hf_dtype, device=settings.hf_device,
                           batch_tokens=settings.hf_batch_tokens)
    if kind in ("vllm", "sglang"):
        urls = [u.strip() for u in arg.split(",") if u.strip()]
        if not urls:
            raise ValueError(f"{kind} estimator spec must be {kind}:URL[,URL...]")
        from grebench.scoring.estimators._server import ServerEstimator

        return ServerEstimator(kind, urls, tokenizer=settings.estimator_tokenizer or None,
                               concurrency=settings.estimator_concurrency,
                               timeout_s=settings.estimator_timeout_s)
    raise ValueError(f"unknown estimator {spec!r}: use offline, hf:PATH, vllm:URL[,URL...] or sglang:URL")

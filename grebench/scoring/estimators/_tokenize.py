"""Client-side tokenisation of GEM requests, shared by the hf, vLLM and SGLang estimators.

The conversation is rendered with the checkpoint's own chat template (``date_string`` pinned, so Llama-3.1
templates do not inject today's date) and tokenised *piecewise* at three boundaries — before the first reviewer's
lines, before the assistant's target, and after it — each of which sits at a newline or a special token, where
byte-level BPE pre-tokenisers split anyway.  Piecewise tokenisation makes the token ids identical for every
estimator and makes the per-paper prefix (system prompt + synopsis) a true token prefix that can be cached.

Scored tokens: the target text's tokens plus the template's end-of-turn suffix (e.g. ``<|eot_id|>``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from grebench.scoring._request import NOT_AVAILABLE, LogprobRequest, render_messages

PINNED_DATE = "26 Jul 2024"
_MARK = "\x00GEM-FIRST-REVIEW\x00"
_TMARK = "\x00GEM-TARGET\x00"


@dataclass(frozen=True)
class TokenizedRequest:
    """Token ids of one request: ``prefix`` is shared by every request of a paper with the same synopsis."""

    prefix: tuple[int, ...]
    rest: tuple[int, ...]     # first review + end of user turn + assistant header + target + end-of-turn
    n_target: int             # the last n_target ids of ``rest`` are scored

    @property
    def ids(self) -> list[int]:
        """The full prompt."""
        return [*self.prefix, *self.rest]


def template_sha8(tokenizer: Any) -> str:
    """Short hash of the chat template, recorded in the estimator id."""
    return hashlib.sha256((tokenizer.chat_template or "").encode()).hexdigest()[:8]


def tokenizer_sha8(tokenizer: Any) -> str:
    """Short hash of the vocabulary and chat template, recorded in the estimator id."""
    vocab = sorted(tokenizer.get_vocab().items())
    return hashlib.sha256(repr((vocab, tokenizer.chat_template)).encode()).hexdigest()[:8]


class RequestTokenizer:
    """Renders and tokenises requests with a Hugging Face tokenizer, caching the per-paper prefix."""

    def __init__(self, tokenizer: Any) -> None:
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError("the evaluation-LM tokenizer has no chat template (use an instruct checkpoint)")
        self.tok = tokenizer
        self._prefix_cache: dict[tuple[str | None, str], tuple[int, ...]] = {}

    def _encode(self, text: str) -> tuple[int, ...]:
        return tuple(self.tok(text, add_special_tokens=False)["input_ids"])

    def _render(self, req: LogprobRequest) -> tuple[str, str, str]:
        marked = LogprobRequest(req.paper_id, req.synopsis, _MARK, _TMARK, req.prompt_version)
        msgs = [*render_messages(marked), {"role": "assistant", "content": _TMARK}]
        text = self.tok.apply_chat_template(msgs, tokenize=False, date_string=PINNED_DATE)
        head, _, tail = text.partition(_MARK)
        middle, _, suffix = tail.partition(_TMARK)
        if _TMARK not in tail or _TMARK in suffix:
            raise ValueError("chat template did not render the GEM prompt as expected")
        return head, middle, suffix

    def __call__(self, req: LogprobRequest) -> TokenizedRequest:
        """Token ids of the request, with the scored span at the end."""
        head, middle, suffix = self._render(req)
        key = (req.synopsis, head)
        prefix = self._prefix_cache.get(key)
        if prefix is None:
            if len(self._prefix_cache) > 64:
                self._prefix_cache.clear()
            prefix = self._prefix_cache[key] = self._encode(head)
        first = self._encode(req.first_review if req.first_review else NOT_AVAILABLE)
        target = self._encode(req.target) + self._encode(suffix)
        return TokenizedRequest(prefix, first + self._encode(middle) + target, len(target))

"""Client-side tokenisation of GEM requests, shared by the hf, vLLM and SGLang estimators.

The conversation is rendered with the checkpoint's own chat template (``date_string`` pinned, so Llama-3.1
templates do not inject today's date) and tokenised *piecewise* at three boundaries — before the first reviewer's
lines, before the assistant's target, and after it — each of which sits at a newline or a special token, where
byte-level BPE pre-tokenisers split anyway.  Piecewise tokenisation makes the token ids identical for every
estimator and makes the per-paper prefix (system prompt + synopsis) a true token prefix that can be cached.

Scored tokens: the target text's tokens plus the template's end-of-turn suffix (e.g. ``<|eot_id|>``), except the
fixed words of each judgment line's opening phrase (:data:`TARGET_RULE`, issue 35).  A reference's lines all open
with "The reviewer <verb>"; the words "The reviewer" are the output format, identical in every line of every review,
and the verb is one of four.  What the LM gives those tokens measures how well the context taught it the format,
not what it knows about the paper: a first review padded with more lines teaches the format better, and that alone
raised GEM-S (docs/scoring.md, "Padding").  So "The reviewer" and the verb's continuation tokens are not scored, and
the verb's first token is scored as a choice among the four verbs (its probability renormalised over them): which
judgment a line makes is information, the format is not.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from typing import Any

from grebench.scoring._request import NOT_AVAILABLE, LogprobRequest, render_messages

PINNED_DATE = "26 Jul 2024"
_MARK = "\x00GEM-FIRST-REVIEW\x00"
_TMARK = "\x00GEM-TARGET\x00"
#: What of a target is scored, and how; part of the id of every estimator that tokenises (a new rule is a new
#: estimator id, so scores made under another rule are never mixed with these).
TARGET_RULE = "judgment-v1"
JUDGMENT_VERBS = ("appreciates", "criticizes", "questions", "suggests")
_PHRASE_RE = re.compile(rf"^The reviewer ({'|'.join(JUDGMENT_VERBS)})\b", re.MULTILINE)


@dataclass(frozen=True)
class TokenizedRequest:
    """Token ids of one request: ``prefix`` is shared by every request of a paper with the same synopsis."""

    prefix: tuple[int, ...]
    rest: tuple[int, ...]     # first review + end of user turn + assistant header + target + end-of-turn
    n_target: int             # the last n_target ids of ``rest`` are the target
    skip: tuple[int, ...] = ()    # target positions (0 = its first token) that are not scored
    choice: tuple[int, ...] = ()  # target positions scored as a choice among ``RequestTokenizer.verb_ids``

    def scored(self) -> list[int]:
        """Target positions that count, in order."""
        skip = set(self.skip)
        return [j for j in range(self.n_target) if j not in skip]

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
        # the first token of each verb where it follows "The reviewer" (a space, then the verb)
        firsts = [self._encode(f"The reviewer {verb}")[len(self._encode("The reviewer"))] for verb in JUDGMENT_VERBS]
        if len(set(firsts)) != len(firsts):
            raise ValueError("the evaluation-LM tokenizer gives two judgment verbs the same first token")
        self.verb_ids: tuple[int, ...] = tuple(firsts)
        # a paper's requests repeat their parts: each candidate review once per reference, each reference once per
        # candidate, the rendering once per synopsis; tokenising each part once makes a request ~5x cheaper to send
        # (issue 61: 2.7 ms of a server request's client CPU was tokenising)
        self._encode_cached = functools.lru_cache(maxsize=1024)(self._encode)
        self._target_cached = functools.lru_cache(maxsize=1024)(self.target)
        self._render_cached = functools.lru_cache(maxsize=64)(self._render_key)

    def _encode(self, text: str) -> tuple[int, ...]:
        return tuple(self.tok(text, add_special_tokens=False)["input_ids"])

    def _render(self, req: LogprobRequest) -> tuple[str, str, str]:
        return self._render_cached(req.synopsis, req.prompt_version)

    def _render_key(self, synopsis: str | None, prompt_version: str) -> tuple[str, str, str]:
        marked = LogprobRequest("", synopsis, _MARK, _TMARK, prompt_version)
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
        first = self._encode_cached(req.first_review if req.first_review else NOT_AVAILABLE)
        ids, skip, choice = self._target_cached(req.target)
        target = ids + self._encode_cached(suffix)
        return TokenizedRequest(prefix, first + self._encode_cached(middle) + target, len(target), skip, choice)

    def target(self, text: str) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
        """The target's ids (as :meth:`_encode` gives them), the positions not scored and the verb-choice positions
        (:data:`TARGET_RULE`): in each line that opens with a judgment phrase, the tokens of "The reviewer" and of
        the verb are not scored, except the verb's first token when it is one of :attr:`verb_ids`."""
        enc = self.tok(text, add_special_tokens=False, return_offsets_mapping=True)
        ids, spans = tuple(enc["input_ids"]), enc["offset_mapping"]
        skip: list[int] = []
        choice: list[int] = []
        j = 0
        for m in _PHRASE_RE.finditer(text):
            while j < len(ids) and spans[j][1] <= m.start():
                j += 1
            verb_start = m.start(1) - 1  # the space before the verb: byte-level BPEs put it in the verb's token
            first_verb = True
            while j < len(ids) and spans[j][0] < m.end():
                if spans[j][1] > verb_start and first_verb:
                    first_verb = False
                    if ids[j] in self.verb_ids:
                        choice.append(j)
                        j += 1
                        continue
                skip.append(j)
                j += 1
        return ids, tuple(skip), tuple(choice)

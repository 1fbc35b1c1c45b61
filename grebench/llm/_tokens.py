"""Offline token counting, for fitting a prompt into a model's context.

litellm ships the ``cl100k_base`` encoding file and points tiktoken's cache
at it, so tiktoken counts without a download.  If that ever fails (another
litellm layout, a read-only cache), counts fall back to ``len(text) // 4``
and :data:`TOKENIZER` says which rule is in use.
"""

from __future__ import annotations

import logging
from functools import lru_cache
from typing import Any

from grebench._offline import apply_offline_defaults

log = logging.getLogger(__name__)
CHARS_PER_TOKEN = 4


@lru_cache(maxsize=1)
def _encoding() -> Any:
    apply_offline_defaults()
    try:
        from litellm.litellm_core_utils.default_encoding import encoding  # sets TIKTOKEN_CACHE_DIR to bundled files

        encoding.encode("probe")
        return encoding
    except Exception as exc:
        log.warning("tiktoken cl100k_base not available offline (%s); counting tokens as chars/4", exc)
        return None


def tokenizer_name() -> str:
    """Which counting rule is in use: ``tiktoken:cl100k_base`` or ``chars/4``."""
    return "tiktoken:cl100k_base" if _encoding() is not None else f"chars/{CHARS_PER_TOKEN}"


def count_tokens(text: str) -> int:
    """Approximate token count of ``text`` (cl100k_base, or chars/4 when unavailable)."""
    enc = _encoding()
    if enc is None:
        return len(text) // CHARS_PER_TOKEN
    return len(enc.encode(text, disallowed_special=()))


def truncate_to_tokens(text: str, max_tokens: int) -> str:
    """The longest prefix of ``text`` with at most ``max_tokens`` tokens (same rule as :func:`count_tokens`)."""
    enc = _encoding()
    if enc is None:
        return text[: max_tokens * CHARS_PER_TOKEN]
    tokens = enc.encode(text, disallowed_special=())
    return text if len(tokens) <= max_tokens else enc.decode(tokens[:max_tokens])

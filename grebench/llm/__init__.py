"""The shared LLM client: every chat call of the product goes through :class:`LLMClient`.

Calls go through litellm (any provider, any OpenAI-compatible endpoint),
streamed (or one JSON reply from an endpoint that does not stream) under an
outer deadline and a size cap, retried with back-off, and
cached by their canonical request in the ``llm_calls`` table, so a rerun with
nothing new makes no calls.  Calls to a submitted endpoint go only to its
checked address while :func:`pinned_endpoints` is active (see
:mod:`grebench.llm._call`).  Importing this package does not import litellm.
"""

from grebench.llm._call import PinnedProviderError, pinned_endpoints, pinned_for
from grebench.llm._client import LLMClient
from grebench.llm._tokens import count_tokens, tokenizer_name, truncate_to_tokens
from grebench.llm._types import ChatRequest, ChatResult

__all__ = ["ChatRequest", "ChatResult", "LLMClient", "PinnedProviderError", "count_tokens", "pinned_endpoints",
           "pinned_for", "tokenizer_name", "truncate_to_tokens"]

"""The shared LLM client: every chat call of the product goes through :class:`LLMClient`.

Calls go through litellm (any provider, any OpenAI-compatible endpoint),
streamed (or one JSON reply from an endpoint that does not stream) under an
outer deadline and a size cap, retried with back-off, and
cached by their canonical request in the ``llm_calls`` table, so a rerun with
nothing new makes no calls; a cached reply serves only requests of its own
namespace (same endpoint, same credentials; a submitted model's are its own:
:mod:`grebench.llm._scope`).  Calls to a submitted endpoint go only to its
checked address while :func:`pinned_endpoints` is active (see
:mod:`grebench.llm._call`).

Typed decisions (:class:`DecisionRequest` → :meth:`LLMClient.decide_many` → :class:`DecisionResult`: a probability
per option from one forward pass of a local model, ``/v1/systemone``) go only to loopback servers grebench started,
registered with :func:`local_endpoints`, and are cached in the same table.  Importing this package does not import
litellm.

The settings file's endpoint tables (``[[candidates]]``, ``[[judges]]``) are read by one parser:
:func:`endpoint_tables`, :func:`table_name`, :func:`parse_endpoint`.
"""

from grebench.llm._call import PinnedProviderError, pinned_endpoints, pinned_for
from grebench.llm._client import LLMClient
from grebench.llm._decision import DecisionRequest, DecisionResult, MalformedDecision
from grebench.llm._fence import boundary, fence_note, fenced, fenced_block, fill
from grebench.llm._local import LocalEndpointError, is_loopback, local_endpoints
from grebench.llm._scope import credential_scope, owner_scope
from grebench.llm._tables import LITELLM_MODEL, NAME_PATTERN, Endpoint, endpoint_tables, parse_endpoint, table_name
from grebench.llm._tokens import count_tokens, tokenizer_name, truncate_to_tokens
from grebench.llm._types import PUBLIC_API_BASES, SUBMISSION_KEY_PREFIX, ChatRequest, ChatResult

__all__ = ["LITELLM_MODEL", "NAME_PATTERN", "PUBLIC_API_BASES", "SUBMISSION_KEY_PREFIX", "ChatRequest", "ChatResult",
           "DecisionRequest", "DecisionResult", "Endpoint", "LLMClient", "LocalEndpointError", "MalformedDecision",
           "PinnedProviderError", "boundary", "count_tokens", "credential_scope", "endpoint_tables", "fence_note",
           "fenced", "fenced_block", "fill", "is_loopback", "local_endpoints", "owner_scope", "parse_endpoint",
           "pinned_endpoints", "pinned_for", "table_name", "tokenizer_name", "truncate_to_tokens"]

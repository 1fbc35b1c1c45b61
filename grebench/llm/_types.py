"""The request and result records of one LLM chat call."""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from grebench.llm._scope import scoped_key

# Parameters that describe the caller's budget, not the API call: never sent to the provider.
NON_API_PARAMS = frozenset({"context_tokens"})


def _canonical_params(params: tuple[tuple[str, Any], ...]) -> dict[str, Any]:
    values = dict(params)
    values.setdefault("temperature", 0)
    return dict(sorted(values.items()))


#: The process-only environment variable that carries a submitter's key during one evaluation (see
#: ``grebench.submissions.key_in_env``); the only variable an isolated request may name.
SUBMISSION_KEY_PREFIX = "GREBENCH_SUBMISSION_KEY_"

#: OpenAI-compatible endpoints of the hosted providers a submission may name without a base URL.  An isolated
#: request is always sent through an explicit OpenAI client to one of these (or its own pinned base URL), never to a
#: base URL that litellm or the OpenAI SDK would read from the environment.
PUBLIC_API_BASES: dict[str, str] = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com/v1",
    "gemini": "https://generativelanguage.googleapis.com/v1beta/openai",
    "mistral": "https://api.mistral.ai/v1",
    "groq": "https://api.groq.com/openai/v1",
    "together_ai": "https://api.together.xyz/v1",
    "fireworks_ai": "https://api.fireworks.ai/inference/v1",
    "deepseek": "https://api.deepseek.com/v1",
    "cohere": "https://api.cohere.ai/compatibility/v1",
    "openrouter": "https://openrouter.ai/api/v1",
    "xai": "https://api.x.ai/v1",
    "perplexity": "https://api.perplexity.ai",
    "deepinfra": "https://api.deepinfra.com/v1/openai",
    "cerebras": "https://api.cerebras.ai/v1",
    "sambanova": "https://api.sambanova.ai/v1",
    "nvidia_nim": "https://integrate.api.nvidia.com/v1",
}


@dataclass(frozen=True)
class ChatRequest:
    """One chat-completion request, hashable so that it can key the cache.

    ``api_key_env`` is the *name* of the environment variable holding the key:
    the key itself is read at call time and never enters the cache key, the
    store, logs or errors.  ``stream`` says how the reply is fetched, not what
    is asked: it is not part of the cache key either (``stream = false`` for an
    endpoint that cannot stream reuses the results of streamed calls).

    ``endpoint_id`` names the endpoint in the cache key instead of ``api_base`` when the address is not the
    endpoint's identity: a local model server (``kind = "local"``) listens on a new port on every start, so its
    calls are keyed by a stable name (``local:<checkpoint>:<dtype>``) and a second run finds the first run's calls.
    Without it (every other endpoint) the key is what it always was.
    """

    model: str
    messages: tuple[tuple[str, str], ...]
    purpose: str
    prompt_version: str
    api_base: str | None = None
    api_key_env: str | None = None
    params: tuple[tuple[str, Any], ...] = ()
    stream: bool = True
    endpoint_id: str | None = None
    #: A publicly submitted model: the call never reads the operator's environment (keys, base URLs, org ids,
    #: custom headers, proxies): its key is the submitter's own (``api_key_env`` may only name the evaluation's
    #: ``SUBMISSION_KEY_PREFIX`` variable) or the call is refused.  Not part of the cache key.
    isolated: bool = False
    #: Who may share this call's cached reply (see :mod:`grebench.llm._scope`): None for the operator's keyless
    #: requests, ``credential:<fingerprint>`` for an operator key, ``owner:<who>`` for a submitted model.  Part of the
    #: cache key.  An isolated request without one gets a namespace of its own (never shared, never found again).
    cache_scope: str | None = None

    def __post_init__(self) -> None:
        if self.isolated and self.cache_scope is None:
            # a submitted endpoint never reads (or writes) a reply another candidate may read
            object.__setattr__(self, "cache_scope", f"owner:unnamed:{uuid.uuid4().hex}")
        # Sorted so that the same parameters in another order are the same request.
        object.__setattr__(self, "params", tuple(sorted(tuple(self.params), key=lambda kv: kv[0])))
        object.__setattr__(self, "messages", tuple((str(r), str(c)) for r, c in self.messages))

    @property
    def api_params(self) -> dict[str, Any]:
        """Parameters sent to the provider (temperature defaults to 0)."""
        return {k: v for k, v in _canonical_params(self.params).items() if k not in NON_API_PARAMS}

    @property
    def messages_sha256(self) -> str:
        """Hash of the messages alone (to find calls about the same prompt)."""
        return hashlib.sha256(json.dumps(self.messages, ensure_ascii=False).encode()).hexdigest()

    def params_json(self) -> str:
        """The canonical parameters as JSON."""
        return json.dumps(_canonical_params(self.params), sort_keys=True, default=str)

    @property
    def endpoint(self) -> str | None:
        """The endpoint as the cache key names it: ``endpoint_id``, else ``api_base``."""
        return self.endpoint_id or (self.api_base or "").rstrip("/") or None

    def cache_key(self) -> str:
        """SHA-256 of the canonical request in its :attr:`cache_scope`; the API key is never part of it.  With
        ``endpoint_id`` the endpoint's name stands for the model too: a local server serves its checkpoint under the
        directory's path, which moves with the data dir (and is relative when the data dir is), while
        ``local:<checkpoint>:<dtype>`` does not.  Unscoped, the key is what it was before scopes existed."""
        canonical = {
            "model": self.endpoint_id or self.model,
            "api_base": self.endpoint,
            "messages": [list(m) for m in self.messages],
            "params": _canonical_params(self.params),
            "purpose": self.purpose,
            "prompt_version": self.prompt_version,
        }
        blob = json.dumps(canonical, sort_keys=True, ensure_ascii=False, default=str)
        return scoped_key(self.cache_scope, hashlib.sha256(blob.encode()).hexdigest())

    @property
    def provider(self) -> str:
        """What concurrency is bounded per: the endpoint, or the litellm provider prefix."""
        return (self.api_base or "").rstrip("/") or self.model.split("/", 1)[0]


@dataclass
class ChatResult:
    """Outcome of one (possibly cached) call: text or a clear error, with usage and timing."""

    status: str
    text: str | None
    error: str | None
    tokens_in: int | None
    tokens_out: int | None
    cost_usd: float | None
    latency_s: float | None
    attempts: int
    truncated: bool
    cached: bool
    logprobs: list[dict[str, Any]] | None
    generated_at: datetime
    request_key: str = field(default="")
    unreachable: bool = False  # failed because the endpoint could not be reached (DNS, refused, TLS)

    @property
    def ok(self) -> bool:
        """Whether the call produced usable text."""
        return self.status == "ok"

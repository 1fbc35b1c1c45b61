"""Server estimators: a vLLM OpenAI-compatible server or an SGLang server scores client-tokenised prompts.

Prompts are tokenised here with the model's tokenizer and pinned chat template (``_tokenize``), so the scored token
ids are exactly those of the hf estimator.  vLLM: ``POST /v1/completions`` with token-id ``prompt``, ``max_tokens=1``
and ``prompt_logprobs=0`` (each position's dict holds the actual prompt token).  SGLang: ``POST /generate`` with
``input_ids``, ``return_logprob`` and ``logprob_start_len`` one token before the target.  Requests are sent paper by
paper, spread round-robin over the URLs, ``concurrency`` at a time, retried with back-off on 429/5xx/network errors.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from grebench import stop
from grebench.scoring._request import LogprobRequest, LogprobResult
from grebench.scoring.estimators import ESTIMATORS, EstimatorContext, EstimatorFactory, served_model_label
from grebench.scoring.estimators._tokenize import RequestTokenizer, TokenizedRequest, tokenizer_sha8


class ServerError(RuntimeError):
    """The evaluation-LM server failed or answered something that is not a log-prob response."""


class ServerEstimator:
    """vLLM or SGLang evaluation-LM reached over HTTP."""

    def __init__(self, kind: str, urls: Sequence[str], tokenizer: str | None = None, concurrency: int = 8,
                 timeout_s: float = 300.0, max_retries: int = 4, backoff_s: float = 1.0) -> None:
        from grebench._offline import apply_offline_defaults

        apply_offline_defaults()
        from transformers import AutoTokenizer

        if kind not in ("vllm", "sglang"):
            raise ValueError(f"unknown server kind {kind!r}")
        self.kind, self.urls = kind, [u.rstrip("/") for u in urls]
        self.client = httpx.Client(timeout=timeout_s)
        self.concurrency, self.max_retries, self.backoff_s = max(1, concurrency), max_retries, backoff_s
        self.model = self._model_id()
        path = tokenizer or self.model
        if not Path(path).expanduser().is_dir():
            raise ValueError(f"{kind} estimator needs a local tokenizer directory: set estimator_tokenizer "
                             f"(the server serves {self.model!r})")
        self.tokenizer = AutoTokenizer.from_pretrained(Path(path).expanduser(), local_files_only=True)
        self.encode = RequestTokenizer(self.tokenizer)
        self.id = f"{kind}:{self.model}@{tokenizer_sha8(self.tokenizer)}"

    def _model_id(self) -> str:
        if self.kind == "vllm":
            data = self._call("GET", self.urls[0] + "/v1/models", None)
            return str(data["data"][0]["id"])
        data = self._call("GET", self.urls[0] + "/get_model_info", None)
        return str(data["model_path"])

    def _call(self, method: str, url: str, body: dict[str, Any] | None) -> Any:
        for attempt in range(self.max_retries + 1):
            stop.check()  # a request boundary (also after a back-off)
            try:
                resp = self.client.request(method, url, json=body)
                if resp.status_code == 429 or resp.status_code >= 500:
                    raise ServerError(f"{url}: HTTP {resp.status_code}")
                if resp.status_code >= 400:
                    raise ServerError(f"{url}: HTTP {resp.status_code}: {resp.text[:300]}")
                return resp.json()
            except (httpx.TransportError, ServerError) as exc:
                retryable = not (isinstance(exc, ServerError) and "HTTP 4" in str(exc) and "429" not in str(exc))
                if not retryable or attempt >= self.max_retries:
                    raise ServerError(f"{url}: {exc}") from exc
                stop.sleep(self.backoff_s * 2**attempt)
        raise ServerError(f"{url}: retries exhausted")

    def _one(self, k: int, t: TokenizedRequest) -> LogprobResult:
        url, ids = self.urls[k % len(self.urls)], t.ids
        start = len(ids) - t.n_target
        if self.kind == "vllm":
            body = {"model": self.model, "prompt": ids, "max_tokens": 1, "temperature": 0.0, "prompt_logprobs": 0}
            plp = self._call("POST", url + "/v1/completions", body)["choices"][0].get("prompt_logprobs")
            if not isinstance(plp, list) or len(plp) != len(ids):
                raise ServerError(f"{url}: response has no prompt_logprobs for {len(ids)} tokens")
            vals = [plp[j][str(ids[j])]["logprob"] for j in range(start, len(ids))]
        else:
            body = {"input_ids": ids, "sampling_params": {"max_new_tokens": 0, "temperature": 0.0},
                    "return_logprob": True, "logprob_start_len": start - 1}
            items = self._call("POST", url + "/generate", body)["meta_info"]["input_token_logprobs"]
            if len(items) != t.n_target + 1 or any(int(it[1]) != tok for it, tok in zip(items[1:], ids[start:],
                                                                                       strict=True)):
                raise ServerError(f"{url}: input_token_logprobs do not match the scored tokens")
            vals = [it[0] for it in items[1:]]
        return LogprobResult(float(sum(vals)), t.n_target)

    def logprobs(self, requests: Sequence[LogprobRequest]) -> list[LogprobResult]:
        """Summed log-probs of each target, in request order (sent paper by paper, round-robin over URLs)."""
        toks = [self.encode(r) for r in requests]
        order = sorted(range(len(requests)), key=lambda i: (requests[i].paper_id, i))
        pool = ThreadPoolExecutor(self.concurrency)
        try:
            futures = {i: pool.submit(self._one, k, toks[i]) for k, i in enumerate(order)}
            waiting = set(futures.values())
            while waiting:  # short slices: a stop is seen while every request is in flight
                waiting = wait(waiting, timeout=stop.POLL_S, return_when=FIRST_COMPLETED)[1]
                stop.check()
            return [futures[i].result() for i in range(len(requests))]
        finally:
            # on a stop or a failure nothing queued starts; requests in flight end at their own timeout on worker
            # threads nobody waits for
            pool.shutdown(wait=False, cancel_futures=True)


def server_urls(kind: str, arg: str) -> list[str]:
    """The base URLs of a ``KIND:URL[,URL...]`` spec, each an ``http(s)://HOST[:PORT][/PATH]`` URL; ``ValueError``
    naming the first one that is not (an empty list, another scheme, no host, a bad port, spaces)."""
    parts = [u.strip() for u in arg.split(",")]
    if not any(parts):
        raise ValueError(f"{kind} estimator spec must be {kind}:URL[,URL...] (e.g. {kind}:http://127.0.0.1:8000)")
    for url in parts:
        if not url:
            raise ValueError(f"{kind} estimator spec has an empty URL between commas: {kind}:{arg}")
        try:
            split = urlsplit(url)
            port = split.port  # raises ValueError for a port that is not a number in 0-65535
        except ValueError as exc:
            raise ValueError(f"{url!r} is not a URL ({exc})") from None
        if split.scheme not in ("http", "https"):
            raise ValueError(f"{url!r}: the {kind} server URL must start with http:// or https://")
        if not split.hostname or any(c.isspace() for c in url):
            raise ValueError(f"{url!r} is not a URL with a host (http://HOST[:PORT])")
        if port == 0 or split.query or split.fragment:
            raise ValueError(f"{url!r}: a {kind} server URL is http(s)://HOST[:PORT][/PATH], without "
                             f"{'port 0' if port == 0 else 'a query or fragment'}")
    return parts


def _server_factory(kind: str) -> EstimatorFactory:
    def make(arg: str, context: EstimatorContext) -> ServerEstimator:
        urls = server_urls(kind, arg)
        s = context.settings
        return ServerEstimator(kind, urls, tokenizer=s.estimator_tokenizer or None,
                               concurrency=s.estimator_concurrency, timeout_s=s.estimator_timeout_s)

    make.__doc__ = f"``{kind}:URL[,URL...]``: an OpenAI-compatible {kind} server (client-side tokenisation)."
    return make


def _url_check(kind: str) -> Callable[[str], None]:
    def check(arg: str) -> None:
        server_urls(kind, arg)

    return check


ESTIMATORS.add("vllm", _server_factory("vllm"), spec="vllm:URL[,URL...]",
               summary="vLLM server(s): prompt log-probs over /v1/completions", label=served_model_label("vLLM"),
               check_arg=_url_check("vllm"))
ESTIMATORS.add("sglang", _server_factory("sglang"), spec="sglang:URL",
               summary="SGLang server: input-token log-probs over /generate", label=served_model_label("SGLang"),
               check_arg=_url_check("sglang"))

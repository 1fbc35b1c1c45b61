"""Server estimators: a vLLM OpenAI-compatible server or an SGLang server scores client-tokenised prompts.

Prompts are tokenised here with the model's tokenizer and pinned chat template (``_tokenize``), so the scored token
ids are exactly those of the hf estimator.  vLLM: ``POST /v1/completions`` with token-id ``prompt``, ``max_tokens=1``
and ``prompt_logprobs=0`` (each position's dict holds the actual prompt token).  SGLang: ``POST /generate`` with
``input_ids``, ``return_logprob`` and ``logprob_start_len`` one token before the target.  Requests stream through
the dispatcher (:class:`grebench.dispatch.Dispatcher`): ``concurrency`` in flight per server, no batch barrier,
every request of a paper on one server (``routing = paper``: that server's prefix cache computes the paper's shared
prompt prefix once), a server that fails with 429/5xx or a network error marked down for a back-off while the others
take its work, and each answer handed to the caller as it arrives (:meth:`ServerEstimator.stream`), so the engine
caches it at once.

``vllm-local:NAME|PATH`` starts the vLLM server(s) itself (:class:`grebench.runtime.VLLMServer`, in the
``vllm_python`` environment) on 127.0.0.1 for a catalogue model or a checkpoint, ``vllm_servers`` of them, and stops
them when the scoring ends (:meth:`ServerEstimator.close`) or the process dies.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson

from grebench import stop
from grebench.dispatch import Dispatcher, DispatchError, DispatchStats
from grebench.scoring._request import LogprobRequest, LogprobResult
from grebench.scoring.estimators import (
    ESTIMATORS,
    LOW_PRECISION_TOLERANCE,
    EstimatorContext,
    EstimatorFactory,
    served_model_label,
)
from grebench.scoring.estimators._tokenize import TARGET_RULE, RequestTokenizer, TokenizedRequest, tokenizer_sha8


class ServerError(RuntimeError):
    """The evaluation-LM server failed or answered something that is not a log-prob response.  ``retryable``: the
    server is at fault (429, 5xx, a network error), so another server (or this one, later) may answer."""

    def __init__(self, message: str, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


_JSON_HEADERS = {"content-type": "application/json"}
#: The collector's first threshold while answers stream (:meth:`ServerEstimator.stream`).
GC_THRESHOLD = 70_000

#: Top log-probs asked for with a target that has verb choices (vLLM's default ``max_logprobs`` is 20); a verb outside
#: them at a choice position is asked for with one more request (vLLM: one generated token restricted to the verb;
#: SGLang: the prompt up to that position, then the verb).
TOP_LOGPROBS = 20


def scored_sum(t: TokenizedRequest, vals: Sequence[float], tops: Mapping[int, Mapping[int, float]],
               verb_ids: Sequence[int]) -> float:
    """The target's score from its per-token log-probs (:data:`~._tokenize.TARGET_RULE`): skipped positions left
    out, a verb choice renormalised over the judgment verbs at the position (``tops[j]``, for each choice position
    j of the target: the log-probs the server listed there, plus any verb outside them that the estimator asked for
    on its own; a verb still missing counts as none)."""
    skip, choice = set(t.skip), set(t.choice)
    total = 0.0
    for j, value in enumerate(vals):
        if j in skip:
            continue
        if j in choice:
            listed = [tops[j][v] for v in verb_ids if v in tops[j]]
            value -= max(listed) + math.log(sum(math.exp(x - max(listed)) for x in listed))
        total += value
    return total


class ServerEstimator:
    """vLLM or SGLang evaluation-LM reached over HTTP."""

    def __init__(self, kind: str, urls: Sequence[str], tokenizer: str | None = None, concurrency: int = 8,
                 timeout_s: float = 300.0, max_retries: int = 4, backoff_s: float = 1.0,
                 routing: str = "paper", batch: int = 1) -> None:
        from grebench._offline import apply_offline_defaults

        apply_offline_defaults()
        from transformers import AutoTokenizer

        if kind not in ("vllm", "sglang"):
            raise ValueError(f"unknown server kind {kind!r}")
        self.kind, self.urls = kind, [u.rstrip("/") for u in urls]
        self.client = httpx.Client(timeout=timeout_s)
        self.concurrency, self.max_retries, self.backoff_s = max(1, concurrency), max_retries, backoff_s
        self.routing, self.batch = routing, max(1, batch)
        self.dispatch_stats: DispatchStats | None = None  # the last stream's, per server
        self.model = self._model_id()
        path = tokenizer or self.model
        if not Path(path).expanduser().is_dir():
            raise ValueError(f"{kind} estimator needs a local tokenizer directory: set estimator_tokenizer "
                             f"(the server serves {self.model!r})")
        self.tokenizer = AutoTokenizer.from_pretrained(Path(path).expanduser(), local_files_only=True)
        self.encode = RequestTokenizer(self.tokenizer)
        self.id = f"{kind}:{self.model}@{tokenizer_sha8(self.tokenizer)}:target={TARGET_RULE}"
        self.servers: list[Any] = []  # local servers this estimator started (vllm-local), stopped by close()

    def close(self) -> None:
        """Stop the local servers this estimator started (none for a remote URL) and close the HTTP client."""
        servers, self.servers = self.servers, []
        try:
            for server in servers:
                server.stop()
        finally:
            self.client.close()

    def _model_id(self) -> str:
        if self.kind == "vllm":
            data = self._call("GET", self.urls[0] + "/v1/models", None)
            return str(data["data"][0]["id"])
        data = self._call("GET", self.urls[0] + "/get_model_info", None)
        return str(data["model_path"])

    def _call(self, method: str, url: str, body: dict[str, Any] | None, retries: int | None = None) -> Any:
        """One HTTP call, retried ``retries`` times (default ``max_retries``) with back-off on the same server; the
        dispatcher's calls take 0 and leave the retry, on another server, to it.  A 429, a 5xx or a network error is
        a retryable :class:`ServerError`; another 4xx or an answer that is not JSON is not."""
        retries = self.max_retries if retries is None else retries
        for attempt in range(retries + 1):
            stop.check()  # a request boundary (also after a back-off)
            try:  # orjson: a log-prob answer is ~100 kB of JSON, parsed 4x faster than by json
                resp = self.client.request(method, url, content=None if body is None else orjson.dumps(body),
                                           headers=_JSON_HEADERS if body is not None else None)
            except httpx.TransportError as exc:
                error = ServerError(f"{url}: {type(exc).__name__}: {exc or 'no answer'}", retryable=True)
            else:
                if resp.status_code == 429 or resp.status_code >= 500:
                    error = ServerError(f"{url}: HTTP {resp.status_code}", retryable=True)
                elif resp.status_code >= 400:
                    raise ServerError(f"{url}: HTTP {resp.status_code}: {resp.text[:300]}")
                else:
                    try:
                        return orjson.loads(resp.content)
                    except orjson.JSONDecodeError as exc:
                        raise ServerError(f"{url}: the answer is not JSON ({exc})") from None
            if attempt >= retries:
                raise error
            stop.sleep(self.backoff_s * 2**attempt)
        raise AssertionError("unreachable")

    def _batch(self, url: str, ts: Sequence[TokenizedRequest]) -> list[LogprobResult]:
        """The answers to ``ts`` (requests of one paper) from one server, in one HTTP call where the protocol allows
        (vLLM: one call per number of top log-probs asked for)."""
        if self.kind == "vllm":
            out: list[LogprobResult | None] = [None] * len(ts)
            tops_of = [TOP_LOGPROBS if t.choice else 0 for t in ts]  # a verb choice needs the other verbs' log-probs
            for top in sorted(set(tops_of)):  # vLLM lists them at every prompt position: asked only where needed
                part = [i for i, k in enumerate(tops_of) if k == top]
                prompts = [ts[i].ids for i in part]
                call = {"model": self.model, "prompt": prompts if len(part) > 1 else prompts[0], "max_tokens": 1,
                        "temperature": 0.0, "prompt_logprobs": top}
                choices = self._call("POST", url + "/v1/completions", call, retries=0).get("choices")
                if not isinstance(choices, list) or len(choices) != len(part):
                    raise ServerError(f"{url}: the answer has {len(choices) if isinstance(choices, list) else 'no'} "
                                      f"choices for {len(part)} prompts")
                by_index = sorted(choices, key=lambda c: c.get("index", 0) if isinstance(c, dict) else 0)
                for i, choice in zip(part, by_index, strict=True):
                    out[i] = self._vllm_result(url, ts[i], choice)
            done = [r for r in out if r is not None]
            assert len(done) == len(ts), "every request of the call answered"
            return done
        body: dict[str, Any] = {"sampling_params": {"max_new_tokens": 0, "temperature": 0.0}, "return_logprob": True}
        starts = [len(t.ids) - t.n_target - 1 for t in ts]
        if len(ts) == 1:
            body |= {"input_ids": ts[0].ids, "logprob_start_len": starts[0]}
        else:  # SGLang's batch: a list of prompts, the per-prompt parameters as lists; the answer is a list
            body |= {"input_ids": [t.ids for t in ts], "logprob_start_len": starts}
        if any(t.choice for t in ts):  # the verbs' log-probs at every position (a few numbers), not the top 20
            # (issue 61: the answer's size was most of the client's CPU); one list for every prompt of the batch
            body["token_ids_logprob"] = list(self.encode.verb_ids)
        got = self._call("POST", url + "/generate", body, retries=0)
        answers = got if isinstance(got, list) else [got]
        if len(answers) != len(ts) or not all(isinstance(a, dict) and isinstance(a.get("meta_info"), dict)
                                              for a in answers):
            raise ServerError(f"{url}: the answer is not {len(ts)} generate result(s) with meta_info")
        return [self._sglang_result(url, t, a["meta_info"]) for t, a in zip(ts, answers, strict=True)]

    def _vllm_result(self, url: str, t: TokenizedRequest, choice: Any) -> LogprobResult:
        ids = t.ids
        start = len(ids) - t.n_target
        plp = choice.get("prompt_logprobs") if isinstance(choice, dict) else None
        if not isinstance(plp, list) or len(plp) != len(ids):
            raise ServerError(f"{url}: response has no prompt_logprobs for {len(ids)} tokens")
        vals = [plp[j][str(ids[j])]["logprob"] for j in range(start, len(ids))]
        # only at the choice positions (a few of hundreds)
        tops = {j: {int(tok): v["logprob"] for tok, v in plp[start + j].items()} for j in t.choice}
        return self._result(url, t, vals, tops)

    def _sglang_result(self, url: str, t: TokenizedRequest, meta: Mapping[str, Any]) -> LogprobResult:
        ids = t.ids
        start = len(ids) - t.n_target
        items = meta.get("input_token_logprobs")
        if (not isinstance(items, list) or len(items) != t.n_target + 1
                or any(int(it[1]) != tok for it, tok in zip(items[1:], ids[start:], strict=True))):
            raise ServerError(f"{url}: input_token_logprobs do not match the scored tokens")
        vals = [it[0] for it in items[1:]]
        tops: dict[int, dict[int, float]] = {}
        if t.choice:
            listed = meta.get("input_token_ids_logprobs")
            if not isinstance(listed, list) or len(listed) != len(items):
                raise ServerError(f"{url}: response has no input_token_ids_logprobs for the scored tokens "
                                  "(SGLang answers token_ids_logprob from version 0.4.3)")
            tops = {j: {int(it[1]): float(it[0]) for it in (listed[1 + j] or [])}
                    | {int(ids[start + j]): float(vals[j])} for j in t.choice}
        return self._result(url, t, vals, tops)

    def _result(self, url: str, t: TokenizedRequest, vals: Sequence[Any],
                tops: dict[int, dict[int, float]]) -> LogprobResult:
        start = len(t.ids) - t.n_target
        for j in t.choice:  # a verb outside the top log-probs: asked for on its own, so the choice is exact
            for verb in self.encode.verb_ids:
                if verb not in tops[j]:
                    tops[j][verb] = self._last_logprob(url, [*t.ids[:start + j], verb])
        return LogprobResult(scored_sum(t, [float(v) for v in vals], tops, self.encode.verb_ids),
                             t.n_target - len(t.skip))

    def _last_logprob(self, url: str, ids: list[int]) -> float:
        """The log-prob of the last token of ``ids`` given the ones before it."""
        if self.kind == "vllm":
            # one generated token that can only be this one: vLLM returns its raw log-prob (``logprobs_mode`` is
            # ``raw_logprobs`` by default), and the prompt's KV comes from the prefix cache after the first verb
            body = {"model": self.model, "prompt": ids[:-1], "max_tokens": 1, "temperature": 0.0, "logprobs": 1,
                    "allowed_token_ids": [ids[-1]]}
            got = self._call("POST", url + "/v1/completions", body, retries=0)["choices"][0].get("logprobs") or {}
            values = got.get("token_logprobs") if isinstance(got, dict) else None
            if not isinstance(values, list) or not values or not isinstance(values[0], int | float):
                raise ServerError(f"{url}: response has no log-prob for the asked token")
            return float(values[0])
        body = {"input_ids": ids, "sampling_params": {"max_new_tokens": 0, "temperature": 0.0},
                "return_logprob": True, "logprob_start_len": len(ids) - 2}
        items = self._call("POST", url + "/generate", body, retries=0)["meta_info"]["input_token_logprobs"]
        if not items or int(items[-1][1]) != ids[-1] or items[-1][0] is None:
            raise ServerError(f"{url}: input_token_logprobs do not match the asked token")
        return float(items[-1][0])

    def logprobs(self, requests: Sequence[LogprobRequest]) -> list[LogprobResult]:
        """Summed log-probs of each target, in request order (:meth:`stream` without a callback)."""
        return self.stream(requests)

    def stream(self, requests: Sequence[LogprobRequest],
               on_result: Callable[[int, LogprobResult], None] | None = None) -> list[LogprobResult]:
        """Summed log-probs of each target, in request order; ``on_result(i, answer)`` is called on this thread as
        each answer arrives (the engine caches it at once).  Requests of one paper go to one server; a server that
        fails is marked down and its work moves to the others (:class:`grebench.dispatch.Dispatcher`)."""
        import gc
        import threading

        lock = threading.Lock()  # one tokenizer, shared by the dispatcher's threads
        requests = list(requests)
        # calls of up to ``batch`` requests of one paper; ``concurrency`` requests in flight a server
        size = min(self.batch, self.concurrency)
        by_paper: dict[str, list[int]] = {}
        for i, r in enumerate(requests):
            by_paper.setdefault(r.paper_id, []).append(i)
        calls = [idx[k:k + size] for idx in by_paper.values() for k in range(0, len(idx), size)]

        def one(url: str, call: list[int]) -> list[LogprobResult]:
            # tokenised when sent, not all before the first is sent (a season's requests would hold ~50 GiB of ids
            # and keep every server idle while they were made)
            with lock:
                tokenized = [self.encode(requests[i]) for i in call]
            return self._batch(url, tokenized)

        results: list[LogprobResult | None] = [None] * len(requests)

        def arrived(c: int, answers: list[LogprobResult]) -> None:
            for i, answer in zip(calls[c], answers, strict=True):
                results[i] = answer
                if on_result is not None:
                    on_result(i, answer)

        dispatcher: Dispatcher[list[int], list[LogprobResult]] = Dispatcher(
            self.urls, one, per_server=max(1, self.concurrency // size), routing=self.routing,
            backoff_s=self.backoff_s, max_attempts=self.max_retries + 1)
        self.dispatch_stats = dispatcher.stats
        # the answers are many small lists: at the default threshold (700 allocations) the collector runs every
        # few answers and its full collections walk the whole heap (the model's library objects); collected 100
        # times less often while answers stream, as before after it (no object is exempted, none leaks)
        thresholds = gc.get_threshold()
        gc.set_threshold(max(thresholds[0], GC_THRESHOLD), *thresholds[1:])
        try:  # a call's cost, for placing papers on servers: its characters (about 4 a token)
            dispatcher.run(calls, groups=[requests[c[0]].paper_id for c in calls],
                           costs=[sum(len(requests[i].synopsis or "") + len(requests[i].first_review or "")
                                      + len(requests[i].target) for i in c) for c in calls],
                           on_result=arrived)
        except DispatchError as exc:
            cause = exc.__cause__
            raise ServerError(str(cause) if isinstance(cause, ServerError) else str(exc)) from exc
        finally:
            gc.set_threshold(*thresholds)
        assert all(r is not None for r in results)
        return [r for r in results if r is not None]


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
        return ServerEstimator(kind, urls, tokenizer=s.scoring.estimator_tokenizer or None,
                               concurrency=s.scoring.estimator_concurrency, timeout_s=s.scoring.estimator_timeout_s,
                               routing=s.scoring.estimator_routing, batch=s.scoring.estimator_batch)

    make.__doc__ = f"``{kind}:URL[,URL...]``: an OpenAI-compatible {kind} server (client-side tokenisation)."
    return make


def _url_check(kind: str) -> Callable[[str], None]:
    def check(arg: str) -> None:
        server_urls(kind, arg)

    return check


def check_local_model(arg: str) -> None:
    """The spec check of ``vllm-local:NAME|PATH``: a catalogue model or a checkpoint directory."""
    from grebench.models import MODELS

    if not arg.strip():
        raise ValueError("vllm-local estimator spec must be vllm-local:NAME (a built-in evaluation LM) or "
                         "vllm-local:PATH (a local checkpoint)")
    if arg.strip() not in MODELS and not Path(arg.strip()).expanduser().is_dir():
        raise ValueError(f"{arg!r} is not a built-in model ({', '.join(MODELS.names())}) nor a checkpoint directory")


#: KV cache of a vllm-local server on a CPU when ``vllm_kv_cache_gib = 0``: 2 GiB hold ~45k float32 tokens of
#: SmolLM2-135M, several times what ``estimator_concurrency`` paper-sized prompts take at once.
CPU_KV_CACHE_GIB = 2.0


def _core_shares(n: int) -> list[str]:
    """This process's CPU cores cut into ``n`` contiguous shares, as ``VLLM_CPU_OMP_THREADS_BIND`` lists."""
    import os

    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    if len(cores) < n:
        raise ValueError(f"vllm_servers = {n} needs at least {n} CPU cores; this process may use {len(cores)}")
    size, extra = divmod(len(cores), n)
    shares, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        shares.append(",".join(str(c) for c in cores[start:end]))
        start = end
    return shares


def make_vllm_local(arg: str, context: EstimatorContext) -> ServerEstimator:
    """``vllm-local:NAME|PATH``: ``vllm_servers`` vLLM servers started here for a catalogue model or a checkpoint.

    dtype: ``hf_dtype``, where ``auto`` is bfloat16 on CUDA and float32 on a CPU (vLLM's CPU bfloat16 drifts 0.03
    nats per token from the float32 forward and starts twice as slowly: docs/estimators.md).  On a CPU the servers
    get contiguous shares of the cores (one server all of them); on CUDA, with several servers, server i gets GPU i.
    The id names the model the way ``hf:NAME`` does (``vllm:NAME@<checkpoint sha8>:dtype=...:chat=...``), so its
    scores compare across machines.
    """
    from concurrent.futures import ThreadPoolExecutor

    from grebench.models import MODELS, installed, resolve_checkpoint
    from grebench.runtime import VLLMServer, default_device, vllm_interpreter
    from grebench.scoring.estimators._tokenize import template_sha8

    check_local_model(arg)
    s = context.settings
    python = vllm_interpreter(s.scoring)
    path, label = resolve_checkpoint(s, arg.strip(), context.progress)
    device = default_device(s.scoring.hf_device)
    dtype = s.scoring.hf_dtype if s.scoring.hf_dtype != "auto" else ("bfloat16" if device == "cuda" else "float32")
    n = s.scoring.vllm_servers
    # on a CPU the servers share out this process's cores (one server gets them all: vLLM's own binding would keep
    # one core for its HTTP front end, half of a 2-core machine); on CUDA each server gets its GPU
    threads: list[str | None] = list(_core_shares(n)) if device != "cuda" else [None] * n
    kv_gib = s.scoring.vllm_kv_cache_gib or (None if device == "cuda" else CPU_KV_CACHE_GIB)
    slug = Path(label).name
    servers = [VLLMServer(path, s, dtype=dtype, python=python, name=f"vllm-{slug}-{i}",
                          port=s.bench.local_server_port + i if s.bench.local_server_port else None, threads=threads[i],
                          kv_cache_gib=kv_gib, compile=s.scoring.vllm_compile,
                          cuda_devices=str(i) if device == "cuda" and n > 1 else None) for i in range(n)]
    try:
        with context.progress.task("vLLM start", total=n, unit="servers") as task, ThreadPoolExecutor(n) as pool:
            for future in [pool.submit(server.start) for server in servers]:
                future.result()
                task.advance()
        estimator = ServerEstimator("vllm", [server.base_url for server in servers], tokenizer=str(path),
                                    concurrency=s.scoring.estimator_concurrency,
                                    timeout_s=s.scoring.estimator_timeout_s, routing=s.scoring.estimator_routing,
                                    batch=s.scoring.estimator_batch)
    except BaseException:
        for server in servers:
            server.stop()
        raise
    estimator.servers = servers
    manifest = installed(s, label) if label in MODELS else None
    sha8 = manifest["checkpoint_sha256"][:8] if manifest is not None else tokenizer_sha8(estimator.tokenizer)
    estimator.id = (f"vllm:{label}@{sha8}:dtype={dtype}:chat={template_sha8(estimator.tokenizer)}"
                    f":target={TARGET_RULE}")
    return estimator


def _served(_estimator_id: str) -> float:
    """A server batches requests as its load dictates, and batch shapes change low-precision kernels' sums."""
    return LOW_PRECISION_TOLERANCE


ESTIMATORS.add("vllm", _server_factory("vllm"), spec="vllm:URL[,URL...]",
               summary="vLLM server(s): prompt log-probs over /v1/completions", label=served_model_label("vLLM"),
               check_arg=_url_check("vllm"), tolerance=_served)
ESTIMATORS.add("vllm-local", make_vllm_local, spec="vllm-local:NAME|PATH",
               summary="vLLM server(s) started on 127.0.0.1 for a built-in evaluation LM or a checkpoint "
                       "(vllm_python, vllm_servers)",
               label=served_model_label("vLLM"), catalogue_arg=True, check_arg=check_local_model,
               tolerance=_served, local_servers=True)
ESTIMATORS.add("sglang", _server_factory("sglang"), spec="sglang:URL[,URL...]",
               summary="SGLang server: input-token log-probs over /generate", label=served_model_label("SGLang"),
               check_arg=_url_check("sglang"), tolerance=_served)

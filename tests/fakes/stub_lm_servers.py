"""Stub evaluation-LM servers for the dispatcher's tests and ``benchmarks/scale_out.py`` (issue 61).

N servers in one asyncio process, each on its own loopback port, speaking the vLLM completions protocol exactly as
the server estimator reads it: ``GET /health``, ``GET /v1/models``, ``POST /v1/completions`` with a token-id
``prompt``, ``max_tokens = 1`` and ``prompt_logprobs = k`` → ``choices[0].prompt_logprobs``, a list aligned with the
prompt: ``None`` first, then ``{str(token_id): {"logprob", "rank", "decoded_token"}}`` holding the prompt token and,
for k > 0, k listed tokens (``--top-ids``, then filler ids; with ``--only-top-ids``, the top ids alone: a smaller
answer than vLLM's, to measure a client's JSON cost apart).  A one-token completion restricted to
``allowed_token_ids`` with ``logprobs`` (the estimator's request for a verb outside the top log-probs) is answered
too.  SGLang's protocol as well: ``GET /get_model_info`` and ``POST /generate`` with ``input_ids``,
``return_logprob``, ``logprob_start_len``, ``top_logprobs_num`` and ``token_ids_logprob`` →
``meta_info.input_token_logprobs`` (and ``input_top_logprobs``, ``input_token_ids_logprobs``) from
``logprob_start_len`` on, as ``[logprob, token_id, null]``.  Log-probs are a fixed
function of the token id, so every server gives the same answer to the same prompt.

**Modelled compute.**  A server is a FIFO machine computing ``rate`` tokens/s (an H100 prefilling an 8B model:
40,000): a request of n computed tokens occupies it n / rate seconds after the one before it (a virtual clock; the
handler sleeps with ``asyncio.sleep`` until its request's finish time, so a stub costs little CPU).  With
``prefix_cache`` on, a server models vLLM's automatic prefix caching: prompts are cut in 16-token blocks, each block
hashed with the hash of the block before it (a chain, as vLLM does), and a request computes only the tokens past the
longest run of leading blocks the server already holds (at least its last token), LRU-evicting blocks beyond
``cache_tokens``; SGLang's radix cache matches token by token (its default ``--page-size 1``), so ``/generate``
prompts are cut in blocks of one token.  As the real servers do: SGLang's radix cache serves a ``/generate`` prompt
up to ``logprob_start_len``; vLLM V1 reads nothing from its cache for a request with ``prompt_logprobs`` (every prompt
token's log-prob is recomputed), unless ``prompt_logprobs_cache`` models a vLLM that would.

**Batches.**  As both servers accept them: ``/generate`` with ``input_ids`` a list of prompts (``logprob_start_len``
an int or one per prompt, ``token_ids_logprob`` one list for all or one per prompt) answers a JSON list, one object
per prompt; ``/v1/completions`` with ``prompt`` a list of token-id prompts answers one ``choices`` entry per prompt
(``index`` = its position).  The prompts of a batch are computed one after another on the server's clock and
counted one by one in the stats.
Responses are joined from per-token byte fragments built once, never through ``json.dumps`` of the whole answer.

**Control** on an admin port (the fake's own endpoints, not part of any protocol): ``GET /stub/stats`` (per server:
requests (prompts), HTTP calls, answered, tokens requested and computed, the most prompts in flight at once, the
papers it served, the prompts it answered more than once in all), ``POST /stub/papers`` ``{paper_id: prefix token
ids}`` (how a prompt is put down to a paper: the chained hash of the last full block of the paper's prefix),
``POST /stub/kill/I`` (close server I's listener and reset its connections, requests in flight unanswered),
``POST /stub/fail/I`` ``{"status": 400, "after": n}`` (answer that status from server I's (n+1)-th completion
request on), ``POST /stub/reset``.

``python -m tests.fakes.stub_lm_servers --servers N [--rate R] [--prefix-cache]`` prints one JSON line
``{"admin": PORT, "ports": [...]}`` and serves until stdin closes or ``POST /stub/exit``; :class:`StubServers` runs
it as a child process (so the client's CPU is measured apart from the servers') and wraps the admin calls.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import subprocess
import sys
import time
from collections import Counter, OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:
    import orjson

    def _loads(data: bytes) -> Any:
        return orjson.loads(data)
except ImportError:  # pragma: no cover - orjson comes with the app's dependencies
    def _loads(data: bytes) -> Any:
        return json.loads(data)

BLOCK = 16  # vLLM's KV-cache block (tokens)
SGLANG_PAGE = 1  # SGLang's radix cache: --page-size 1 (token by token)
H100_TOKENS_PER_S = 40_000.0
REPO = Path(__file__).resolve().parents[2]
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 429: "Too Many Requests", 500: "Internal Server Error",
            503: "Service Unavailable"}


def token_logprob(tok: int) -> float:
    """The stub LM's log-prob of a token: a fixed function of its id (the same on every server)."""
    return -0.05 - (tok * 7919 % 9973) / 1000.0


@dataclass
class Config:
    rate: float = H100_TOKENS_PER_S
    prefix_cache: bool = False
    cache_tokens: int = 2_000_000
    top_ids: tuple[int, ...] = ()
    model: str = "stub-lm"
    only_top_ids: bool = False
    prompt_logprobs_cache: bool = False


@dataclass
class _Stub:
    index: int
    port: int = 0
    server: asyncio.base_events.Server | None = None
    writers: set[asyncio.StreamWriter] = field(default_factory=set)
    alive: bool = True
    busy_until: float = 0.0
    cache: OrderedDict[int, None] = field(default_factory=OrderedDict)
    requests: int = 0
    calls: int = 0
    answered: int = 0
    tokens_requested: int = 0
    tokens_computed: int = 0
    bytes_sent: int = 0
    concurrent: int = 0
    max_concurrent: int = 0
    papers: set[str] = field(default_factory=set)
    unknown_prompts: int = 0
    fail_status: int = 0
    fail_after: int = 0

    def reset(self) -> None:
        self.cache.clear()
        self.busy_until = 0.0
        self.requests = self.calls = self.answered = self.tokens_requested = self.tokens_computed = self.bytes_sent = 0
        self.max_concurrent = self.unknown_prompts = self.fail_status = self.fail_after = 0
        self.papers = set()

    def stats(self) -> dict[str, Any]:
        return {"index": self.index, "port": self.port, "alive": self.alive, "requests": self.requests,
                "calls": self.calls,
                "answered": self.answered, "tokens_requested": self.tokens_requested,
                "tokens_computed": self.tokens_computed, "bytes_sent": self.bytes_sent,
                "max_concurrent": self.max_concurrent,
                "papers": sorted(self.papers), "unknown_prompts": self.unknown_prompts}


class StubFarm:
    """The N servers and their admin endpoint, in this process's event loop."""

    def __init__(self, n: int, config: Config) -> None:
        self.config = config
        self.stubs = [_Stub(i) for i in range(n)]
        self.paper_of: dict[int, str] = {}  # chained hash of a paper prefix's last full block -> paper id
        self.answered_prompts: Counter[int] = Counter()
        self._frags: dict[int, bytes] = {}
        self._top: list[tuple[int, bytes]] = []
        self.exit = asyncio.Event()
        self.admin: asyncio.base_events.Server | None = None

    # -- answers ---------------------------------------------------------------------------------------------------

    def _frag(self, tok: int, k: int) -> bytes:
        """One position of ``prompt_logprobs``: the prompt token plus, for k > 0, the k listed tokens."""
        key = tok * 64 + min(k, 63)
        got = self._frags.get(key)
        if got is None:
            own = b'"%d":{"logprob":%r,"rank":1,"decoded_token":"t%d"}' % (tok, token_logprob(tok), tok)
            n = min(k, len(self.config.top_ids)) if self.config.only_top_ids else k
            listed = [entry for t, entry in self._listed(n) if t != tok]
            got = self._frags[key] = b"{" + b",".join([own, *listed]) + b"}"
        return got

    def _listed(self, k: int) -> list[tuple[int, bytes]]:
        while len(self._top) < k:
            ids = [*self.config.top_ids, *range(10_000_000, 10_000_000 + k)]
            tok = next(t for t in ids if t not in {x for x, _ in self._top})
            rank = len(self._top) + 2
            self._top.append((tok, b'"%d":{"logprob":%r,"rank":%d,"decoded_token":"t%d"}'
                              % (tok, token_logprob(tok), rank, tok)))
        return self._top[:k]

    def _prompt_logprobs(self, ids: Sequence[int], k: int, index: int = 0) -> bytes:
        """One ``choices`` entry of a completion with ``prompt_logprobs`` = k."""
        head = (b'{"index":%d,"text":"x","logprobs":null,"finish_reason":"length","prompt_logprobs":[null'
                % index)
        frag = self._frag
        return b"".join([head, *(b"," + frag(t, k) for t in ids[1:]), b"]}"])

    def _one_token(self, ids: Sequence[int], allowed: Sequence[int], index: int = 0) -> bytes:
        """One ``choices`` entry: one generated token restricted to ``allowed``, with its log-prob."""
        tok = max(allowed, key=token_logprob) if allowed else 0
        lp = token_logprob(tok)
        return json.dumps({"index": index, "text": f"t{tok}", "finish_reason": "length", "prompt_logprobs": None,
                           "logprobs": {"tokens": [f"t{tok}"], "token_logprobs": [lp],
                                        "top_logprobs": [{f"t{tok}": lp}], "text_offset": [0]}}).encode()

    def _completion_body(self, choices: Sequence[bytes], prompt_tokens: int) -> bytes:
        model = json.dumps(self.config.model).encode()
        return (b'{"id":"cmpl-stub","object":"text_completion","model":%s,"choices":[%s],'
                b'"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}'
                % (model, b",".join(choices), prompt_tokens, len(choices), prompt_tokens + len(choices)))

    # -- the modelled compute --------------------------------------------------------------------------------------

    @staticmethod
    def _chain(ids: Sequence[int], block: int = BLOCK) -> list[int]:
        out, h = [], block  # the block size starts the chain: vLLM's and SGLang's caches never share an entry
        if block == 1:
            for t in ids:
                h = hash((h, t))
                out.append(h)
            return out
        for b in range(len(ids) // block):
            h = hash((h, tuple(ids[b * block:(b + 1) * block])))
            out.append(h)
        return out

    def _compute(self, s: _Stub, ids: Sequence[int], reusable: int | None = None, block: int = BLOCK) -> int:
        """Tokens this request computes on server ``s`` (all of them without the prefix cache; at most ``reusable``
        tokens come from the cache; the cache holds blocks of ``block`` tokens), and the paper it belongs to
        recorded."""
        chain = self._chain(ids, block)
        paper = next((self.paper_of[h] for h in reversed(chain) if h in self.paper_of), None)
        if paper is not None:
            s.papers.add(paper)
        elif self.paper_of:
            s.unknown_prompts += 1
        if not self.config.prefix_cache:
            return len(ids)
        hit = 0
        for h in chain:
            if h not in s.cache:
                break
            s.cache.move_to_end(h)
            hit += 1
        computed = len(ids) - min(hit * block, len(ids) - 1, len(ids) if reusable is None else reusable)
        for h in chain[hit:]:
            s.cache[h] = None
        limit = max(1, self.config.cache_tokens // block)
        while len(s.cache) > limit:
            s.cache.popitem(last=False)
        return computed

    def _generate(self, ids: Sequence[int], start: int, k: int, token_ids: Sequence[int] = ()) -> bytes:
        """SGLang's ``/generate`` answer: input-token log-probs (and top k, and those of ``token_ids``) from position
        ``start`` on."""
        items = b",".join(b"[%r,%d,null]" % (token_logprob(t), t) for t in ids[start:])
        meta = b'{"prompt_tokens":%d,"input_token_logprobs":[%s]' % (len(ids), items)
        if token_ids:
            asked = b"[" + b",".join(b"[%r,%d,null]" % (token_logprob(t), t) for t in token_ids) + b"]"
            meta += b',"input_token_ids_logprobs":[' + b",".join([asked] * len(ids[start:])) + b"]"
        if k:
            n = min(k, len(self.config.top_ids)) if self.config.only_top_ids else k
            listed = [t for t, _ in self._listed(n)]
            rows = []
            for t in ids[start:]:
                row = [t, *(x for x in listed if x != t)][:max(n, 1)]
                rows.append(b"[" + b",".join(b"[%r,%d,null]" % (token_logprob(x), x) for x in row) + b"]")
            meta += b',"input_top_logprobs":[' + b",".join(rows) + b"]"
        return b'{"text":"","meta_info":' + meta + b"}}"

    @staticmethod
    def _items(body: Mapping[str, Any], sglang: bool) -> list[dict[str, Any]] | None:
        """The prompts of a request, one body each (a batch: a list of token-id prompts, and the per-prompt
        parameters given as one value for all or one per prompt); None when the prompt is not token ids."""
        key = "input_ids" if sglang else "prompt"
        ids = body.get(key)
        if not isinstance(ids, list) or not ids:
            return None
        if not isinstance(ids[0], list):
            return [dict(body)] if all(isinstance(t, int) for t in ids[:4]) else None
        n = len(ids)
        out = []
        for i, one in enumerate(ids):
            if not isinstance(one, list) or not one or not all(isinstance(t, int) for t in one[:4]):
                return None
            item = dict(body)
            item[key] = one
            for name in ("logprob_start_len", "return_logprob", "top_logprobs_num"):
                value = body.get(name)
                if isinstance(value, list):
                    if len(value) != n:
                        return None
                    item[name] = value[i]
            asked = body.get("token_ids_logprob")
            if isinstance(asked, list) and asked and isinstance(asked[0], list):
                if len(asked) != n:
                    return None
                item["token_ids_logprob"] = asked[i]
            out.append(item)
        return out

    def _one(self, s: _Stub, body: Mapping[str, Any], sglang: bool, index: int) -> tuple[int, bytes, int]:
        """One prompt on server ``s``'s clock: (status, its answer, the tokens it computed)."""
        ids = body["input_ids" if sglang else "prompt"]
        s.requests += 1
        if s.fail_status and s.requests > s.fail_after:
            return s.fail_status, b'{"error":"stub told to fail"}', 0
        plp = body.get("prompt_logprobs")
        start = int(body.get("logprob_start_len", -1))
        if sglang and (not body.get("return_logprob") or start < 0):
            return 400, b'{"error":"expected return_logprob and logprob_start_len"}', 0
        if not sglang and plp is None and not body.get("logprobs"):
            return 400, b'{"error":"expected prompt_logprobs"}', 0
        s.tokens_requested += len(ids)
        # SGLang's radix cache serves a prompt up to logprob_start_len (the log-probs after it are computed); vLLM V1
        # reads nothing from its prefix cache for a request with prompt_logprobs (vllm-project/vllm#17251), unless
        # the stub is told to model a vLLM that does
        reusable = start if sglang else None if plp is None or self.config.prompt_logprobs_cache else 0
        computed = self._compute(s, ids, reusable=reusable, block=SGLANG_PAGE if sglang else BLOCK)
        s.tokens_computed += computed
        if sglang:
            data = self._generate(ids, start, int(body.get("top_logprobs_num") or 0),
                                  [int(t) for t in body.get("token_ids_logprob") or ()])
        elif plp is not None:
            data = self._prompt_logprobs(ids, int(plp), index)
        else:
            data = self._one_token(ids, body.get("allowed_token_ids") or [], index)
        return 200, data, computed

    async def _completion(self, s: _Stub, body: Mapping[str, Any], items: list[dict[str, Any]] | None,
                          sglang: bool = False) -> tuple[int, bytes, int]:
        """A request of one prompt or a batch: (status, answer, prompts answered).  The prompts are computed one
        after another on the server's clock; the answer comes when the last is done."""
        if items is None:
            return 400, b'{"error":"expected a token-id prompt"}', 0
        answers, total = [], 0
        for i, item in enumerate(items):
            status, data, computed = self._one(s, item, sglang, i)
            if status != 200:
                return status, data, 0
            answers.append(data)
            total += computed
        loop = asyncio.get_running_loop()
        now = loop.time()
        s.busy_until = max(now, s.busy_until) + total / self.config.rate
        batch = isinstance(body.get("input_ids" if sglang else "prompt")[0], list)  # type: ignore[index]
        if sglang:
            data = b"[" + b",".join(answers) + b"]" if batch else answers[0]
        else:
            data = self._completion_body(answers, sum(len(it["prompt"]) for it in items))
        await asyncio.sleep(s.busy_until - now)
        return 200, data, len(items)

    # -- HTTP ------------------------------------------------------------------------------------------------------

    async def _route(self, s: _Stub, method: str, path: str, body: bytes) -> tuple[int, bytes]:
        if method == "GET" and path == "/health":
            return 200, b""
        if method == "GET" and path == "/v1/models":
            return 200, json.dumps({"object": "list", "data": [{"id": self.config.model, "object": "model",
                                                                "owned_by": "vllm"}]}).encode()
        if method == "GET" and path == "/get_model_info":
            return 200, json.dumps({"model_path": self.config.model, "is_generation": True}).encode()
        if method == "POST" and path in ("/v1/completions", "/generate"):
            try:
                parsed = _loads(body)
            except ValueError:
                return 400, b'{"error":"body is not JSON"}'
            sglang = path == "/generate"
            s.calls += 1
            items = self._items(parsed, sglang) if isinstance(parsed, dict) else None  # the prompts, read once
            prompts = len(items) if items else 1
            s.concurrent += prompts  # prompts in flight (a batch counts each of its prompts)
            s.max_concurrent = max(s.max_concurrent, s.concurrent)
            try:
                status, data, n = await self._completion(s, parsed, items, sglang)
            finally:
                s.concurrent -= prompts
            if status == 200 and s.alive:
                s.answered += n
                s.bytes_sent += len(data)
                for item in items or ():
                    self.answered_prompts[hash(tuple(item["input_ids" if sglang else "prompt"]))] += 1
            return status, data
        return 404, b'{"error":"no such route"}'

    async def _serve_conn(self, s: _Stub | None, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if s is not None:
            if not s.alive:
                writer.transport.abort()
                return
            s.writers.add(writer)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = [*lines[0].split(" "), "", ""][:3]
                headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
                body = await reader.readexactly(int(headers.get("content-length") or 0))
                if s is None:
                    status, data = await self._admin(method, path, body)
                else:
                    status, data = await self._route(s, method, path.split("?")[0], body)
                    if not s.alive:
                        return
                writer.write(b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                             % (status, _REASONS.get(status, "Status").encode(), len(data)) + data)
                await writer.drain()
                if headers.get("connection", "").lower() == "close":
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            if s is not None:
                s.writers.discard(writer)
            with contextlib.suppress(Exception):
                writer.close()

    # -- admin -----------------------------------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        servers = [s.stats() for s in self.stubs]
        total = {k: sum(x[k] for x in servers) for k in ("requests", "calls", "answered", "tokens_requested",
                                                         "tokens_computed", "bytes_sent")}
        return {"servers": servers, **total,
                "answered_more_than_once": sum(1 for c in self.answered_prompts.values() if c > 1),
                "rate": self.config.rate, "prefix_cache": self.config.prefix_cache}

    async def _kill(self, s: _Stub) -> None:
        s.alive = False
        if s.server is not None:
            s.server.close()
        for w in list(s.writers):
            w.transport.abort()
        s.writers.clear()

    async def _admin(self, method: str, path: str, body: bytes) -> tuple[int, bytes]:
        parts = path.strip("/").split("/")
        if method == "GET" and parts == ["stub", "stats"]:
            return 200, json.dumps(self.stats()).encode()
        if method == "POST" and parts == ["stub", "papers"]:
            for paper, prefix in _loads(body).items():
                for block in (BLOCK, SGLANG_PAGE):
                    chain = self._chain(prefix, block)
                    if chain:
                        self.paper_of[chain[-1]] = paper
            return 200, json.dumps({"papers": len(self.paper_of)}).encode()
        if method == "POST" and len(parts) == 3 and parts[:2] == ["stub", "kill"]:
            await self._kill(self.stubs[int(parts[2])])
            return 200, b"{}"
        if method == "POST" and len(parts) == 3 and parts[:2] == ["stub", "fail"]:
            spec = _loads(body) if body else {}
            s = self.stubs[int(parts[2])]
            s.fail_status, s.fail_after = int(spec.get("status", 400)), s.requests + int(spec.get("after", 0))
            return 200, b"{}"
        if method == "POST" and parts == ["stub", "reset"]:
            for s in self.stubs:
                s.reset()
            self.answered_prompts.clear()
            return 200, b"{}"
        if method == "POST" and parts == ["stub", "exit"]:
            self.exit.set()
            return 200, b"{}"
        return 404, b'{"error":"no such admin route"}'

    async def start(self) -> dict[str, Any]:
        for s in self.stubs:
            s.server = await asyncio.start_server(functools.partial(self._serve_conn, s), "127.0.0.1", 0,
                                                  backlog=1024)
            s.port = s.server.sockets[0].getsockname()[1]
        self.admin = await asyncio.start_server(functools.partial(self._serve_conn, None), "127.0.0.1", 0)
        return {"admin": self.admin.sockets[0].getsockname()[1], "ports": [s.port for s in self.stubs]}


async def _main(args: argparse.Namespace) -> None:
    config = Config(rate=args.rate, prefix_cache=args.prefix_cache, cache_tokens=args.cache_tokens,
                    top_ids=tuple(int(t) for t in args.top_ids.split(",") if t.strip()), model=args.model,
                    only_top_ids=args.only_top_ids, prompt_logprobs_cache=args.prompt_logprobs_cache)
    farm = StubFarm(args.servers, config)
    print(json.dumps(await farm.start()), flush=True)
    loop = asyncio.get_running_loop()
    stdin_closed = loop.run_in_executor(None, sys.stdin.buffer.read)  # the parent died or closed our stdin
    exit_wait = asyncio.ensure_future(farm.exit.wait())
    await asyncio.wait([stdin_closed, exit_wait], return_when=asyncio.FIRST_COMPLETED)  # type: ignore[list-item]
    os._exit(0)  # the executor thread blocked on stdin would hold a normal exit


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=1)
    parser.add_argument("--rate", type=float, default=H100_TOKENS_PER_S, help="modelled tokens/s per server")
    parser.add_argument("--prefix-cache", action="store_true")
    parser.add_argument("--cache-tokens", type=int, default=2_000_000)
    parser.add_argument("--top-ids", default="", help="token ids listed first in top-k log-probs (comma-separated)")
    parser.add_argument("--only-top-ids", action="store_true", help="list the top ids alone, however many are asked")
    parser.add_argument("--prompt-logprobs-cache", action="store_true", help="vLLM requests with prompt_logprobs read "
                        "the prefix cache too (real vLLM V1 does not)")
    parser.add_argument("--model", default="stub-lm")
    asyncio.run(_main(parser.parse_args(argv)))


class StubServers:
    """The stub servers in a child process, and their admin calls; a context manager."""

    def __init__(self, n: int, rate: float = H100_TOKENS_PER_S, prefix_cache: bool = False,
                 cache_tokens: int = 2_000_000, top_ids: Iterable[int] = (), model: str = "stub-lm",
                 only_top_ids: bool = False, prompt_logprobs_cache: bool = False) -> None:
        import httpx

        cmd = [sys.executable, "-m", "tests.fakes.stub_lm_servers", "--servers", str(n), "--rate", str(rate),
               "--cache-tokens", str(cache_tokens), "--top-ids", ",".join(str(t) for t in top_ids), "--model", model]
        if prefix_cache:
            cmd.append("--prefix-cache")
        if only_top_ids:
            cmd.append("--only-top-ids")
        if prompt_logprobs_cache:
            cmd.append("--prompt-logprobs-cache")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
        self.proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(timeout=10)
            raise RuntimeError(f"the stub servers did not start (exit {self.proc.returncode})")
        ports = json.loads(line)
        self.urls = [f"http://127.0.0.1:{p}" for p in ports["ports"]]
        self.admin_url = f"http://127.0.0.1:{ports['admin']}"
        self.rate = rate
        self._http = httpx.Client(timeout=30.0)

    def __enter__(self) -> StubServers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _post(self, path: str, body: Any = None) -> Any:
        resp = self._http.post(self.admin_url + path, json=body)
        resp.raise_for_status()
        return resp.json()

    def stats(self) -> dict[str, Any]:
        """Counters: per server and in all (see the module docstring)."""
        resp = self._http.get(self.admin_url + "/stub/stats")
        resp.raise_for_status()
        return dict(resp.json())

    def register_papers(self, prefixes: Mapping[str, Sequence[int]]) -> None:
        """Tell the stubs each paper's prefix token ids, so that ``stats()`` says which papers each server served."""
        self._post("/stub/papers", {k: list(v) for k, v in prefixes.items()})

    def kill(self, index: int) -> None:
        """Close server ``index``'s listener and reset its connections (requests in flight are not answered)."""
        self._post(f"/stub/kill/{index}")

    def fail(self, index: int, status: int = 400, after: int = 0) -> None:
        """Server ``index`` answers ``status`` to its completion requests after ``after`` more."""
        self._post(f"/stub/fail/{index}", {"status": status, "after": after})

    def reset(self) -> None:
        """Clear counters, caches and clocks (killed servers stay down)."""
        self._post("/stub/reset")

    def close(self) -> None:
        """End the child process."""
        with contextlib.suppress(Exception):
            self._post("/stub/exit")
        self._http.close()
        with contextlib.suppress(Exception):
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def wait_until(predicate: Any, timeout_s: float = 10.0, what: str = "a condition") -> None:
    """Poll ``predicate()`` until it is true (for tests that follow progress, not fixed sleeps)."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.005)


if __name__ == "__main__":
    main()

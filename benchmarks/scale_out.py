"""Does scoring scale out over N evaluation-LM servers?  The issue 61 figures, measured against stub servers.

Usage: PYTHONPATH=. .venv/bin/python benchmarks/scale_out.py [--servers 1,2,4,8] [--papers 8] [--scale-papers 40]
       [--candidates 4] [--rate 4000] [--batch 4] [--kind sglang|vllm] [--listed verbs|vllm] [--json]
The default measures every figure on one 40-paper set (5 papers a server at 8; about 5 minutes at the default rate,
2 of them the 1-server run); ``--papers 8 --scale-papers 40`` is the quick form (the speedup estimated from the
8-server efficiency at scale instead of measured).

Loopback only, no model, no GPU.  The servers are ``tests/fakes/stub_lm_servers.py``: N stubs of the SGLang
(``/generate``) or vLLM (``/v1/completions``) protocol in a child process (so this process's CPU is the client's
alone), each a FIFO machine computing ``--rate`` tokens/s, with a prefix cache as the real servers have it (chained
hashes of blocks, a request computes only what follows the longest run of blocks the server holds: vLLM's 16-token
blocks, SGLang's radix cache token by token; SGLang's serves a prompt up to ``logprob_start_len``, vLLM V1 reads no
cache for a request with ``prompt_logprobs`` unless ``--prompt-logprobs-cache``).  The client is the product's:
:class:`grebench.scoring.estimators._server.ServerEstimator` (``sglang:URL,...`` or ``vllm:URL,...``) and its
``stream``, as the scoring engine calls it, with ``estimator_routing`` = paper and round-robin side by side, and
``--batch`` requests of a paper in one HTTP call (``estimator_batch``, default 4; ``--per-server`` requests in
flight a server, so ``per_server / batch`` calls).

Request set: a slice of a season built from the bundled ICLR 2020 papers as GEM-S builds it: per paper, references
= its human reviews (judgment lines), candidates = ``--candidates`` other reviews (judgment lines of other papers'
reviews, standing in for the candidate models' reviews), per reference a marginal and one conditional per
candidate; the synopsis is the abstract.  Real ``LogprobRequest``s, tokenised by the client with a byte-level BPE
(16k vocabulary) trained here on the bundled text with a Llama-3 chat template (no model is downloaded), so prompts
have real lengths (about 1,350 tokens, 620 of them the target) and the real shared structure: system + abstract
start every request of a paper, a candidate's lines follow them in every request of that candidate.

Lines, in order:
- ``client_cost`` (vLLM and SGLang, each with the 20 top log-probs per position the client asks for and with the
  prompt token and the four verbs only): the client's CPU per request with stubs that answer at once, the answer's
  size, the tokenisation's share, ``requests_per_s_one_core_can_feed`` = 1000 / CPU ms next to
  ``requests_per_s_needed_for_8_h100`` (8 x 40,000 tokens/s / the tokens a request makes a server compute).
- ``prefix_cache``: tokens computed / requested with a season's 20 candidates per paper, by paper and round-robin
  (and round-robin one request a call), next to ``tokens_computed_ratio_floor``: the least any routing can compute
  on these prompts (one server, one request at a time, every prefix it has seen cached; the targets, 45 % of the
  tokens, are always computed, since their log-probs are asked for).
- one line per (servers, routing) on the ``--papers`` set: ``wall_s``, ``ideal_s`` (tokens the stubs computed /
  (servers x rate)), ``efficiency`` = ideal_s / wall_s, ``speedup`` (1-server wall / this wall),
  ``tokens_computed_ratio``, ``client_cpu_ms_per_request`` (this process's CPU over the run, tokenisation included),
  ``busiest_server_s`` (the most loaded server's modelled compute: no dispatch ends before it), ``first_answer_s``
  (the client tokenises every request before it sends the first), ``errors`` (failed calls the dispatcher saw).
- ``at_scale``: the largest count again on ``--scale-papers`` papers (a few papers per server leave a tail of up to
  one paper on one server; a season has thousands per server), with ``speedup_estimate`` = N x its efficiency / the
  1-server run's.
- ``failover``: that run again with one server killed (listener closed, connections reset) once half the answers
  are in: its wall against the unkilled run's and against ``ideal_killed_s`` = t_kill + (unkilled wall - t_kill) x
  N / (N - 1) (the survivors taking the dead server's share of what was left), and whether every answer equals the
  unkilled run's, each was handed over once, and each prompt was answered once at the stubs.
- ``summary``: the targets and whether they are met.

``--rate``: tokens/s per modelled server.  A real H100 prefills an 8B model at about 40,000 tokens/s; 8 of them
need several hundred requests/s, more than this client can send from a shared 2-core machine (see ``client_cost``),
so the default models slower servers: the work per request is the same, only the time scale changes, and the
client's cost is reported against what 8 real H100s need.  ``--listed``: what the stubs list per position when asked
for top log-probs in the timed runs: ``verbs`` (default: the prompt token and the four verbs, so the runs measure
the dispatch rather than the JSON) or ``vllm`` (as many as asked, as the real servers do).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grebench.scoring._request import LogprobRequest, LogprobResult
from tests.fakes.stub_lm_servers import H100_TOKENS_PER_S, StubServers
from tests.scoring.tiny_builders import CHAT_TEMPLATE, SPECIAL, bundled_papers, rules_lines

H100_SERVERS = 8


def build_tokenizer(path: Path, vocab: int = 16_000) -> Path:
    """A byte-level BPE trained on the bundled abstracts and reviews, with the Llama-3-style chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    papers = bundled_papers()
    texts = [p["abstract"] for p in papers] + [r for p in papers for r in p["reviews"]]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=vocab, special_tokens=SPECIAL,
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|begin_of_text|>", eos_token="<|eot_id|>",
                                   pad_token="<|end_of_text|>")
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(path)
    return path


def season_slice(n_papers: int, n_candidates: int) -> list[LogprobRequest]:
    """GEM-S requests for ``n_papers`` bundled papers, in the engine's paper order (see the module docstring)."""
    papers = [p for p in bundled_papers() if len(p["reviews"]) >= 2 and p["abstract"].strip()]
    lines = {p["id"]: [t for t in (rules_lines(r) for r in p["reviews"]) if t] for p in papers}
    reqs = []
    for k, p in enumerate(papers[:n_papers]):
        refs = lines[p["id"]]
        cands = [lines[papers[(k + 1 + c) % len(papers)]["id"]][0] for c in range(n_candidates)]
        for ref in refs:
            reqs.append(LogprobRequest(p["id"], p["abstract"], None, ref))
        for cand in cands:
            for ref in refs:
                reqs.append(LogprobRequest(p["id"], p["abstract"], cand, ref))
    return reqs


class Client:
    """The product's vLLM server estimator pointed at the stubs."""

    def __init__(self, kind: str, tokenizer: Path, urls: list[str], routing: str, per_server: int,
                 batch: int) -> None:
        from grebench.scoring.estimators._server import ServerEstimator

        self.est = ServerEstimator(kind, urls, tokenizer=str(tokenizer), concurrency=per_server, routing=routing,
                                   timeout_s=60.0, batch=batch)
        self.errors: dict[str, int] = {}  # the failures the dispatcher saw, by kind (a killed server's, or others)
        one = self.est._batch

        def counted(url: str, t: Any) -> list[LogprobResult]:
            try:
                return one(url, t)
            except Exception as exc:
                kind = f"{type(exc).__name__}: {str(exc).split(': ', 1)[-1][:80]}"
                self.errors[kind] = self.errors.get(kind, 0) + 1
                raise

        self.est._batch = counted  # type: ignore[method-assign,assignment]

    def run(self, reqs: list[LogprobRequest], on_result: Any = None) -> list[LogprobResult]:
        return self.est.stream(reqs, on_result)

    def close(self) -> None:
        self.est.close()


def _verb_ids(tokenizer: Path) -> tuple[int, ...]:
    from transformers import AutoTokenizer

    from grebench.scoring.estimators._tokenize import RequestTokenizer

    return RequestTokenizer(AutoTokenizer.from_pretrained(tokenizer)).verb_ids


def _prefixes(tokenizer: Path, reqs: list[LogprobRequest]) -> dict[str, list[int]]:
    from transformers import AutoTokenizer

    from grebench.scoring.estimators._tokenize import RequestTokenizer

    enc = RequestTokenizer(AutoTokenizer.from_pretrained(tokenizer))
    first: dict[str, LogprobRequest] = {}
    for r in reqs:
        first.setdefault(r.paper_id, r)
    return {pid: list(enc(r).prefix) for pid, r in first.items()}


@dataclass(frozen=True)
class Setup:
    """What every run shares: the protocol, the tokenizer, the stubs' answers, the client's slots per server."""

    kind: str
    tokenizer: Path
    verbs: tuple[int, ...]
    per_server: int
    listed: str
    batch: int = 4
    prompt_logprobs_cache: bool = False


def one_run(setup: Setup, reqs: list[LogprobRequest], prefixes: dict[str, list[int]], servers: int, routing: str,
            rate: float, kill_at: float | None = None, **changes: Any) -> dict[str, Any]:
    """Score ``reqs`` through the real client against ``servers`` fresh stubs; what it took (and the answers).
    ``changes``: fields of ``setup`` changed for this run."""
    setup = replace(setup, **changes)
    kind, per_server, listed = setup.kind, setup.per_server, setup.listed
    with StubServers(servers, rate=rate, prefix_cache=True, top_ids=setup.verbs, only_top_ids=listed == "verbs",
                     prompt_logprobs_cache=setup.prompt_logprobs_cache) as stubs:
        stubs.register_papers(prefixes)
        client = Client(kind, setup.tokenizer, stubs.urls, routing, per_server, setup.batch)
        got: list[int] = []
        killed: dict[str, Any] = {}
        t0 = time.perf_counter()

        first: list[float] = []

        def on_result(i: int, _answer: LogprobResult) -> None:
            got.append(i)
            if not first:
                first.append(time.perf_counter() - t0)
            if kill_at is not None and not killed and len(got) >= kill_at * len(reqs):
                stats = client.est.dispatch_stats
                assert stats is not None
                # the server that started the most papers: it has work queued and in flight
                victim = max(range(servers), key=lambda s: len(stats.servers[s].groups))
                stubs.kill(victim)
                killed.update(server=victim, at_s=time.perf_counter() - t0, answered=len(got))

        try:
            cpu0 = time.process_time()
            t0 = time.perf_counter()
            answers = client.run(reqs, on_result)
            wall = time.perf_counter() - t0
            cpu = time.process_time() - cpu0
            dispatch = _dispatch_json(client.est.dispatch_stats)
            errors = dict(client.errors)
        finally:
            client.close()
        st = stubs.stats()
    n = len(reqs)
    ideal = st["tokens_computed"] / (servers * rate)
    per_request = st["tokens_computed"] / max(1, st["answered"])
    cpu_ms = 1000.0 * cpu / n
    out: dict[str, Any] = {
        "servers": servers, "kind": kind, "papers": len(prefixes), "routing": routing, "requests": n,
        "wall_s": round(wall, 3), "ideal_s": round(ideal, 3),
        "efficiency": round(ideal / wall, 3), "tokens_requested": st["tokens_requested"],
        "tokens_computed": st["tokens_computed"],
        "tokens_computed_ratio": round(st["tokens_computed"] / max(1, st["tokens_requested"]), 3),
        "client_cpu_ms_per_request": round(cpu_ms, 3),
        "requests_per_s_one_core_can_feed": round(1000.0 / cpu_ms, 1),
        "requests_per_s_needed_for_8_h100": round(H100_SERVERS * H100_TOKENS_PER_S / per_request, 1),
        "rate_tokens_per_s": rate, "per_server": per_server, "batch": setup.batch, "listed": listed,
        "response_kib": round(st["bytes_sent"] / max(1, st["answered"]) / 1024, 1),
        "max_concurrent": max(s["max_concurrent"] for s in st["servers"]),
        # the busiest server's modelled compute: no dispatch can end before it (placement and paper sizes)
        "busiest_server_s": round(max(s["tokens_computed"] for s in st["servers"]) / rate, 3),
        "papers_on_more_than_one_server": _split_papers(st),
        "stolen_groups": dispatch.get("stolen_groups"), "moved": dispatch.get("moved"),
        # from the call to the first answer: the client tokenises every request before it sends the first
        "first_answer_s": round(first[0], 3) if first else None,
        "efficiency_after_first_answer": round(ideal / (wall - first[0]), 3) if first and wall > first[0] else None,
        "errors": errors,
    }
    out["_answers"] = answers
    out["_got"] = got
    out["_stubs"] = st
    out["_killed"] = killed
    out["_dispatch"] = dispatch
    return out


def _dispatch_json(stats: Any) -> dict[str, Any]:
    """The dispatcher's counters of a run (:class:`grebench.dispatch.DispatchStats`) as JSON."""
    if stats is None:
        return {}
    return {"servers": [{"url": s.url, "answered": s.answered, "failed": s.failed, "down_events": s.down_events,
                         "max_in_flight": s.max_in_flight, "groups": len(s.groups)} for s in stats.servers],
            "moved": stats.moved, "stolen_groups": stats.stolen_groups, "retried": stats.retried}


def _split_papers(st: dict[str, Any]) -> int:
    seen: dict[str, int] = {}
    for s in st["servers"]:
        for p in s["papers"]:
            seen[p] = seen.get(p, 0) + 1
    return sum(1 for c in seen.values() if c > 1)


def public(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if not k.startswith("_")}


def client_probe(setup: Setup, reqs: list[LogprobRequest], prefixes: dict[str, list[int]]) -> list[dict[str, Any]]:
    """The client's CPU per request with answers that come at once (rate 1e9), for vLLM and SGLang, with the 20
    top log-probs per position the client asks for (vLLM: at every prompt position; SGLang: from the target on) and
    with the prompt token and the four verbs only."""
    rows = []
    tokenize = _tokenize_ms(setup.tokenizer, reqs)
    for kind in ("vllm", "sglang"):
        for listed in ("vllm", "verbs"):
            row = one_run(setup, reqs, prefixes, 2, "paper", 1e9, kind=kind, listed=listed)
            rows.append({"probe": "client_cost", "kind": kind, "listed": listed, "requests": len(reqs),
                         "response_kib": row["response_kib"],
                         "client_cpu_ms_per_request": row["client_cpu_ms_per_request"],
                         "requests_per_s_one_core_can_feed": row["requests_per_s_one_core_can_feed"],
                         "requests_per_s_needed_for_8_h100": row["requests_per_s_needed_for_8_h100"],
                         "tokenize_cpu_ms_per_request": tokenize, "errors": row["errors"]})
    return rows


def _tokenize_ms(tokenizer: Path, reqs: list[LogprobRequest]) -> float:
    from transformers import AutoTokenizer

    from grebench.scoring.estimators._tokenize import RequestTokenizer

    enc = RequestTokenizer(AutoTokenizer.from_pretrained(tokenizer))
    cpu0 = time.process_time()
    for r in reqs:
        enc(r)
    return round(1000.0 * (time.process_time() - cpu0) / len(reqs), 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", default="1,2,4,8", help="server counts, comma-separated")
    parser.add_argument("--kind", choices=("sglang", "vllm"), default="sglang", help="the protocol the client and "
                        "stubs speak (sglang: the radix cache serves a prompt up to the target; vllm: a request with "
                        "prompt_logprobs reads no prefix cache, unless --prompt-logprobs-cache)")
    parser.add_argument("--prompt-logprobs-cache", action="store_true", help="model a vLLM whose prefix cache "
                        "serves requests with prompt_logprobs")
    parser.add_argument("--papers", type=int, default=40, help="papers of the 1..N scaling runs")
    parser.add_argument("--scale-papers", type=int, default=0, help="papers of one more run at the largest server "
                        "count, with enough papers per server that the last paper's tail is small (0: none); the "
                        "failover run uses this set")
    parser.add_argument("--candidates", type=int, default=4, help="candidate reviews per paper")
    parser.add_argument("--rate", type=float, default=4_000.0, help="modelled tokens/s per server")
    parser.add_argument("--per-server", type=int, default=8, help="requests in flight per server "
                        "(estimator_concurrency)")
    parser.add_argument("--batch", type=int, default=4, help="requests of one paper a call (estimator_batch)")
    parser.add_argument("--listed", choices=("vllm", "verbs"), default="verbs", help="tokens the stubs list per "
                        "position when top log-probs are asked for: as many as asked (vllm: 20) or the four verbs")
    parser.add_argument("--routings", default="paper,round-robin")
    parser.add_argument("--rr-servers", choices=("max", "all"), default="max", help="run round-robin at the "
                        "largest server count only (default) or at every count above 1")
    parser.add_argument("--probe-requests", type=int, default=30, help="requests of the client-cost probe")
    parser.add_argument("--ratio-papers", type=int, default=4, help="papers of the prefix-cache pass (0: none)")
    parser.add_argument("--ratio-candidates", type=int, default=20, help="candidates per paper in that pass "
                        "(a season's 20)")
    parser.add_argument("--no-failover", action="store_true")
    parser.add_argument("--client-only", action="store_true", help="only the client-cost probe")
    parser.add_argument("--json", action="store_true", help="JSON lines only")
    args = parser.parse_args()
    counts = [int(x) for x in args.servers.split(",") if x.strip()]
    routings = [r.strip() for r in args.routings.split(",") if r.strip()]

    def emit(row: dict[str, Any]) -> None:
        print(json.dumps(public(row)), flush=True)

    with tempfile.TemporaryDirectory(prefix="scale-out-") as tmp:
        tokenizer = build_tokenizer(Path(tmp) / "tokenizer")
        reqs = season_slice(args.papers, args.candidates)
        prefixes = _prefixes(tokenizer, reqs)
        setup = Setup(args.kind, tokenizer, _verb_ids(tokenizer), args.per_server, args.listed,
                      args.batch, args.prompt_logprobs_cache)
        if not args.json:
            print(f"# {len(reqs)} requests, {len(prefixes)} papers, {args.candidates} candidates; "
                  f"modelled rate {args.rate:.0f} tokens/s per server", file=sys.stderr)
        probe_reqs = reqs[: min(len(reqs), args.probe_requests)]
        for row in client_probe(setup, probe_reqs, prefixes):
            emit(row)
        if args.client_only:
            return
        cache = cache_pass(setup, args, max(counts)) if args.ratio_papers else None
        if cache:
            emit(cache)
        rows: dict[tuple[int, str], dict[str, Any]] = {}
        for n in counts:
            for routing in routings:
                if routing != routings[0] and (n == 1 or (args.rr_servers == "max" and n != max(counts))):
                    continue  # one server: every routing is the same
                row = one_run(setup, reqs, prefixes, n, routing, args.rate)
                base = rows.get((1, routing)) or rows.get((1, routings[0]))
                row["speedup"] = round(base["wall_s"] / row["wall_s"], 2) if base else None
                rows[(n, routing)] = row
                emit(row)
        top = max(counts)
        summary: dict[str, Any] = {"summary": True, "servers": top, "batch": args.batch}
        if cache:
            summary["prefix_cache"] = cache
        big_reqs, big_prefixes, big = reqs, prefixes, rows.get((top, "paper"))
        if args.scale_papers and top > 1:
            big_reqs = season_slice(args.scale_papers, args.candidates)
            big_prefixes = _prefixes(tokenizer, big_reqs)
            big = one_run(setup, big_reqs, big_prefixes, top, "paper", args.rate)
            big["at_scale"] = True
            big["papers"] = len(big_prefixes)
            one = rows.get((1, "paper"))
            if one:  # the 1-server run of this set is not made (it would take servers x its wall): estimated
                big["speedup_estimate"] = round(top * big["efficiency"] / one["efficiency"], 2)
            rows[(top, "paper-at-scale")] = big
            emit(big)
        if not args.no_failover and top > 1 and big is not None:
            summary["failover"] = failover(setup, big_reqs, big_prefixes, top, args.rate, big)
            emit({"failover": True, **summary["failover"]})
        emit(targets(rows, top, summary))


def cache_pass(setup: Setup, args: argparse.Namespace, n: int) -> dict[str, Any]:
    """Tokens computed / requested with a season's candidates per paper, by paper and round-robin, at ``n`` servers
    answering at once (the ratio depends on the routing and the prompts, not on time)."""
    reqs = season_slice(args.ratio_papers, args.ratio_candidates)
    prefixes = _prefixes(setup.tokenizer, reqs)
    out: dict[str, Any] = {"probe": "prefix_cache", "kind": setup.kind, "servers": n, "papers": args.ratio_papers,
                           "candidates": args.ratio_candidates, "requests": len(reqs)}
    for routing in ("paper", "round-robin"):
        row = one_run(setup, reqs, prefixes, n, routing, 1e9, listed="verbs")
        out[f"tokens_computed_ratio_{routing.replace('-', '_')}"] = row["tokens_computed_ratio"]
    # the least any routing can compute on these prompts: one server, one request at a time, every prefix it has
    # seen cached (what a prompt shares with no earlier one, and the targets, which are always computed)
    floor = one_run(setup, reqs, prefixes, 1, "paper", 1e9, listed="verbs", per_server=1, batch=1)
    out["tokens_computed_ratio_floor"] = floor["tokens_computed_ratio"]
    out["round_robin_one_request_a_call"] = one_run(setup, reqs, prefixes, n, "round-robin", 1e9, listed="verbs",
                                                    batch=1)["tokens_computed_ratio"]
    return out


def failover(setup: Setup, reqs: list[LogprobRequest], prefixes: dict[str, list[int]], n: int, rate: float,
             unkilled: dict[str, Any]) -> dict[str, Any]:
    """The ``unkilled`` run again, with one server killed once half the answers are in."""
    row = one_run(setup, reqs, prefixes, n, "paper", rate, kill_at=0.5)
    killed = row["_killed"]
    t_kill = killed["at_s"]
    ideal_killed = t_kill + (unkilled["wall_s"] - t_kill) * n / (n - 1)
    st = row["_stubs"]
    same = row["_answers"] == unkilled["_answers"]
    return {"servers": n, "killed_server": killed["server"], "killed_at_s": round(t_kill, 3),
            "answered_before_kill": killed["answered"], "wall_s": row["wall_s"],
            "unkilled_wall_s": unkilled["wall_s"], "ideal_killed_s": round(ideal_killed, 3),
            "wall_over_ideal_killed": round(row["wall_s"] / ideal_killed, 3),
            "extra_tokens_computed": row["tokens_computed"] - unkilled["tokens_computed"],
            "moved": row["moved"], "retried": row["_dispatch"].get("retried"),
            "killed_server_down_events": row["_dispatch"]["servers"][killed["server"]]["down_events"],
            "errors": row["errors"], "busiest_server_s": row["busiest_server_s"],
            "answers_equal_unkilled_run": same,
            "each_answer_handed_over_once": sorted(row["_got"]) == list(range(len(reqs))),
            "answered_at_stubs": st["answered"], "requests": len(reqs),
            "prompts_answered_more_than_once": st["answered_more_than_once"]}


def targets(rows: dict[tuple[int, str], dict[str, Any]], top: int, summary: dict[str, Any]) -> dict[str, Any]:
    paper, rr = rows.get((top, "paper")), rows.get((top, "round-robin"))
    one, big = rows.get((1, "paper")), rows.get((top, "paper-at-scale"))
    out = dict(summary)
    out.pop("failover", None)
    out.pop("prefix_cache", None)
    if big:
        out["efficiency_at_scale"] = big["efficiency"]
        out["efficiency_at_scale_ok"] = big["efficiency"] >= 0.85
        out["papers_per_server_at_scale"] = round(big["papers"] / top, 1)
        out["speedup_estimate_at_scale"] = big.get("speedup_estimate")
    if paper:
        out["efficiency"] = paper["efficiency"]
        out["efficiency_ok"] = paper["efficiency"] >= 0.85
        out["client_cpu_ms_per_request"] = paper["client_cpu_ms_per_request"]
        out["requests_per_s_one_core_can_feed"] = paper["requests_per_s_one_core_can_feed"]
        out["requests_per_s_needed_for_8_h100"] = paper["requests_per_s_needed_for_8_h100"]
        out["one_core_feeds_8_h100"] = (paper["requests_per_s_one_core_can_feed"]
                                        >= paper["requests_per_s_needed_for_8_h100"])
        out["tokens_computed_ratio_paper"] = paper["tokens_computed_ratio"]
        out["tokens_computed_ratio_ok"] = paper["tokens_computed_ratio"] <= 0.55
        cache = summary.get("prefix_cache")
        if cache:  # a season's shapes (20 candidates a paper), and the least any routing computes on them
            out["tokens_computed_ratio_season"] = cache["tokens_computed_ratio_paper"]
            out["tokens_computed_ratio_season_floor"] = cache["tokens_computed_ratio_floor"]
            out["tokens_computed_ratio_season_round_robin"] = cache["tokens_computed_ratio_round_robin"]
            out["tokens_computed_ratio_season_ok"] = cache["tokens_computed_ratio_paper"] <= 0.55
            # no routing computes less than the floor: by paper is at it when within half a percent of the tokens
            out["tokens_computed_ratio_season_at_floor"] = (cache["tokens_computed_ratio_paper"]
                                                            <= cache["tokens_computed_ratio_floor"] + 0.005)
    if rr:
        out["tokens_computed_ratio_round_robin"] = rr["tokens_computed_ratio"]
        out["efficiency_round_robin"] = rr["efficiency"]
    if paper and one:
        out["speedup_1_to_top"] = round(one["wall_s"] / paper["wall_s"], 2)
        out["speedup_ok"] = one["wall_s"] / paper["wall_s"] >= 0.875 * top
    fo = summary.get("failover")
    if fo:
        out["failover_wall_over_ideal"] = fo["wall_over_ideal_killed"]
        out["failover_ok"] = bool(fo["wall_over_ideal_killed"] <= 1.05 and fo["answers_equal_unkilled_run"]
                                  and fo["each_answer_handed_over_once"] and fo["answered_at_stubs"] == fo["requests"]
                                  and fo["prompts_answered_more_than_once"] == 0)
    return out


if __name__ == "__main__":
    main()

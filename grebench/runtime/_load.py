"""Load a local checkpoint for causal LM in a dtype other than its file's without holding both copies.

``AutoModelForCausalLM.from_pretrained(path, dtype=bfloat16)`` on a float32 safetensors checkpoint maps the whole
file and casts tensor by tensor while the mapping stays open, so for the length of the load the process holds the
file's float32 pages (counted in its resident memory) beside the new bfloat16 weights: the built-in SmolLM2-135M's
load took the process 916 MB above its imports, where the loaded model leaves it 405 MB above them (issue 47: the
first run's peak, which every load of the evaluation LM or a local candidate in the job reached again).

:func:`load_causal_lm` reads such a checkpoint one tensor at a time through safetensors' own ``safe_open`` (each
handle closed, and its mapping gone, as soon as its tensor is cast) and gives transformers the cast state dict with
the checkpoint's config (``from_pretrained(None, config=..., state_dict=...)``): the model transformers builds is the
same, bit for bit (parameters, buffers, tied weights, generation config: ``tests/runtime/test_load.py``), and the
load's peak is 403 MB above the imports.  Where the file already holds the dtype asked for, or the checkpoint is not
plain safetensors (an index of shards is read the same way, shard by shard), transformers' own load is used as is:
its tensors then stay mapped from the file and cost nothing extra.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

#: safetensors' dtype names → torch's attribute names.
_FILE_DTYPES = {"F32": "float32", "BF16": "bfloat16", "F16": "float16", "F64": "float64"}
_INDEX = "model.safetensors.index.json"
_SINGLE = "model.safetensors"


def checkpoint_files(path: Path) -> list[Path]:
    """The checkpoint's safetensors files (one, or the shards its index names); [] where there are none."""
    if (path / _SINGLE).is_file():
        return [path / _SINGLE]
    index = path / _INDEX
    if index.is_file():
        shards = sorted(set(json.loads(index.read_text(encoding="utf-8")).get("weight_map", {}).values()))
        return [path / shard for shard in shards]
    return []


def file_dtypes(files: list[Path]) -> set[str]:
    """The torch dtype names of the floating-point tensors stored in ``files`` (from their headers)."""
    from safetensors import safe_open

    found: set[str] = set()
    for file in files:
        with safe_open(str(file), framework="pt") as handle:
            for key in handle.keys():  # noqa: SIM118 (a safetensors handle is no dict)
                stored = handle.get_slice(key).get_dtype()
                if stored in _FILE_DTYPES:  # integer tensors (ids, masks) are loaded as they are in either path
                    found.add(_FILE_DTYPES[stored])
    return found


def load_causal_lm(path: str | Path, dtype: str, attn_implementation: str = "sdpa") -> Any:
    """The checkpoint at ``path`` as a causal LM in ``dtype`` (a torch dtype name), in evaluation mode, loaded as the
    module docstring says."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    root = Path(path).expanduser()
    target = getattr(torch, dtype)
    files = checkpoint_files(root)
    if not files or file_dtypes(files) <= {dtype}:
        return AutoModelForCausalLM.from_pretrained(root, dtype=target, local_files_only=True,
                                                    attn_implementation=attn_implementation).eval()
    from safetensors import safe_open
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    config = AutoConfig.from_pretrained(root, local_files_only=True)
    state: dict[str, torch.Tensor] = {}
    for file in files:
        with safe_open(str(file), framework="pt") as handle:
            keys = list(handle.keys())
        for key in keys:
            with safe_open(str(file), framework="pt") as handle:  # this tensor's pages leave with its mapping
                tensor = handle.get_tensor(key)
                state[key] = tensor.to(target) if tensor.is_floating_point() else tensor
            del tensor
    model_class: Any = MODEL_FOR_CAUSAL_LM_MAPPING[type(config)]
    model = model_class.from_pretrained(None, config=config, state_dict=state, dtype=target,
                                        attn_implementation=attn_implementation)
    generation = root / "generation_config.json"
    if generation.is_file():  # from_pretrained(None, ...) reads none: the checkpoint's own, as a path load would
        from transformers import GenerationConfig

        model.generation_config = GenerationConfig.from_pretrained(root, local_files_only=True)
    return model.eval()

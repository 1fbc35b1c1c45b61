"""A local checkpoint served by ``transformers serve`` in a child process, for as long as a ``with`` block runs.

Why a child process running the stock server: ``transformers serve`` is how a user serves a local model (an
OpenAI-compatible ``/v1/chat/completions``, streamed or not, continuous batching of concurrent requests, and
``/v1/systemone`` typed decisions), so a local candidate goes through the unchanged endpoint path of the bench
(litellm, call cache, deadlines), and the model's memory and threads live and die with a process we own.

Readiness is observed, never timed: the parent polls ``/health`` while watching the child, and the server is ready
when ``/health`` answers ok *from the child* (on Linux the listening socket must be one of the child's, so another
program that holds the port cannot pass for it).  ``local_server_startup_s`` bounds the wait only to catch a hung
server.  A child that exits early raises :class:`LocalServerError` with the tail of its log
(``DATA_DIR/local-servers/<name>.log``); a port that turned out to be taken raises :class:`PortInUse`, and an
OS-chosen port is then tried once more with a fresh one (another program may bind the free port we were given
between our check and the child's bind).

The child binds 127.0.0.1 only and gets its own process group (``start_new_session``): stopping sends SIGTERM to
the group, waits, then SIGKILLs the group, and always reaps the child, also when the ``with`` body raises or the
parent is interrupted (KeyboardInterrupt) while starting or stopping.  A parent that dies without running its
``finally`` blocks (SIGKILL, or SIGTERM from ``timeout``, ``docker stop``, systemd) must not leave the model running
either: the child runs ``transformers serve`` behind :data:`LAUNCHER`, a few lines that read a pipe whose only
writer is the parent and SIGKILL the child's group when it reads end-of-file, which the kernel delivers as soon as
the parent is gone, however it ended.

On the CPU the continuous-batching KV cache would otherwise take 60% of the free RAM: ``cache_tokens`` (the bench
passes the calls it sends at once x the candidate's ``context_tokens``) sizes it to what the calls can use.
transformers checks that size against the memory it finds free only when the first request arrives (on a CPU: 60% of
the RAM of the NUMA nodes the process may use, less what it holds), and a cache that does not fit kills its batching
worker for good: every call then fails with 503.  So a server is ready only once it has also generated one token, and
a cache that transformers refuses is started again smaller, in the proportion its own figures give (never below
``call_tokens``, one call's context): :attr:`LocalServer.cache_tokens` is what it runs with, and the caller sends
correspondingly fewer calls at once (:class:`grebench.runtime.LocalServers`).
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from grebench import stop
from grebench.runtime._memory import bound_allocations
from grebench.settings import Settings

log = logging.getLogger(__name__)

HOST = "127.0.0.1"  # never anything else: the server has no authentication
STOP_GRACE_S = 20.0  # SIGTERM lets uvicorn finish; after this the group is killed
POLL_S = 0.2  # how often /health is asked while the child is alive
PAGE_TOKENS = 256  # transformers' continuous-batching page size (ContinuousBatchingConfig.page_size)
MAX_BATCH_TOKENS = 2048  # tokens of one continuous-batching step (longer prompts are prefilled in chunks)
#: The same on a CPU: a step's activations and logits grow with its tokens (a 135M judge's server held 2.05 GB with
#: 2,048), and a CPU is as fast on steps of 512 (issue 47: the job's peak under 2 GB).
CPU_MAX_BATCH_TOKENS = 512
#: The start of every child's program: watch the parent's pipe (fd in argv[1]) in a thread; at its end of file the
#: parent is gone and the whole process group is killed.
PARENT_WATCH = """\
import os, signal, sys, threading
fd = int(sys.argv[1])
def watch():
    try:
        while os.read(fd, 1):
            pass
    except OSError:
        pass
    os.killpg(0, signal.SIGKILL)  # end of file: the parent is gone, take the whole group down
threading.Thread(target=watch, name="grebench-parent-watch", daemon=True).start()
"""
#: The child's program: the parent watch, then the transformers CLI in-process.
LAUNCHER = PARENT_WATCH + """\
sys.argv = ["transformers", *sys.argv[2:]]
from transformers.cli.transformers import main
sys.exit(main())
"""
_PORT_TAKEN = re.compile(r"address already in use|Errno 98|Errno 48|only one usage of each socket address", re.I)
#: transformers' continuous-batching refusal of a KV cache larger than the memory it finds free
#: (``PagedAttentionCache._check_footprint``): the two byte counts.
_CACHE_REFUSED = re.compile(r"Memory footprint (\d+) is more than available memory (\d+)")
#: Starts with a smaller cache after transformers refused one, before giving up.
CACHE_SHRINKS = 4
#: The share of the memory transformers reports free that a shrunk cache aims at (its own check is exact; this
#: leaves room for the sizes it rounds up).
CACHE_FILL = 0.9


class LocalServerError(RuntimeError):
    """A local model server that could not start (or stopped), with the tail of its log."""


class CacheRefused(LocalServerError):
    """transformers refused the continuous-batching KV cache the server was started with: ``footprint`` bytes asked
    for, ``available`` bytes it finds free."""

    def __init__(self, footprint: int, available: int, message: str) -> None:
        super().__init__(message)
        self.footprint, self.available = footprint, available


class PortInUse(LocalServerError):
    """The port the server was to bind is taken by another program."""

    def __init__(self, port: int, message: str) -> None:
        super().__init__(message)
        self.port = port


def free_port() -> int:
    """A port on 127.0.0.1 that is free now (the OS picks it; another program may still take it before we bind)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def _port_is_free(port: int) -> bool:
    """Whether the server could bind ``port`` now (SO_REUSEADDR like uvicorn, so TIME_WAIT does not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
        return True


def default_device(requested: str) -> str:
    """``auto``: cuda when torch sees a GPU, else cpu; anything else as given."""
    if requested != "auto":
        return requested
    try:
        import torch
    except ImportError:
        return "cpu"
    return "cuda" if torch.cuda.is_available() else "cpu"


def _listener_inodes(port: int) -> set[str] | None:
    """Socket inodes listening on 127.0.0.1:``port`` (Linux ``/proc/net/tcp``); None where that cannot be read."""
    want = f"0100007F:{port:04X}"
    try:
        lines = Path("/proc/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return None
    out = set()
    for line in lines:
        fields = line.split()
        if len(fields) > 9 and fields[1] == want and fields[3] == "0A":  # 0A: LISTEN
            out.add(fields[9])
    return out


def _owns_listener(pid: int, port: int) -> bool:
    """Whether process ``pid`` holds the socket listening on ``port`` (True where /proc cannot tell)."""
    inodes = _listener_inodes(port)
    if inodes is None:
        return True
    fd_dir = Path(f"/proc/{pid}/fd")
    try:
        links = {os.readlink(fd_dir / fd) for fd in os.listdir(fd_dir)}
    except OSError:
        return not fd_dir.parent.exists()  # gone: not ours; no /proc for it: cannot tell
    return any(f"socket:[{inode}]" in links for inode in inodes)


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _exit_status(pid: int) -> str | None:
    """How an exited child ended ("status N", "signal N"), None while it runs; never reaps it.

    Left unreaped, the child's pid (its group's id) cannot go to another process, so the group can still be killed
    safely after the child exited.
    """
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return "status unknown (already reaped)"
    if info is None:
        return None
    return f"signal {info.si_status}" if info.si_code in (os.CLD_KILLED, os.CLD_DUMPED) else f"status {info.si_status}"


def _wait_exit(pid: int, timeout_s: float) -> bool:
    """Wait until the child exits (unreaped) or ``timeout_s`` passes; whether it exited."""
    deadline = time.monotonic() + timeout_s
    while _exit_status(pid) is None:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


class LocalServer:
    """``transformers serve CHECKPOINT`` on 127.0.0.1 while the ``with`` block runs.

    ``port``: None = the ``local_server_port`` setting (0 = one chosen by the OS).  ``device`` / ``dtype`` go to
    the server (``--device``, ``--dtype``); ``continuous_batching`` (on by default) batches concurrent requests;
    ``cache_tokens`` sizes the batching KV cache (None: the server's own sizing from free memory); where
    transformers refuses that size it is started again with a smaller one, never below ``call_tokens`` (default:
    ``cache_tokens``, i.e. never smaller), and :attr:`cache_tokens` is the size it runs with.
    """

    #: What the log and the errors call the server.
    program = "transformers serve"
    #: Whether readiness asks for a first token (:meth:`_first_token`): transformers' continuous batching sizes its
    #: KV cache at the first request; a server that sizes it at start (vLLM) is ready once it answers /health.
    first_token = True

    def __init__(self, checkpoint: str | os.PathLike[str], settings: Settings, *, port: int | None = None,
                 device: str = "cpu", dtype: str = "float32", continuous_batching: bool = True,
                 cache_tokens: int | None = None, call_tokens: int | None = None,
                 name: str | None = None) -> None:
        self.checkpoint = Path(checkpoint)
        self.settings = settings
        self.requested_port = settings.bench.local_server_port if port is None else int(port)
        if not 0 <= self.requested_port <= 65535:
            raise LocalServerError(f"local_server_port must be 0 (the OS chooses) or a port, got {self.requested_port}")
        self.device, self.dtype = device, dtype
        self.continuous_batching = continuous_batching
        self.cache_tokens = cache_tokens
        self.requested_cache_tokens = cache_tokens
        self.call_tokens = min(call_tokens or cache_tokens or 0, cache_tokens or 0) or None
        digest = hashlib.sha256(str(self.checkpoint).encode()).hexdigest()[:8]
        slug = re.sub(r"[^A-Za-z0-9._-]+", "-", name or self.checkpoint.name).strip("-.") or "model"
        self.root = settings.local_servers_path
        self.log_path = self.root / f"{slug}-{digest}.log"
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._lifeline: int | None = None  # the parent's end of the pipe the child watches

    # -- what callers use ------------------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` of the running server."""
        if not self.port:
            raise LocalServerError("the local server is not running")
        return f"http://{HOST}:{self.port}"

    @property
    def api_base(self) -> str:
        """The OpenAI-compatible base URL (``base_url/v1``)."""
        return f"{self.base_url}/v1"

    @property
    def model_id(self) -> str:
        """The model name requests give: the checkpoint path as the server was started with it."""
        return str(self.checkpoint)

    @property
    def pid(self) -> int | None:
        """The child's process id while it runs."""
        return None if self._proc is None else self._proc.pid

    def command(self, port: int) -> list[str]:
        """The ``transformers serve`` command line (the child runs it behind :data:`LAUNCHER`)."""
        cmd = ["transformers", "serve", str(self.checkpoint), "--host", HOST,
               "--port", str(port), "--device", self.device, "--dtype", self.dtype,
               "--continuous-batching" if self.continuous_batching else "--no-continuous-batching"]
        if self.continuous_batching and self.cache_tokens:
            blocks = max(1, math.ceil(self.cache_tokens / PAGE_TOKENS))
            cmd += ["--cb-num-blocks", str(blocks),
                    "--cb-max-batch-tokens", str(min(CPU_MAX_BATCH_TOKENS if self.device == "cpu" else MAX_BATCH_TOKENS,
                                                     blocks * PAGE_TOKENS))]
        return cmd

    def argv(self, watch_fd: int, port: int) -> list[str]:
        """What the child runs: :data:`LAUNCHER` (watching ``watch_fd``) in this interpreter, then the command."""
        return [sys.executable, "-c", LAUNCHER, str(watch_fd), *self.command(port)[1:]]

    def environment(self) -> dict[str, str]:
        """The child's environment: offline, an HF cache of its own under the data dir (``/v1/models`` scans it)."""
        hub = self.root / "hf-hub"
        hub.mkdir(parents=True, exist_ok=True)
        bound_allocations()  # the child's allocator and oneDNN bounds travel in the environment
        return {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_CACHE": str(hub),
                "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_DISABLE_UPDATE_CHECK": "1", "PYTHONUNBUFFERED": "1",
                "TOKENIZERS_PARALLELISM": "false", "DO_NOT_TRACK": "1"}

    # -- starting --------------------------------------------------------------------------------------------------
    def start(self) -> LocalServer:
        """Start the child and return once it answers ``/health`` and has generated a token (see the module
        docstring); a KV cache transformers refuses is started again smaller."""
        if self._proc is not None:
            raise LocalServerError("the local server is already running")
        for _shrink in range(CACHE_SHRINKS + 1):
            try:
                return self._start_on_a_port()
            except CacheRefused as exc:
                smaller = self._smaller_cache(exc)
                if smaller is None:
                    raise
                log.info("%s for %s: transformers refused a KV cache of %d tokens (%.2f GB asked for, %.2f GB free "
                         "as it counts memory here); starting it again with %d tokens", self.program,
                         self.checkpoint, self.cache_tokens, exc.footprint / 1e9, exc.available / 1e9, smaller)
                self.cache_tokens = smaller
        raise LocalServerError(f"{self.program} for {self.checkpoint}: transformers refused {CACHE_SHRINKS + 1} "
                               f"KV-cache sizes down to {self.cache_tokens} tokens; the end of its log "
                               f"({self.log_path}):\n{self.log_tail()}")

    def _smaller_cache(self, refused: CacheRefused) -> int | None:
        """The cache size to try after ``refused``: its tokens scaled by free/asked (:data:`CACHE_FILL` of it), in
        whole pages, at least one call's context; None when it cannot shrink."""
        tokens, floor = self.cache_tokens or 0, self.call_tokens or 0
        if tokens <= floor or refused.footprint <= 0:
            return None
        scaled = int(tokens * CACHE_FILL * refused.available / refused.footprint) // PAGE_TOKENS * PAGE_TOKENS
        return max(floor, min(scaled, tokens - PAGE_TOKENS))

    def _start_on_a_port(self) -> LocalServer:
        fixed = self.requested_port != 0
        tries = 1 if fixed else 2
        for attempt in range(1, tries + 1):
            port = self.requested_port if fixed else free_port()
            if fixed and not _port_is_free(port):
                raise PortInUse(port, f"local_server_port {port} on {HOST} is in use by another program: free it, "
                                      "or set local_server_port = 0 to let the OS choose a free port")
            try:
                self._start_once(port)
                return self
            except PortInUse as exc:
                if fixed:
                    raise PortInUse(port, f"local_server_port {port} on {HOST} is in use by another program: free "
                                          f"it, or set local_server_port = 0 to let the OS choose ({exc})") from None
                if attempt == tries:
                    raise
                log.info("port %d was taken before the local server could bind it; trying another", port)
        raise AssertionError("unreachable")

    def _start_once(self, port: int) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        log.info("starting %s for %s on %s:%d (%s, %s; log: %s)", self.program, self.checkpoint, HOST, port,
                 self.device, self.dtype, self.log_path)
        command = self.command(port)
        watch_fd, self._lifeline = os.pipe()  # both non-inheritable: only the child gets the read end (pass_fds)
        try:
            with open(self.log_path, "wb") as out:
                out.write(f"$ {' '.join(command)}\n".encode())
                out.flush()
                self._proc = subprocess.Popen(self.argv(watch_fd, port),
                                              stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                              env=self.environment(), start_new_session=True, pass_fds=(watch_fd,))
        except BaseException:
            os.close(self._lifeline)
            self._lifeline = None
            raise
        finally:
            os.close(watch_fd)
        self.port = port
        try:
            self._wait_ready(port)
            if self.first_token and self.continuous_batching:
                self._first_token(port)
        except BaseException:  # not ready, or interrupted while waiting: the child must not outlive this
            self.stop()
            raise

    def _wait_ready(self, port: int) -> None:
        import httpx

        proc = self._proc
        assert proc is not None
        limit = self.settings.bench.local_server_startup_s
        deadline = time.monotonic() + limit
        url = f"http://{HOST}:{port}/health"
        with httpx.Client(timeout=5.0, trust_env=False) as http:
            while True:
                stop.check()  # a stop while the server loads: the child is stopped by the caller's except below
                ended = _exit_status(proc.pid)
                if ended is not None:
                    tail = self.log_tail()
                    if _PORT_TAKEN.search(tail):
                        raise PortInUse(port, f"port {port} on {HOST} was taken by another program before the "
                                              "local server could bind it")
                    raise LocalServerError(f"{self.program} for {self.checkpoint} exited ({ended}) before it "
                                           f"was ready; the end of its log ({self.log_path}):\n{tail}")
                if _owns_listener(proc.pid, port) and self._healthy(http, url):
                    log.info("local server for %s is ready at http://%s:%d", self.checkpoint, HOST, port)
                    return
                if time.monotonic() >= deadline:
                    raise LocalServerError(
                        f"{self.program} for {self.checkpoint} did not answer /health within "
                        f"local_server_startup_s = {limit:g} s (a hung server?); the end of its log "
                        f"({self.log_path}):\n{self.log_tail()}")
                _wait_exit(proc.pid, POLL_S)  # returns as soon as the child exits

    def _first_token(self, port: int) -> None:
        """One greedy token through the OpenAI-compatible route: transformers builds its continuous-batching worker
        (and checks its KV cache against free memory) on the first request, and a worker that died there answers
        every later call with 503.  :class:`CacheRefused` when it refused the cache; any other failure is logged
        and left to the calls, which record their own errors."""
        import httpx

        body = {"model": self.model_id, "messages": [{"role": "user", "content": "Hello"}], "max_tokens": 1,
                "temperature": 0, "seed": 0}
        why = ""
        try:
            with httpx.Client(timeout=self.settings.bench.local_server_startup_s, trust_env=False) as http:
                response = http.post(f"http://{HOST}:{port}/v1/chat/completions", json=body)
            if response.status_code == 200 and response.json().get("choices"):
                return
            why = f"HTTP {response.status_code}: {response.text[:300]}"
        except (httpx.HTTPError, ValueError, AttributeError) as exc:
            why = f"{type(exc).__name__}: {exc}"
        tail = self.log_tail()
        refused = _CACHE_REFUSED.search(tail)
        if refused:
            footprint, available = int(refused.group(1)), int(refused.group(2))
            raise CacheRefused(footprint, available,
                               f"{self.program} for {self.checkpoint} refused a KV cache of {self.cache_tokens} "
                               f"tokens: {footprint / 1e9:.2f} GB asked for, {available / 1e9:.2f} GB free as "
                               f"transformers counts memory here ({self.log_path})")
        # anything else is the calls' to report (a checkpoint without a chat template can still judge through
        # /v1/systemone): said once here, with the evidence, and the server is used
        log.warning("%s for %s answered /health but not a first chat token (%s); see its log %s", self.program,
                    self.checkpoint, why, self.log_path)

    def _healthy(self, http: Any, url: str) -> bool:
        import httpx

        try:
            response = http.get(url)
        except httpx.HTTPError:
            return False
        if response.status_code != 200:
            return False
        try:
            return bool(response.json().get("status") == "ok")
        except ValueError:
            return False

    def log_tail(self, lines: int = 30, max_chars: int = 4000) -> str:
        """The last lines of the child's log (progress bars dropped)."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 64 * 1024))
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return "(no log)"
        kept = [ln for ln in re.split(r"[\r\n]+", text) if ln.strip() and "it/s]" not in ln and "s/it]" not in ln]
        return "\n".join(kept[-lines:])[-max_chars:]

    # -- stopping --------------------------------------------------------------------------------------------------
    def stop(self) -> None:
        """SIGTERM the child's group, wait, SIGKILL the group; the child is reaped whatever happens."""
        proc = self._proc
        if proc is None:
            return
        try:
            if _exit_status(proc.pid) is None:
                _signal_group(proc.pid, signal.SIGTERM)
                if not _wait_exit(proc.pid, STOP_GRACE_S):
                    log.warning("local server %d ignored SIGTERM for %g s: killed", proc.pid, STOP_GRACE_S)
        finally:
            # the child is not reaped yet, so its group id is still its own: this reaches the child and any worker
            # it left behind, never another program's processes
            _signal_group(proc.pid, signal.SIGKILL)
            proc.wait()
            if self._lifeline is not None:
                os.close(self._lifeline)
                self._lifeline = None
            self._proc = None
            self.port = 0

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

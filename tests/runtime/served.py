"""Helpers for tests that run the real ``transformers serve`` on the tiny Llama checkpoint of tests/scoring.

Everything is driven by what is observed (a port that binds or not, a process that is there or not), with a
generous bound that only catches a hang.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest

HANG_S = 60.0


def require_serve() -> None:
    """Skip unless the serving stack (torch, transformers, fastapi, uvicorn) is installed."""
    for module in ("torch", "transformers", "fastapi", "uvicorn"):
        pytest.importorskip(module)


def port_free(port: int) -> bool:
    """Whether a server could bind 127.0.0.1:``port`` now (SO_REUSEADDR, as uvicorn binds)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def gone(pid: int) -> bool:
    """Whether process ``pid`` no longer runs: absent, or a zombie all of whose threads have exited.

    (The leader of a dying multi-threaded process shows as a zombie while its other threads still hold its files,
    its listening socket included.)
    """
    task_dir = Path(f"/proc/{pid}/task")
    try:
        states = [(task / "stat").read_text().rsplit(")", 1)[1].split()[0] for task in task_dir.iterdir()]
    except OSError:
        if task_dir.parent.exists():
            return False  # a thread went away while we looked: look again
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False
    return all(state in ("Z", "X") for state in states)


def wait_gone(pid: int) -> bool:
    """Wait (bounded, to catch a hang) until ``pid`` is gone; whether it is."""
    deadline = time.monotonic() + HANG_S
    while not gone(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def held_port() -> socket.socket:
    """A socket listening on a free 127.0.0.1 port (another program's server); close it when done."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    return sock

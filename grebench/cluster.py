"""Ray, where ``executor = ray`` sends work (the bottom layer: any stage may put work on Ray through it).

Ray is an optional extra (``pip install -e '.[hf,ray]'``) imported here only, and only when a stage runs with
``executor = ray``: ``import grebench`` never imports it.  :func:`ray_session` joins the cluster ``ray_address``
names (``auto``: the one ``ray start`` runs on this machine; ``ray://HOST:10001``: a remote cluster's client
port) or starts a local Ray for the stage, and stops only a Ray it started; a Ray the caller already initialised
(a test's, a driver script's) is used and left as it is.  Placement, retries and restarts are Ray's.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

#: How to install what ``executor = ray`` needs.
RAY_INSTALL = "pip install -e '.[hf,ray]'"


class RayMissing(RuntimeError):
    """``executor = ray`` without Ray installed."""

    def __init__(self) -> None:
        super().__init__(f"the ray executor needs Ray, which is not installed: {RAY_INSTALL}")


def ray_module() -> Any:
    """The ``ray`` module (:class:`RayMissing` where it is not installed)."""
    try:
        import ray
    except ImportError:
        raise RayMissing() from None
    return ray


def start_ray(address: str) -> bool:
    """Initialise Ray unless it is: join ``address`` or start a local Ray (no dashboard, the workers' logs kept in
    its session directory).  Whether this call started it (then the caller shuts it down)."""
    ray = ray_module()
    if ray.is_initialized():
        return False
    if address.strip():  # a cluster's workers import grebench from their own install (docs/scale.md)
        ray.init(address=address.strip(), logging_level=logging.WARNING)
    else:
        ray.init(include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
    return True


@contextmanager
def ray_session(address: str) -> Iterator[Any]:
    """Ray for the length of the block (see the module docstring); yields the ``ray`` module."""
    ray = ray_module()
    started = start_ray(address)
    try:
        yield ray
    finally:
        if started:
            ray.shutdown()

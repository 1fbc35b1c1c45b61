"""The stop token: one per process, set by SIGTERM / SIGINT, checked at every request boundary (docs/operations.md).

A signal handler only *sets* the token (:func:`request_stop`); the work stops itself at its next request boundary
by calling :func:`check`, which raises :class:`Interrupted`: stage loops, LLM calls and their retries, estimator
batches, ingest per paper, snapshot per member, panel per comparison.  What finished before the boundary is
stored; the run is recorded as ``interrupted``; nothing new starts.  Waits (back-off, a call in flight on a worker
thread) use :func:`wait` / :func:`sleep`, which return or raise as soon as the token is set, so an HTTP request in
flight on a worker thread is abandoned (its daemon thread is left to die with the process), never waited for; a
library call that blocks out of the token's reach (openreview-py's requests and their retries) runs through
:func:`call`, which puts it on such a thread.  Every retry loop waits with :func:`sleep`, never ``time.sleep``: a
stop during a back-off ends the work at once, recorded ``interrupted``, not ``failed`` when the retries run out.

One process-wide token rather than one per call chain: a signal is process-wide, and the boundaries are spread over
layers that share no context object (the LLM client's worker threads, an estimator's thread pool).  Tests that
set it call :func:`reset`.

``Interrupted`` derives from :class:`BaseException` like :class:`KeyboardInterrupt`, so the ``except Exception``
handlers that record one failed item and carry on do not swallow it.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")
_EVENT = threading.Event()
_SIGNAL: list[int] = []  # the signal that set the token (first one), if a signal did

#: Seconds between two looks at the token while waiting for something that cannot be interrupted otherwise.
POLL_S = 0.2


class Interrupted(BaseException):
    """The process was asked to stop (a signal, or :func:`request_stop`); raised at a request boundary."""

    def __init__(self, reason: str | None = None) -> None:
        super().__init__(reason or reason_text())


def request_stop(signum: int | None = None) -> None:
    """Ask the work of this process to stop at its next request boundary (what a signal handler does)."""
    if signum is not None and not _SIGNAL:
        _SIGNAL.append(signum)
    _EVENT.set()


def stopping() -> bool:
    """Whether a stop was requested."""
    return _EVENT.is_set()


def stop_signal() -> int | None:
    """The signal that asked for the stop (None: none, or asked without a signal)."""
    return _SIGNAL[0] if _SIGNAL else None


def reason_text() -> str:
    """Why the work stops, in words (``stopped by SIGTERM``)."""
    signum = stop_signal()
    return f"stopped by {signal.Signals(signum).name}" if signum is not None else "stopped on request"


def wait_for_stop(timeout_s: float | None = None) -> bool:
    """Block until a stop is requested (at most ``timeout_s``); whether it was (waits in short slices, so the main
    thread runs its signal handlers promptly)."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while not _EVENT.wait(POLL_S):
        if deadline is not None and time.monotonic() >= deadline:
            return False
    return True


def check() -> None:
    """Raise :class:`Interrupted` when a stop was requested (call this at every request boundary)."""
    if _EVENT.is_set():
        raise Interrupted()


def wait(event: threading.Event, timeout_s: float | None) -> bool:
    """``event.wait(timeout_s)`` that raises :class:`Interrupted` as soon as a stop is requested."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        check()
        left = POLL_S if deadline is None else min(POLL_S, deadline - time.monotonic())
        if left <= 0:
            return event.is_set()
        if event.wait(left):
            return True


def sleep(seconds: float) -> None:
    """``time.sleep`` that raises :class:`Interrupted` as soon as a stop is requested."""
    check()
    if _EVENT.wait(max(0.0, seconds)):
        raise Interrupted()


def call(fn: Callable[[], T], name: str = "grebench-request") -> T:
    """``fn()`` run on a daemon worker thread while this thread waits on the token: its result or its exception,
    or :class:`Interrupted` as soon as a stop is requested.  For a library call that blocks where no token reaches
    (a socket read, a third party's own retry sleeps): on a stop the worker is abandoned, never waited for; it ends
    with its request or with the process."""
    check()
    finished = threading.Event()
    outcome: list[T] = []
    failure: list[BaseException] = []

    def work() -> None:
        try:
            outcome.append(fn())
        except BaseException as exc:  # handed to the waiting thread, which raises it as its own
            failure.append(exc)
        finally:
            finished.set()

    threading.Thread(target=work, name=name, daemon=True).start()
    wait(finished, None)
    if failure:
        raise failure[0]
    return outcome[0]


def reset() -> None:
    """Clear the token (tests; a long-lived process that handled a stop and goes on)."""
    _EVENT.clear()
    _SIGNAL.clear()


def exit_status(default: int = 0) -> int:
    """The exit status after a stop: 130 after SIGINT (the shell's convention for Ctrl-C), 0 after SIGTERM (the
    service stopped as asked: systemd and Docker treat that as a clean stop), ``default`` otherwise."""
    signum = stop_signal()
    if signum == signal.SIGINT:
        return 130
    if signum == signal.SIGTERM:
        return 0
    return default


_FORCED: list[Callable[[], None]] = []


def at_forced_exit(callback: Callable[[], None]) -> None:
    """Run ``callback`` (from the watchdog thread) just before the process exits because the work did not reach a
    boundary within the grace: the store marks its live runs ``interrupted`` there."""
    _FORCED.append(callback)


def _force_exit() -> None:
    import os
    import sys

    print(f"grebench: the running job did not stop within its grace ({reason_text()}): exiting now; "
          "what it finished is stored", file=sys.stderr, flush=True)
    for callback in _FORCED:
        try:
            callback()
        except Exception:  # exiting anyway: the next start marks what could not be marked here
            pass
    os._exit(exit_status(1))


@contextmanager
def handling_signals(grace_s: float | None = None) -> Iterator[None]:
    """:func:`install_handlers` for the block, the previous handlers back after it (a command run in-process, by a
    test, leaves the process as it found it)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread
        return
    old = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    install_handlers(grace_s)
    try:
        yield
    finally:
        # a watchdog already started keeps running: the interpreter's exit still joins worker threads
        for signum, handler in old.items():
            signal.signal(signum, handler)


def install_handlers(grace_s: float | None = None) -> None:
    """SIGTERM and SIGINT set the token (work stops at its next request boundary).  With ``grace_s``, a watchdog
    ends the process that many seconds after the first signal if it is still running (work stuck in code with no
    boundary: a blocking read, a long forward pass); a second signal ends it at once (the operator insists).
    Main thread only (Python's rule for signal handlers)."""

    def handler(signum: int, _frame: object) -> None:
        if _EVENT.is_set():
            _force_exit()
        request_stop(signum)
        if grace_s is not None:
            timer = threading.Timer(grace_s, _force_exit)
            timer.daemon = True
            timer.start()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)

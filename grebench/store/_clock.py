"""The one clock every job reads "now" from: the wall clock, or a simulated one (``grebench replay``).

:func:`grebench.store.utcnow` reads the installed clock, so every stage, the store and the scheduler see the same
"now" without a parameter threaded through each of them.  The clock is process-wide, not a context variable: stages
run work in thread pools (LLM calls, PDF extraction) and a generation's time must be the simulated one there too.
A simulated clock advances by one microsecond at each reading, so times stay strictly ordered (board versions, runs)
and a replay of the same season reads the same sequence of times.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta


def naive_utc(when: datetime) -> datetime:
    """``when`` as the store keeps times: naive UTC (DuckDB TIMESTAMP).  An aware time is converted; a naive one is
    taken to be UTC already.  Every time that comes from outside (a command line, a season file) passes here before
    it meets a stored time or the clock, so naive and aware times are never compared."""
    return when.astimezone(UTC).replace(tzinfo=None) if when.tzinfo is not None else when


class WallClock:
    """The real time, naive UTC (DuckDB TIMESTAMP convention here)."""

    def now(self) -> datetime:
        """Current UTC time as a naive datetime."""
        return datetime.now(UTC).replace(tzinfo=None)


class SimulatedClock:
    """A clock set by its owner (a replay) that ticks one microsecond per reading, from the time it was set."""

    def __init__(self, start: datetime) -> None:
        self._lock = threading.Lock()
        self._now = naive_utc(start)

    def set(self, when: datetime) -> None:
        """Move the clock to ``when`` (UTC: an aware time is converted); it may only move forward."""
        when = naive_utc(when)
        with self._lock:
            if when < self._now:
                raise ValueError(f"a simulated clock does not go back: {when} is before {self._now}")
            self._now = when

    def now(self) -> datetime:
        """The simulated time; each reading is one microsecond after the previous one."""
        with self._lock:
            self._now += timedelta(microseconds=1)
            return self._now


WALL_CLOCK = WallClock()
_current: WallClock | SimulatedClock = WALL_CLOCK


def clock() -> WallClock | SimulatedClock:
    """The installed clock (the wall clock unless a replay installed its own)."""
    return _current


@contextmanager
def use_clock(which: WallClock | SimulatedClock) -> Iterator[WallClock | SimulatedClock]:
    """Install ``which`` as the clock for the duration of the block (the previous one comes back after)."""
    global _current
    previous, _current = _current, which
    try:
        yield which
    finally:
        _current = previous

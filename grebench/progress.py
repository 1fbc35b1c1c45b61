"""Progress display as a small protocol: a rich bar on a terminal, plain lines in a log, nothing in ``--json`` mode.

Every stage that can take more than a few seconds reports through a :class:`Progress` it is handed::

    with progress.task("score", total=len(requests), unit="requests") as task:
        for batch in batches:
            ...
            task.advance(len(batch))

On a terminal (stderr is a TTY) the bar shows counts, rate and ETA and disappears when done (a task ended by an
exception, a stop included, leaves one line ending in ``(aborted)``: never ``(done)``; one whose items failed leaves
one saying how many: ``8/8 answers (100%), 8 failed (failed)`` when all did, ``…, 3 failed (done with
failures)`` when some did).  Elsewhere (CI, a log
file, ``grebench serve``) one line is written each time another 10% is done — ``score: 120/400 requests (30%),
41 s elapsed, ETA 96 s`` — plus a final line.  ``--json`` output gets none of it (:class:`NoProgress`).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any, Protocol


class Task(Protocol):
    """One unit of work with a count of done items."""

    def advance(self, n: int = 1, failed: int = 0) -> None:
        """Count ``n`` more items as done, ``failed`` of them without a result (a call that gave up)."""
        ...

    def set_total(self, total: int | None) -> None:
        """Set (or correct) how many items there are."""
        ...


class Progress(Protocol):
    """Where tasks report; ``task`` is a context manager that ends the display of the task."""

    def task(self, label: str, total: int | None = None, unit: str = "items") -> Any:
        """A context manager yielding a :class:`Task`."""
        ...


class _NullTask:
    def advance(self, n: int = 1, failed: int = 0) -> None:
        pass

    def set_total(self, total: int | None) -> None:
        pass


class NoProgress:
    """Shows nothing (``--json`` mode, library use, tests)."""

    @contextmanager
    def task(self, label: str, total: int | None = None, unit: str = "items") -> Iterator[Task]:
        yield _NullTask()


def _seconds(value: float) -> str:
    value = max(0.0, value)
    if value < 90:
        return f"{value:.0f} s"
    if value < 5400:
        return f"{value / 60:.1f} min"
    return f"{value / 3600:.1f} h"


class _PlainTask:
    def __init__(self, label: str, total: int | None, unit: str, stream: IO[str], step: float) -> None:
        self.label, self.total, self.unit, self.stream, self.step = label, total, unit, stream, step
        self.done = self.failed = 0
        self.started = time.monotonic()
        self._first: tuple[float, int] | None = None  # (time, count) at the first advance, where the rate starts
        self._next_share = step
        self._next_count = 100  # without a total: a line every 100, 200, 400, ... items

    def advance(self, n: int = 1, failed: int = 0) -> None:
        self.done += n
        self.failed += failed
        if self._first is None:
            self._first = (time.monotonic(), self.done)
        if self.total:
            share = self.done / self.total
            if share >= self._next_share and self.done < self.total:
                while self._next_share <= share:
                    self._next_share += self.step
                self._line()
        elif self.done >= self._next_count:
            self._next_count *= 2
            self._line()

    def set_total(self, total: int | None) -> None:
        self.total = total

    def _remaining(self, elapsed: float) -> float:
        """Seconds left at the rate measured since the first advance: what came before it (a model's load, a
        prompt's prefill before the first decoded token) is not part of the rate, so the first lines' ETA is not
        inflated by it (issue 47: "ETA 3.8 min" for a decoding that ended 50 s later).  With one advance so far,
        the rate since the start."""
        total = self.total or 0
        if self._first is not None and self.done > self._first[1]:
            since = time.monotonic() - self._first[0]
            if since > 0:
                return since * (total - self.done) / (self.done - self._first[1])
        return elapsed * (total - self.done) / self.done

    def _line(self, final: bool = False, aborted: bool = False) -> None:
        elapsed = time.monotonic() - self.started
        if self.total:
            text = f"{self.label}: {self.done}/{self.total} {self.unit} ({100 * self.done / self.total:.0f}%), " \
                   f"{_seconds(elapsed)} elapsed"
            if not final and self.done:
                text += f", ETA {_seconds(self._remaining(elapsed))}"
        else:
            text = f"{self.label}: {self.done} {self.unit}, {_seconds(elapsed)} elapsed"
        if self.failed:
            text += f", {self.failed} failed"
        print(text + (" (aborted)" if aborted else _ending(self.done, self.failed) if final else ""),
              file=self.stream, flush=True)

    def finish(self, aborted: bool = False) -> None:
        """The final line: ``(done)``, or ``(aborted)`` when the task ended by an exception (a stop, a failure)."""
        if self.done or self.total or aborted:
            self._line(final=True, aborted=aborted)


def _ending(done: int, failed: int) -> str:
    """A finished task's last words (after ``, N failed`` on its line): ``(done)``; ``(failed)`` when every item
    failed, ``(done with failures)`` when some did (a line that says 100 % done of answers that all failed misleads)."""
    if not failed:
        return " (done)"
    return " (failed)" if failed >= done else " (done with failures)"


class PlainProgress:
    """One line per ``step`` of the total (default 10%) and a final line, for logs and pipes."""

    def __init__(self, stream: IO[str] | None = None, step: float = 0.1) -> None:
        self.stream = stream
        self.step = step

    @contextmanager
    def task(self, label: str, total: int | None = None, unit: str = "items") -> Iterator[Task]:
        task = _PlainTask(label, total, unit, self.stream or sys.stderr, self.step)
        try:
            yield task
        except BaseException:
            task.finish(aborted=True)
            raise
        task.finish()


class _RichTask:
    def __init__(self, bar: Any, task_id: Any) -> None:
        self.bar, self.task_id = bar, task_id
        self.failed = 0

    def advance(self, n: int = 1, failed: int = 0) -> None:
        self.failed += failed
        self.bar.advance(self.task_id, n)

    def set_total(self, total: int | None) -> None:
        self.bar.update(self.task_id, total=total)


class RichProgress:
    """A rich progress bar on stderr with counts, rate and ETA (transient: gone once the task ends)."""

    @contextmanager
    def task(self, label: str, total: int | None = None, unit: str = "items") -> Iterator[Task]:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            TaskProgressColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
        from rich.progress import Progress as Bar

        bar = Bar(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn(unit),
                  TaskProgressColumn(), TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                  transient=True, console=Console(stderr=True))
        task_id = bar.add_task(label, total=total)
        with bar:
            task = _RichTask(bar, task_id)
            try:
                yield task
            except BaseException:  # the transient bar vanishes: say where the task stopped
                bar.console.print(f"{self._shown(bar, label, unit)} (aborted)")
                raise
            if task.failed:  # the bar vanishes: a task whose items failed must not look done
                bar.console.print(f"{self._shown(bar, label, unit)}, {task.failed} failed"
                                  f"{_ending(int(bar.tasks[0].completed), task.failed)}")

    @staticmethod
    def _shown(bar: Any, label: str, unit: str) -> str:
        done, total = bar.tasks[0].completed, bar.tasks[0].total
        return f"{label}: {done:.0f}/{total:.0f} {unit}" if total else f"{label}: {done:.0f} {unit}"


def progress_for(as_json: bool = False, stream: IO[str] | None = None) -> Progress:
    """The display for a command: none with ``--json``, a bar on a terminal, plain lines otherwise."""
    if as_json:
        return NoProgress()
    out = stream or sys.stderr
    if out.isatty():
        return RichProgress()
    return PlainProgress(out)

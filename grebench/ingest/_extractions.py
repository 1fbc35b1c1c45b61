"""The ingest stage's PDF extractions, in source order: here, one at a time (``executor = local``), or as Ray tasks
on the cluster's CPUs (``executor = ray``), several in flight while the source is read on.

Either way each extraction is :func:`grebench.ingest._pdf.extract_pdf` (a limited PyMuPDF subprocess, on whichever
machine runs it) and the store is written by the ingest loop alone, in the order the source gave the papers: Ray
only moves the CPU work.  The PDF is downloaded here (the source's loader holds the connection and its limits) and
its bytes travel to the task through Ray's object store, so a worker needs no access to the source; a task that
dies with its worker is retried by Ray (``max_retries``), and a paper whose extraction is lost with the driver is
extracted again by the next run (nothing is written before its result is in).
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from grebench.settings import LimitSettings, RunSettings
from grebench.store import PaperRecord, PdfExtraction

#: Extractions in flight per CPU of the Ray cluster (one running, one waiting: a worker never idles on the driver).
IN_FLIGHT_PER_CPU = 2
#: Times Ray runs an extraction again whose worker died.
TASK_RETRIES = 2


def extract_task(data: bytes, timeout_s: float, memory_mb: int, max_bytes: int) -> PdfExtraction:
    """One PDF's extraction, as a Ray task runs it (on any node of the cluster)."""
    from grebench.ingest._pdf import extract_pdf

    return extract_pdf(data, timeout_s=timeout_s, memory_mb=memory_mb, max_bytes=max_bytes)


@dataclass
class _Pending:
    paper: PaperRecord
    ref: Any = None  # the Ray task's object ref
    result: PdfExtraction | None = None
    sha256: str | None = None


class PdfExtractions:
    """Submit each paper of the source in order; :meth:`ready` gives (paper, extraction or None) back in the same
    order as soon as the front ones are done, :meth:`drain` all that are left.  A context manager: a Ray it started
    is stopped at the end."""

    def __init__(self, limits: LimitSettings, run: RunSettings) -> None:
        self.limits = limits
        self.executor = run.executor
        self.address = run.ray_address
        self.pending: deque[_Pending] = deque()
        self._ray: Any = None
        self._remote: Any = None
        self._started = False
        self.window = 1

    def __enter__(self) -> PdfExtractions:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _start(self) -> Any:
        """Ray, joined or started on the first PDF (an ingest with nothing to extract starts none)."""
        if self._ray is None:
            from grebench.cluster import ray_module, start_ray

            self._ray = ray_module()
            self._started = start_ray(self.address)
            cpus = int(self._ray.cluster_resources().get("CPU", 1))
            self.window = max(1, IN_FLIGHT_PER_CPU * cpus)
            self._remote = self._ray.remote(num_cpus=1, max_retries=TASK_RETRIES)(extract_task)
        return self._ray

    def close(self) -> None:
        """Stop a Ray this object started (tasks still running are dropped: their papers were not written)."""
        if self._ray is not None and self._started:
            self._ray.shutdown()
        self._ray, self._started = None, False

    def submit(self, paper: PaperRecord, done: set[tuple[str, str]]) -> None:
        """Queue ``paper``; its PDF is extracted unless it has none or this exact PDF was done before (``done``:
        (paper id, PDF ref) pairs, to which it is added once extracted or sent to extract)."""
        entry = _Pending(paper)
        self.pending.append(entry)
        if paper.pdf_loader is None or paper.pdf_ref is None or (paper.paper_id, paper.pdf_ref) in done:
            return
        try:
            data = paper.pdf_loader()
        except Exception as exc:  # a download failure must not stop the ingest; retried next run
            entry.result = {"error": f"PDF download failed: {exc}", "transient": True}
            return
        done.add((paper.paper_id, paper.pdf_ref))
        entry.sha256 = hashlib.sha256(data).hexdigest()
        limits = self.limits
        if self.executor != "ray":
            entry.result = extract_task(data, limits.pdf_timeout_s, limits.pdf_memory_mb, limits.pdf_max_bytes)
            return
        self._start()
        entry.ref = self._remote.remote(data, limits.pdf_timeout_s, limits.pdf_memory_mb, limits.pdf_max_bytes)

    def _take(self, entry: _Pending) -> tuple[PaperRecord, PdfExtraction | None]:
        result = entry.result
        if entry.ref is not None:
            result = self._ray.get(entry.ref)
        if result is not None and entry.sha256 is not None:
            result["pdf_sha256"] = entry.sha256
        return entry.paper, result

    def ready(self) -> Iterator[tuple[PaperRecord, PdfExtraction | None]]:
        """The front papers whose extraction is done (or that need none), in source order; waits for the front one
        while more than the window is in flight."""
        while self.pending:
            front = self.pending[0]
            if front.ref is not None and len(self.pending) <= self.window:
                done, _ = self._ray.wait([front.ref], timeout=0)
                if not done:
                    return
            self.pending.popleft()
            yield self._take(front)

    def drain(self) -> Iterator[tuple[PaperRecord, PdfExtraction | None]]:
        """Every paper still queued, in order, waiting for their extractions."""
        while self.pending:
            yield self._take(self.pending.popleft())

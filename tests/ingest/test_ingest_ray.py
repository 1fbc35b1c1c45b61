"""``executor = ray`` for the ingest stage (issue 61): PDFs are extracted as Ray tasks on a local Ray of two CPUs,
and the store ends up exactly as an ingest in this process leaves it (texts, failures, order); a download that
fails is retried next run in both, and a rerun extracts nothing again."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from grebench.ingest import run_ingest
from grebench.ingest._source import SourceFailure
from grebench.settings import Settings, load_settings
from grebench.store import PaperRecord, ReviewRecord, Store, open_store
from tests.conftest import FAST_ENV
from tests.ingest.pdf_factory import hidden_text_pdf

ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install -e '.[hf,ray]')")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def _pdf(text: str, pages: int = 1) -> bytes:
    import pymupdf

    doc = pymupdf.open()
    for p in range(pages):
        page = doc.new_page()
        for line in range(12):
            page.insert_text((72, 72 + 16 * line), f"{text} Page {p + 1}, line {line + 1} of the argument.",
                             fontsize=11)
    return doc.tobytes()


class ListSource:
    """Papers from a list, each PDF loaded on demand (a loader that raises: a failed download)."""

    name = "list"

    def __init__(self, pdfs: dict[str, bytes | Exception]) -> None:
        self.pdfs = pdfs
        self.loaded: list[str] = []

    def _loader(self, pid: str) -> Any:
        def load() -> bytes:
            self.loaded.append(pid)
            got = self.pdfs[pid]
            if isinstance(got, Exception):
                raise got
            return got

        return load

    def fetch(self, since: datetime | None = None, limit: int | None = None) -> Iterator[PaperRecord | SourceFailure]:
        for pid in self.pdfs:
            review = ReviewRecord(review_id=f"{pid}-r1", paper_id=pid, kind=ReviewRecord.OFFICIAL,
                                  text=f"A review of {pid}.", sections=[], content={})
            yield PaperRecord(paper_id=pid, venue_id="Test.cc/2026/Conference", title=f"Paper {pid}", source="list",
                              abstract=f"The abstract of {pid}.", reviews=[review], pdf_ref=f"sha-{pid}",
                              pdf_loader=self._loader(pid))


@functools.cache
def _made() -> dict[str, bytes | Exception]:
    """The PDFs, made once (a PDF's bytes carry its creation time), so both executors read the same bytes."""
    pdfs: dict[str, bytes | Exception] = {f"p{i:02d}": _pdf(f"Paper number {i} studies pruning.", pages=1 + i % 3)
                                          for i in range(10)}
    pdfs["p90-hidden"] = hidden_text_pdf()
    pdfs["p91-corrupt"] = b"%PDF-1.4\n" + os.urandom(3000)
    pdfs["p92-offline"] = OSError("connection reset")
    return pdfs


def _pdfs() -> dict[str, bytes | Exception]:
    return dict(_made())


def _ingest(settings: Settings, source: ListSource, store: Store, run: str) -> Any:
    return run_ingest(source, store, settings, run)


TEXTS = ("SELECT paper_id, pdf_ref, pdf_sha256, pages, text, hidden_json, flags_json, status, error FROM paper_texts "
         "ORDER BY paper_id")


def test_pdfs_extracted_on_ray_tasks_give_the_in_process_store(ray_cluster: None, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    import grebench.ingest._extractions as extractions

    ran_in: list[int] = []
    marker = tmp_path / "pids"
    marker.mkdir()
    original = extractions.extract_task

    def recorded(*args: Any) -> Any:  # pickled by value: it runs in the Ray worker, which writes its pid down
        (marker / str(os.getpid())).touch()
        return original(*args)

    outcomes: dict[str, Any] = {}
    texts: dict[str, list[Any]] = {}
    for executor in ("local", "ray"):
        if executor == "ray":
            monkeypatch.setattr(extractions, "extract_task", recorded)
        settings = load_settings(env={**FAST_ENV, "GREBENCH_DATA_DIR": str(tmp_path / executor),
                                      "GREBENCH_EXECUTOR": executor})
        store = open_store(None)
        source = ListSource(_pdfs())
        first = _ingest(settings, source, store, "run1")
        second = _ingest(settings, ListSource(_pdfs()), store, "run2")
        outcomes[executor] = (first.pdfs_extracted, sorted(f["item"] for f in first.failures), first.papers_added,
                              second.pdfs_extracted, sorted(f["item"] for f in second.failures))
        texts[executor] = store.rows(TEXTS)
        store.con.close()
    ran_in = [int(p.name) for p in marker.iterdir()]
    assert ran_in and os.getpid() not in ran_in  # extracted in Ray's worker processes, not here
    assert outcomes["ray"] == outcomes["local"]
    assert outcomes["local"][:3] == (11, ["p91-corrupt (pdf)", "p92-offline (pdf)"], 13)
    # the rerun extracts nothing again; the failed download is tried again (and fails again)
    assert outcomes["local"][3:] == (0, ["p92-offline (pdf)"])
    assert texts["ray"] == texts["local"] and len(texts["local"]) == 12  # the corrupt PDF's failure is stored
    hidden = next(r for r in texts["ray"] if r["paper_id"] == "p90-hidden")
    assert "IGNORE ALL PREVIOUS" not in (hidden["text"] or "")


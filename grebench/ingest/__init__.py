"""Ingest: paper sources (bundled, archive, OpenReview), PDF text, idempotent upserts.

The public names are loaded on first use (PEP 562), so that the PDF worker process, which imports
``grebench.ingest._pdf_worker`` under a tight address-space limit, does not pull in the store and DuckDB.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "IngestSummary": "grebench.ingest._run",
    "run_ingest": "grebench.ingest._run",
    "link_papers": "grebench.ingest._links",
    "find_links": "grebench.ingest._links",
    "PaperSource": "grebench.ingest._source",
    "SourceError": "grebench.ingest._source",
    "SourceFailure": "grebench.ingest._source",
    "resolve_source": "grebench.ingest._source",
    "source_spec": "grebench.ingest._source",
    "SOURCES": "grebench.ingest._source",
    "extract_pdf": "grebench.ingest._pdf",
    "bundled_path": "grebench.ingest._archive",
    "bundled_source": "grebench.ingest._archive",
    "BUNDLED": "grebench.ingest._archive",
    "SeasonSource": "grebench.ingest._season",
    "bundled_season_path": "grebench.ingest._season",
    "season_span": "grebench.ingest._season",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'grebench.ingest' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)

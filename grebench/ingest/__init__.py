"""Ingest: paper sources (bundled, archive, OpenReview), PDF text, idempotent upserts.

The public names are loaded on first use (PEP 562), so that the PDF worker process, which imports
``grebench.ingest._pdf_worker`` under a tight address-space limit, does not pull in the store and DuckDB.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what the checker sees of the names loaded on first use (their real types, not Any)
    from grebench.ingest._abstract_view import AbstractReader as AbstractReader
    from grebench.ingest._archive import BUNDLED as BUNDLED
    from grebench.ingest._archive import bundled_path as bundled_path
    from grebench.ingest._archive import bundled_source as bundled_source
    from grebench.ingest._links import LinkCounts as LinkCounts
    from grebench.ingest._links import find_links as find_links
    from grebench.ingest._links import link_papers as link_papers
    from grebench.ingest._links import near_papers as near_papers
    from grebench.ingest._pdf import extract_pdf as extract_pdf
    from grebench.ingest._run import IngestJson as IngestJson
    from grebench.ingest._run import IngestSummary as IngestSummary
    from grebench.ingest._run import run_ingest as run_ingest
    from grebench.ingest._season import SeasonSource as SeasonSource
    from grebench.ingest._season import bundled_season_path as bundled_season_path
    from grebench.ingest._season import season_span as season_span
    from grebench.ingest._similarity import PaperText as PaperText
    from grebench.ingest._source import SOURCES as SOURCES
    from grebench.ingest._source import PaperSource as PaperSource
    from grebench.ingest._source import SourceError as SourceError
    from grebench.ingest._source import SourceFailure as SourceFailure
    from grebench.ingest._source import resolve_source as resolve_source
    from grebench.ingest._source import source_spec as source_spec

_EXPORTS = {
    "IngestJson": "grebench.ingest._run",
    "IngestSummary": "grebench.ingest._run",
    "run_ingest": "grebench.ingest._run",
    "LinkCounts": "grebench.ingest._links",
    "AbstractReader": "grebench.ingest._abstract_view",
    "PaperText": "grebench.ingest._similarity",
    "link_papers": "grebench.ingest._links",
    "find_links": "grebench.ingest._links",
    "near_papers": "grebench.ingest._links",
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

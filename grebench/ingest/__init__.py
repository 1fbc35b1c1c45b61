"""Ingest: paper sources (bundled, archive, OpenReview), PDF text, idempotent upserts."""

from grebench.ingest._run import IngestSummary, run_ingest
from grebench.ingest._source import PaperSource, SourceError, SourceFailure, resolve_source

__all__ = ["IngestSummary", "PaperSource", "SourceError", "SourceFailure", "resolve_source", "run_ingest"]

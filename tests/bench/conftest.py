"""Bench fixtures: a benched copy of the bundled store, a tiny store for LLM runs, the fake server."""

from __future__ import annotations

import shutil
from datetime import datetime
from pathlib import Path
from typing import Iterator

import pytest

from grebench.bench import run_bench
from grebench.settings import Settings, load_settings
from grebench.store import PaperRecord, ReviewRecord, Store, open_store
from tests.conftest import FAST_ENV
from tests.llm.conftest import CANARY, KEY_ENV, canary_key, fake_llm, no_backoff, warm_litellm

__all__ = ["CANARY", "KEY_ENV", "canary_key", "fake_llm", "no_backoff", "warm_litellm"]


@pytest.fixture(scope="module")
def benched(bundled_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Store, dict]]:
    """The bundled store after one deterministic bench run (human + 5 controls), with its summary."""
    target = tmp_path_factory.mktemp("benched") / "grebench.duckdb"
    shutil.copy2(bundled_db, target)
    store = open_store(target)
    settings = load_settings(env={**FAST_ENV, "GREBENCH_DATA_DIR": str(target.parent)})
    run_id = store.start_run("bench", {})
    summary = run_bench(store, settings, run_id)
    yield store, summary
    store.con.close()


def _review(paper_id: str, i: int, text: str) -> ReviewRecord:
    return ReviewRecord(review_id=f"{paper_id}-r{i}", paper_id=paper_id, kind="official_review", text=text,
                        sections=[("Review", text)], content={"review": text})


# what each tiny paper is about: its reviews name it, so they carry information about the paper (a review made
# only of generic review words is dropped by the scoring preprocessor, rules-v5)
TOPICS = ("wavelet scattering transforms", "graph coarsening", "spectral pruning", "hyperbolic embeddings",
          "quantile regression forests")


def tiny_papers(public_at: datetime = datetime(2019, 11, 8)) -> list[PaperRecord]:
    """Four papers with three reviews each and one with only two (skipped)."""
    papers = []
    for n in range(5):
        pid = f"paper{n}"
        count = 3 if n < 4 else 2
        body = (f"Summary:\nPaper {n} studies {TOPICS[n]}. It is fine.\n\n"
                f"Weaknesses:\nPaper {n} lacks {TOPICS[n]} baselines.")
        reviews = [_review(pid, i, f"{body} Review {i} says more.") for i in range(count)]
        papers.append(PaperRecord(paper_id=pid, venue_id="Test.cc/2019/Conference", title=f"Title {n}",
                                  source="test", abstract=f"We study problem {n}. We find result {n}.",
                                  reviews_public_at=public_at, reviews=reviews))
    return papers


@pytest.fixture
def tiny_store() -> Iterator[Store]:
    """An in-memory store with :func:`tiny_papers`."""
    store = open_store(None)
    with store.transaction():
        for paper in tiny_papers():
            store.upsert_paper(paper)
    yield store
    store.con.close()


def with_candidates(settings: Settings, *candidates: dict, **values: object) -> Settings:
    """Settings with ``[[candidates]]`` tables and some values replaced."""
    base = settings.replace(**values) if values else settings
    return Settings(values=base.values, tables={"candidates": list(candidates)}, config_path=None)

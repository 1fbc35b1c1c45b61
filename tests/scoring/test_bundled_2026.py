"""The default bundled source is recent (ICLR 2026): a built-in model is ranked on papers it cannot have seen, and
the same model on ICLR 2020 is shown in the contaminated band (issue 20)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from grebench.ingest import resolve_source, run_ingest
from grebench.models import catalogue_entry
from grebench.pipeline._sample import _rating, draw_sample
from grebench.scoring import RULES_ID, is_contaminated_row, leaderboard
from grebench.settings import Settings
from grebench.store import Store, open_store
from tests.scoring.conftest import FakeEstimator, add_generation, seed_baseline
from tests.scoring.parts import score

RULES = RULES_ID
CUTOFF = catalogue_entry("smollm2-135m").cutoff.isoformat()  # 2024-10-31


def _store(settings: Settings, spec: str, limit: int) -> Store:
    store = open_store(None)
    run_ingest(resolve_source(spec, settings), store, settings, store.start_run("ingest", {}), limit=limit)
    return store


@pytest.fixture
def recent(settings: Settings) -> Iterator[Store]:
    store = _store(settings, "bundled", 8)
    yield store
    store.con.close()


def test_the_default_bundled_source_is_iclr_2026_with_its_review_form(recent: Store) -> None:
    [(venue, public)] = recent.con.execute("SELECT DISTINCT venue_id, reviews_public_at FROM papers").fetchall()
    assert venue == "ICLR.cc/2026/Conference" and public.date().isoformat() == "2025-11-12"
    rows = recent.rows("SELECT v.rating, v.text, v.sections_json FROM review_versions v")
    assert rows and {r["rating"] for r in rows} <= {"0", "2", "4", "6", "8", "10"}
    assert all(r["text"].startswith("Summary:") and "Weaknesses:" in r["text"] for r in rows)


def test_a_model_with_an_earlier_cutoff_is_ranked_on_iclr_2026_and_contaminated_on_iclr_2020(
        settings: Settings) -> None:
    boards = {}
    for spec in ("bundled", "bundled:iclr2020"):
        store = _store(settings, spec, 6)
        papers = seed_baseline(store)
        for k, pid in enumerate(papers):  # a plausible review: another paper's human review
            other = store.scalar("SELECT text FROM review_versions v JOIN reviews r USING (review_id) "
                                 "WHERE r.paper_id = ? LIMIT 1", [papers[(k + 1) % len(papers)]])
            add_generation(store, "smollm2-135m", pid, other, kind="llm", cutoff=CUTOFF)
        score(store, settings, None, ["gem-s"], "offline", "rules", estimator=FakeEstimator())
        boards[spec] = {r["candidate"]: r for r in leaderboard(store, "gem-s", "fake-lm", RULES, samples=100)}
        store.con.close()
    recent, old = boards["bundled"]["smollm2-135m"], boards["bundled:iclr2020"]["smollm2-135m"]
    assert recent["rank"] is not None and not is_contaminated_row(recent)
    assert recent["clean_papers"] == recent["papers"] > 0 and recent["contaminated_papers"] == 0
    # the default run's board under the coverage rule (issue 31): every row covers the sample, nothing unranked by it
    assert all(r["complete"] for r in boards["bundled"].values())
    assert (recent["due_papers"], recent["missing_papers"]) == (recent["papers"], 0)
    assert old["rank"] is None and is_contaminated_row(old) and old["clean_papers"] == 0


def test_the_sampler_strata_read_the_0_to_10_scale(settings: Settings) -> None:
    store = _store(settings, "bundled", 60)
    seed_baseline(store)
    sample = draw_sample(store, 12, settings.seed)
    assert sample.paper_ids is not None and sample.size == 12
    means = {r["paper_id"]: _rating(r["ratings"]) for r in store.rows(
        "SELECT r.paper_id, list(v.rating) AS ratings FROM reviews r JOIN review_versions v USING (review_id) "
        "GROUP BY r.paper_id")}
    chosen = sorted(means[p] or 0 for p in sample.paper_ids)
    everything = sorted(v or 0 for v in means.values())
    assert chosen[0] <= everything[len(everything) // 3] and chosen[-1] >= everything[2 * len(everything) // 3]
    store.con.close()

"""LLM generations the plain bench does not make: papers whose reviews are not public yet, and submitted models.

``run_bench`` iterates over human-baseline splits, so it skips a paper until it has three official reviews.  A
review written *before* the human reviews are public is the contamination-proof (sealed) kind, so the scheduler
generates for those papers itself, through the bench's own LLM loop: the generation ids are the same ones
``run_bench`` computes later, so it finds them done and makes no call again.  Submitted models live only in the
``candidates`` table (not in the settings), so they are built from stored rows here as well.
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from typing import Any, Iterator

from grebench.bench import _run as bench_run
from grebench.bench._baseline import Split, make_splits
from grebench.bench._contamination import is_clean
from grebench.bench._generations import load_papers, review_texts
from grebench.bench._registry import Candidate, load_candidates, sync_candidates
from grebench.settings import Settings
from grebench.store import Store, utcnow


def unreviewed_paper_ids(store: Store) -> list[str]:
    """Papers whose human reviews are not public yet (none visible, or a release date still ahead)."""
    return [r["paper_id"] for r in store.rows(
        "SELECT p.paper_id FROM papers p WHERE NOT p.withdrawn AND (p.reviews_public_at IS NULL "
        "OR p.reviews_public_at > ?) AND NOT EXISTS (SELECT 1 FROM reviews r WHERE r.paper_id = p.paper_id "
        "AND r.kind = 'official_review') ORDER BY p.paper_id", [utcnow()])]


def reseal(store: Store) -> int:
    """Mark generations sealed once their paper's reviews-public date is known and later than the generation.

    A generation made while the paper had no public reviews is written unsealed (the date was unknown); the rule
    is the bench's own (:func:`grebench.bench.is_sealed`), applied again when ingest learns the date.
    """
    before = store.scalar("SELECT count(*) FROM generations WHERE sealed")
    store.con.execute("UPDATE generations SET sealed = true FROM papers p WHERE p.paper_id = generations.paper_id "
                      "AND NOT generations.sealed AND p.reviews_public_at IS NOT NULL "
                      "AND generations.generated_at < p.reviews_public_at")
    return int(store.scalar("SELECT count(*) FROM generations WHERE sealed") - before)


def stored_candidate(row: dict[str, Any], api_key_env: str | None = None) -> Candidate:
    """A ``candidates`` row (a submitted model) as a bench candidate."""
    return Candidate(name=row["name"], kind="llm", model=row["model"], api_base=row["api_base"],
                     api_key_env=api_key_env or row["api_key_env"], released=row["released"], cutoff=row["cutoff"],
                     family=row["family"], description=row["description"], submitter=row["submitter"],
                     params=json.loads(row["params_json"] or "{}"))


def generate(store: Store, settings: Settings, run_id: str, candidates: list[Candidate], paper_ids: list[str],
             clean_only: bool = False) -> dict[str, Any]:
    """Generate the missing LLM reviews of ``candidates`` for ``paper_ids`` (cached ones make no call).

    ``clean_only`` leaves out pairs the candidate may have seen reviewed (cutoff on or after the release).
    """
    papers = load_papers(store)
    splits = {s.paper_id: s for s in make_splits(store, settings.seed)[0]}
    tally = bench_run._Tally()
    texts = review_texts(store, [s.candidate_review_id for s in splits.values()])
    for c in candidates:
        wanted = [p for p in paper_ids if p in papers
                  and (not clean_only or is_clean(c.cutoff, papers[p][1]))]
        # a paper without a split only needs its id: LLM candidates read the paper, not a human review
        rows = [splits.get(p) or Split(p, "", ()) for p in wanted]
        if rows:
            bench_run._run_llm(store, settings, run_id, [c], rows, papers, texts, tally, lambda _item: None)
    store.checkpoint()
    return {"calls_made": tally.calls_made, "cached": tally.cached, "failed": tally.failed,
            "gave_up": tally.gave_up, "tokens_in": tally.tokens_in, "tokens_out": tally.tokens_out,
            "cost_usd": round(tally.cost_usd, 6)}


def generate_unreviewed(store: Store, settings: Settings, run_id: str) -> dict[str, Any]:
    """Sealed generations: every configured LLM candidate on every paper whose reviews are not public yet.

    Submitted models are evaluated by the queue job while their key is at hand, not here.
    """
    configured = load_candidates(settings)
    sync_candidates(store, configured)
    llm = [c for c in configured if c.kind == "llm" and c.needs_llm]
    papers = unreviewed_paper_ids(store)
    summary = generate(store, settings, run_id, llm, papers)
    summary.update(papers=len(papers), candidates=[c.name for c in llm])
    return summary


@contextmanager
def key_in_env(sub_id: str, key: str | None) -> Iterator[str | None]:
    """A submitted key in a process-only environment variable for the duration of one evaluation.

    The LLM client reads keys from the variable a candidate names; the variable is removed afterwards and its
    name (never the key) is all that reaches the request cache.
    """
    if not key:
        yield None
        return
    name = f"GREBENCH_SUBMISSION_KEY_{sub_id.upper()}"
    os.environ[name] = key
    try:
        yield name
    finally:
        os.environ.pop(name, None)

"""Papers the plain bench does not reach yet, and submitted models as bench candidates.

``run_bench`` iterates over human-baseline splits, so it skips a paper until it has three official reviews.  A
review written *before* the human reviews are public is the contamination-proof (sealed) kind, so the scheduler
generates for those papers through :func:`grebench.bench.generate_for`, the bench's own LLM loop: the generation
ids are the ones ``run_bench`` computes later, so it finds them done and makes no call again.  Submitted models
live only in the ``candidates`` table (not in the settings), so they are built from stored rows here.
"""

from __future__ import annotations

import json
from typing import Any

from grebench.bench._registry import (
    BASELINE,
    CONTESTANT,
    ENDPOINT_KIND,
    REFERENCE,
    Candidate,
    kind_info,
    kinds_with_role,
    load_candidates,
    sync_candidates,
)
from grebench.bench._run import generate_for
from grebench.settings import Settings
from grebench.store import PUBLIC_SINCE_VIEW, ReviewRecord, Store, utcnow


def unreviewed_paper_ids(store: Store) -> list[str]:
    """Papers whose human reviews are not public yet (none visible, or a release date still ahead), nor those of any
    linked version of the same work."""
    return [r["paper_id"] for r in store.rows(
        f"SELECT p.paper_id FROM papers p JOIN {PUBLIC_SINCE_VIEW} ps ON ps.paper_id = p.paper_id "
        "WHERE NOT p.withdrawn AND (ps.public_since IS NULL "
        "OR ps.public_since > ?) AND NOT EXISTS (SELECT 1 FROM reviews r WHERE r.paper_id = p.paper_id "
        f"AND r.kind = '{ReviewRecord.OFFICIAL}') ORDER BY p.paper_id", [utcnow()])]


def reseal(store: Store) -> int:
    """Mark generations sealed once their paper's reviews-public date is known and later than the generation.

    A generation made while the paper had no public reviews is written unsealed (the date was unknown); the rule
    is the bench's own (:func:`grebench.bench.is_sealed`), applied again when ingest learns the date.  The human
    baseline and the controls are built from the human reviews, so they are never sealed; nor is a generation whose
    time is not that of a call made for its candidate (``call_owner = "unproved"``, migration m0018), nor one the
    near-paper copy check found carrying another paper's public reviews (``near_copy``,
    :func:`grebench.submissions.unseal_near_copies`).
    """
    before = store.scalar("SELECT count(*) FROM generations WHERE sealed")
    store.con.execute(f"UPDATE generations SET sealed = true FROM {PUBLIC_SINCE_VIEW} p "
                      "WHERE p.paper_id = generations.paper_id "
                      "AND NOT generations.sealed AND p.public_since IS NOT NULL "
                      "AND generations.generated_at < p.public_since "
                      # a generation whose call was not proved to be its own (migration m0018) stays unsealed
                      "AND coalesce(json_extract_string(generations.flags_json, '$.call_owner'), '') <> 'unproved' "
                      # nor one read as written with another paper's public reviews in view (issue 62)
                      "AND json_extract(generations.flags_json, '$.near_copy') IS NULL "
                      "AND generations.candidate NOT IN "
                      "(SELECT name FROM candidates WHERE kind IN (SELECT unnest(?::VARCHAR[])))",
                      [kinds_with_role(BASELINE, REFERENCE)])
    return int(store.scalar("SELECT count(*) FROM generations WHERE sealed") - before)


def stored_candidate(row: dict[str, Any], api_key_env: str | None = None) -> Candidate:
    """A ``candidates`` row (a submitted model) as a bench candidate."""
    return Candidate(name=row["name"], kind=row.get("kind") or ENDPOINT_KIND, model=row["model"],
                     api_base=row["api_base"], api_key_env=api_key_env, released=row["released"], cutoff=row["cutoff"],
                     family=row["family"], description=row["description"], submitter=row["submitter"],
                     params=json.loads(row["params_json"] or "{}"), isolated=True,
                     cache_owner=f"candidate:{row['name']}")


def generate_unreviewed(store: Store, settings: Settings, run_id: str | None) -> dict[str, Any]:
    """Sealed generations: every configured LLM candidate on every paper whose reviews are not public yet.

    Submitted models are evaluated by the queue job while their key is at hand, not here.
    """
    configured = load_candidates(settings)
    sync_candidates(store, configured)
    llm = [c for c in configured if kind_info(c.kind).role == CONTESTANT and c.needs_llm]
    papers = unreviewed_paper_ids(store)
    return {**generate_for(store, settings, run_id, llm, papers), "papers": len(papers),
            "candidates": [c.name for c in llm]}

"""Scoring fixtures: a deterministic fake estimator and a store with a baseline split and a few candidates."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

import pytest

from grebench.scoring._request import LogprobRequest, LogprobResult
from grebench.store import Store, utcnow

GENERIC_REVIEW = (
    "Summary: The paper studies an interesting problem and proposes a method.\n"
    "Strengths: The paper is well written. The idea is novel.\n"
    "Weaknesses: The experiments are limited. The novelty is unclear.\n"
    "Questions: How does the method compare to prior work?"
)


class FakeEstimator:
    """A deterministic stand-in for an evaluation-LM that counts calls; rewards shared words with the target."""

    def __init__(self, id: str = "fake-lm") -> None:
        self.id = id
        self.calls = 0
        self.batches = 0
        self.requests: list[LogprobRequest] = []

    def logprobs(self, requests: Sequence[LogprobRequest]) -> list[LogprobResult]:
        self.batches += 1
        self.calls += len(requests)
        self.requests.extend(requests)
        out = []
        for req in requests:
            target = req.target.lower().split()
            context = set(f"{req.synopsis or ''} {req.first_review or ''}".lower().split())
            jitter = int(hashlib.sha256(req.target.encode()).hexdigest()[:4], 16) / 65536
            out.append(LogprobResult(-3.0 * len(target) + sum(1.0 for t in target if t in context) - jitter,
                                     len(target)))
        return out


def add_generation(store: Store, candidate: str, paper_id: str, text: str, source: str | None = None,
                   kind: str = "control", cutoff: str | None = None, sealed: bool = False) -> str:
    """Insert one ok generation (and its candidate row when missing)."""
    if not store.scalar("SELECT count(*) FROM candidates WHERE name = ?", [candidate]):
        store.con.execute(
            "INSERT INTO candidates (name, kind, cutoff, params_json, updated_at) VALUES (?, ?, ?, '{}', ?)",
            [candidate, kind, cutoff, utcnow()])
    gid = hashlib.sha256(f"{candidate}|{paper_id}|{text}".encode()).hexdigest()[:24]
    store.con.execute(
        """INSERT INTO generations (generation_id, candidate, paper_id, prompt_version, params_json, source_review_id,
           status, text, generated_at, sealed) VALUES (?, ?, ?, 'test', '{}', ?, 'ok', ?, ?, ?)""",
        [gid, candidate, paper_id, source, text, utcnow(), sealed])
    return gid


def seed_baseline(store: Store, max_papers: int | None = None) -> list[str]:
    """Baseline splits (first review by id plays the human) + human, generic and other-paper generations."""
    rows = store.rows("""SELECT r.paper_id, list(r.review_id ORDER BY r.review_id) AS ids FROM reviews r
                         WHERE r.kind = 'official_review' GROUP BY r.paper_id HAVING count(*) >= 3
                         ORDER BY r.paper_id""")
    if max_papers:
        rows = rows[:max_papers]
    texts = {r["review_id"]: r["text"] for r in store.rows(
        "SELECT v.review_id, v.text FROM review_versions v JOIN reviews r ON r.review_id = v.review_id "
        "AND r.latest_version = v.version")}
    papers = [r["paper_id"] for r in rows]
    for i, r in enumerate(rows):
        human, refs = r["ids"][0], r["ids"][1:3]
        store.con.execute("INSERT INTO baseline_splits VALUES (?, ?, ?, 1, ?)",
                          [r["paper_id"], human, json.dumps(refs), utcnow()])
        add_generation(store, "human", r["paper_id"], texts[human], human, kind="human")
        add_generation(store, "generic", r["paper_id"], GENERIC_REVIEW)
        other = rows[(i + 1) % len(rows)]["ids"][0]
        add_generation(store, "other-paper", r["paper_id"], texts[other], other)
    return papers


@pytest.fixture
def fake_estimator() -> FakeEstimator:
    """A fresh fake estimator."""
    return FakeEstimator()

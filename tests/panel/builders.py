"""Small hand-made venues for panel tests (rows written straight into an in-memory store)."""

from __future__ import annotations

import json
from typing import Any

from grebench.store import Store, utcnow

VENUE = "Test.cc/2024/Conference"
TOPICS = [
    ("Sparse attention for long documents", "We propose sparse attention kernels that scale transformers to long "
     "documents with linear memory, evaluated on summarization benchmarks."),
    ("Graph neural networks for molecules", "We introduce an equivariant graph network that predicts molecular "
     "energies, improving accuracy on quantum chemistry datasets."),
    ("Offline reinforcement learning with priors", "We regularise offline reinforcement learning with behaviour "
     "priors, improving returns on locomotion benchmarks."),
    ("Diffusion models for audio", "We adapt diffusion models to raw audio waveforms, achieving high fidelity speech "
     "synthesis with fewer sampling steps."),
]


#: run_panel's inputs on a store nothing was scored in: no setup, no gem metric, every paper, no local judge.
UNSCORED: dict[str, Any] = {"setup": None, "metric": None, "paper_ids": None, "local_judges": ()}

def review_text(title: str, abstract: str, extra: int = 0, tag: str = "") -> str:
    """A review that talks about the paper's own terms; ``extra`` adds generic sentences."""
    words = " ".join(abstract.split()[:12])
    body = (f"Summary: the paper studies {title.lower()}. {words}.\nStrengths: the {title.split()[0].lower()} idea "
            f"is clearly motivated.\nWeaknesses: experiments on {title.split()[-1].lower()} are limited.{tag}\n")
    return body + " The writing could be improved." * extra


def build_venue(store: Store, llm_candidates: dict[str, str | None] | None = None, venue: str = VENUE,
                topics: list[tuple[str, str]] | None = None, prefix: str = "paper") -> dict[str, Any]:
    """Four papers (``topics``: one per (title, abstract)), three human reviews each, a baseline split, and
    generations for human, generic, other-paper and the given LLM candidates (name -> family), in ``venue``; paper
    ids are ``prefix`` + a number (another venue in the same store takes another prefix).  Returns ids for
    assertions."""
    now = utcnow()
    llm_candidates = llm_candidates or {}
    ids: dict[str, Any] = {"papers": [], "generations": {}}
    cands = {"human": ("human", None), "generic": ("control", None), "other-paper": ("control", None)}
    cands.update({name: ("llm", fam) for name, fam in llm_candidates.items()})
    known = {r[0] for r in store.con.execute("SELECT name FROM candidates").fetchall()}
    for name, (kind, family) in cands.items():
        if name in known:  # written with another venue
            continue
        store.con.execute("INSERT INTO candidates (name, kind, family, params_json, updated_at) VALUES (?, ?, ?, ?, ?)",
                          [name, kind, family, "{}", now])
    topics = topics or TOPICS
    for i, (title, abstract) in enumerate(topics):
        pid = f"{prefix}{i}"
        ids["papers"].append(pid)
        store.con.execute("INSERT INTO papers (paper_id, venue_id, title, abstract, source, content_sha256, "
                          "ingested_at, updated_at) VALUES (?, ?, ?, ?, 'test', 'x', ?, ?)",
                          [pid, venue, title, abstract, now, now])
        rids = []
        for k in range(3):
            rid = f"{pid}-r{k}"
            rids.append(rid)
            text = review_text(title, abstract, extra=3 * k, tag=f" Reviewer {k}.")
            store.con.execute("INSERT INTO reviews VALUES (?, ?, 'official_review', NULL, NULL, ?, 1)", [rid, pid, now])
            store.con.execute("INSERT INTO review_versions (review_id, version, content_sha256, rating, text, "
                              "sections_json, content_json, fetched_at) VALUES (?, 1, 'x', ?, ?, '[]', '{}', ?)",
                              [rid, f"{3 + 2 * k}: rating", text, now])
        store.con.execute("INSERT INTO baseline_splits VALUES (?, ?, ?, 1, ?)",
                          [pid, rids[0], json.dumps(rids[1:]), now])
        other_title, other_abstract = topics[(i + 1) % len(topics)]
        texts = {"human": review_text(title, abstract, tag=" Reviewer 0."),
                 "generic": "Summary: the paper is interesting.\nStrengths: well written.\nWeaknesses: more "
                            "experiments are needed.",
                 "other-paper": review_text(other_title, other_abstract, tag=" Reviewer 0.")}
        for name in llm_candidates:
            texts[name] = review_text(title, abstract, extra=1, tag=f" Written by {name}.")
        for name, text in texts.items():
            gid = f"{name}-{pid}"
            ids["generations"][(name, pid)] = gid
            store.con.execute("INSERT INTO generations (generation_id, candidate, paper_id, prompt_version, "
                              "params_json, source_review_id, status, text, generated_at) "
                              "VALUES (?, ?, ?, 'v', '{}', ?, 'ok', ?, ?)",
                              [gid, name, pid, rids[0] if name == "human" else None, text, now])
    return ids

"""A small season for replay tests, made from the bundled ICLR 2026 sample, and what its records imply day by day."""

from __future__ import annotations

import copy
import json
from datetime import datetime
from pathlib import Path
from typing import Any

from grebench.ingest import bundled_path

DAYS = [datetime(2025, 11, d) for d in range(1, 6)]
# paper index -> (posted, reviews public): two papers appear after the first reviews, three papers' reviews later
POSTED = ["2025-11-01", "2025-11-01", "2025-11-01", "2025-11-01", "2025-11-03", "2025-11-03"]
PUBLIC = ["2025-11-02", "2025-11-02", "2025-11-02", "2025-11-04", "2025-11-04", "2025-11-04"]
EDITED_ON, LATE_ON = "2025-11-03", "2025-11-05"  # paper 0's first review is edited; paper 3's last review is late


def write_season(path: Path) -> list[dict[str, Any]]:
    """Six real papers (every tenth of the bundled ICLR 2026 sample, as the shipped season's first six were before it
    took the real edits) with made-up dates: an edit on 11-03 and a late review on 11-05; the records written."""
    lines = bundled_path("iclr2026").read_text(encoding="utf-8").split("\n")  # texts hold U+2028: no splitlines()
    meta = {"_meta": {"venue_id": "ICLR.cc/2026/Conference", "venue": "ICLR 2026"}}
    papers = [json.loads(line) for line in lines[:60:10]]
    for i, paper in enumerate(papers):
        paper["submitted_at"], paper["reviews_public_at"] = POSTED[i], PUBLIC[i]
        for review in paper["reviews"]:
            review["modified_at"] = PUBLIC[i]
    edited = papers[0]["reviews"][0]
    first = copy.deepcopy(edited["content"])
    first["summary"] = {"value": "An earlier summary of the paper, before the discussion: " +
                        str(first["summary"]["value"])[:200]}
    edited["history"] = [{"modified_at": PUBLIC[0], "content": first}]
    edited["modified_at"] = EDITED_ON
    papers[3]["reviews"][-1]["visible_at"] = LATE_ON
    path.write_text("\n".join(json.dumps(x) for x in [meta, *papers]) + "\n", encoding="utf-8")
    return papers


def implied(papers: list[dict[str, Any]], day: datetime) -> dict[str, int]:
    """What the records say the store holds on ``day``: papers posted, papers scoreable (3 official reviews public),
    review versions (each public review, plus each of its edits made by then), sealed generations (one LLM candidate:
    one per paper posted while its reviews were hidden, made on its first replayed day)."""
    iso = day.date().isoformat()
    posted = [p for p in papers if p["submitted_at"] <= iso]
    public = {p["id"]: [r for r in p["reviews"] if r.get("visible_at", p["reviews_public_at"]) <= iso]
              for p in posted}
    versions = sum(1 + (1 if r.get("history") and r["modified_at"] <= iso else 0)  # the edit, once it was made
                   for rs in public.values() for r in rs)
    return {"papers": len(posted), "papers_scoreable": sum(1 for rs in public.values() if len(rs) >= 3),
            "review_versions": versions,
            "sealed_generations": sum(1 for p in posted if p["submitted_at"] < p["reviews_public_at"])}

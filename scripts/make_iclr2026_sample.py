"""Build grebench/ingest/data/iclr2026_reviews.jsonl from a local clone of imczxx/ICLR2026ReviewTracker.

Usage: python scripts/make_iclr2026_sample.py GIT_DIR [--commit SHA] [--papers 300] [--seed 20251112] [--out PATH]

GIT_DIR is the repository's git directory (a bare clone is enough: files are read with ``git cat-file``).  Each
``docs/data/papers/{forum_id}.json`` holds one submission with the raw OpenReview API v2 notes of its replies.  Kept:
non-withdrawn papers with a title, an abstract and at least three official reviews (replies whose invitation ends
in ``/-/Official_Review``; of several stored versions of one review id, the one with the latest ``tmdate``).  The
sample is seeded and stratified by the mean review rating (quintiles, proportional allocation, largest remainders
first), so the bundled sample keeps the spread of paper quality.  Output: the project's archive format
(docs/archive-format.md), API v2 ``{"value": ...}`` content of the review form's fields only, with
``reviews_public_at`` 2025-11-12 (the day ICLR 2026 reviews became public) and each review's licence.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
from pathlib import Path
from typing import Any

COMMIT = "8dc6f4d36a3417acdbe26b7fc391511f47bf4aa9"
PUBLIC_AT = "2025-11-12"
FORM = ("summary", "soundness", "presentation", "contribution", "strengths", "weaknesses", "questions", "rating",
        "confidence")


def read_papers(git_dir: str, commit: str, ids: list[str] | None = None) -> list[dict[str, Any]]:
    """Every paper file at ``commit`` (or those of the forum ``ids``), parsed (one ``git cat-file --batch``
    process)."""
    names = [f"docs/data/papers/{i}.json" for i in ids] if ids is not None else subprocess.run(
        ["git", f"--git-dir={git_dir}", "ls-tree", "--name-only", commit, "docs/data/papers/"],
        check=True, capture_output=True, text=True).stdout.split()
    batch = subprocess.run(["git", f"--git-dir={git_dir}", "cat-file", "--batch"],
                           input="".join(f"{commit}:{n}\n" for n in names).encode(), check=True,
                           capture_output=True).stdout
    papers, pos = [], 0
    for name in names:
        header_end = batch.index(b"\n", pos)
        if batch[pos:header_end].endswith(b" missing"):
            raise SystemExit(f"{git_dir}: no {name} at {commit} (is it a clone of ICLR2026ReviewTracker?)")
        size = int(batch[pos:header_end].split()[2])
        papers.append(json.loads(batch[header_end + 1:header_end + 1 + size]))
        pos = header_end + 1 + size + 1
    return papers


def _value(content: dict[str, Any], key: str) -> Any:
    raw = content.get(key)
    return raw.get("value") if isinstance(raw, dict) else raw


def official_reviews(paper: dict[str, Any]) -> list[dict[str, Any]]:
    """The latest version of each official review with text."""
    latest: dict[str, dict[str, Any]] = {}
    for note in paper.get("replies") or []:
        invitations = note.get("invitations") or [note.get("invitation") or ""]
        if not any(str(i).endswith("/-/Official_Review") for i in invitations):
            continue
        old = latest.get(note["id"])
        if old is None or (note.get("tmdate") or 0) > (old.get("tmdate") or 0):
            latest[note["id"]] = note
    return [n for n in latest.values()
            if any(isinstance(_value(n["content"], k), str) and _value(n["content"], k).strip()
                   for k in ("summary", "strengths", "weaknesses", "questions"))]


def record(paper: dict[str, Any], reviews: list[dict[str, Any]]) -> dict[str, Any]:
    """One archive line."""
    return {
        "id": paper["id"], "venue": "ICLR 2026", "venue_id": "ICLR.cc/2026/Conference",
        "title": _value(paper["content"], "title"), "abstract": _value(paper["content"], "abstract"),
        "withdrawn": False, "submitted_at": paper.get("cdate"), "reviews_public_at": PUBLIC_AT,
        "reviews": [{"id": n["id"], "forum": paper["id"], "kind": "official_review",
                     "signature": (n.get("signatures") or [None])[0], "modified_at": n.get("tmdate"),
                     "license": n.get("license"),
                     "content": {k: n["content"][k] for k in FORM if k in n["content"]}}
                    for n in sorted(reviews, key=lambda n: (n.get("cdate") or 0, n["id"]))],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("git_dir")
    parser.add_argument("--commit", default=COMMIT)
    parser.add_argument("--papers", type=int, default=300)
    parser.add_argument("--seed", type=int, default=20251112)
    parser.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "grebench/ingest/data"
                                             / "iclr2026_reviews.jsonl"))
    args = parser.parse_args()
    eligible = []
    for paper in read_papers(args.git_dir, args.commit):
        if paper.get("withdrawn") or not _value(paper["content"], "title") or not _value(paper["content"], "abstract"):
            continue
        reviews = official_reviews(paper)
        ratings = [float(r) for n in reviews if isinstance(r := _value(n["content"], "rating"), (int, float))]
        if len(reviews) >= 3 and ratings:
            eligible.append((sum(ratings) / len(ratings), paper["id"], paper, reviews))
    eligible.sort(key=lambda e: (e[0], e[1]))
    strata = [eligible[len(eligible) * q // 5:len(eligible) * (q + 1) // 5] for q in range(5)]
    quota = [args.papers * len(s) / len(eligible) for s in strata]
    take = [int(q) for q in quota]
    for q in sorted(range(5), key=lambda q: -(quota[q] - take[q]))[:args.papers - sum(take)]:
        take[q] += 1
    chosen = []
    for q, stratum in enumerate(strata):
        members = sorted(stratum, key=lambda e: e[1])
        random.Random(f"{args.seed}:{q}").shuffle(members)
        chosen += members[:take[q]]
    chosen.sort(key=lambda e: e[1])
    with open(args.out, "w", encoding="utf-8") as out:
        for _mean, _pid, paper, reviews in chosen:
            out.write(json.dumps(record(paper, reviews), ensure_ascii=False) + "\n")
    reviews_total = sum(len(e[3]) for e in chosen)
    print(json.dumps({"eligible": len(eligible), "papers": len(chosen), "reviews": reviews_total,
                      "strata_bounds": [round(s[0][0], 2) for s in strata] + [round(strata[-1][-1][0], 2)],
                      "out": args.out}))


if __name__ == "__main__":
    main()

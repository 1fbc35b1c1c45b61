"""Build the shipped replay season (``season:bundled``) from the bundled ICLR 2026 sample and the tracker's stored
review versions; deterministic, offline.

    python scripts/make_replay_season.py GIT_DIR [--commit SHA] [--papers 30] [--out PATH]

GIT_DIR is the git directory of a clone of ``imczxx/ICLR2026ReviewTracker`` (a bare clone is enough), the repository
the bundled sample ``grebench/ingest/data/iclr2026_reviews.jsonl`` was built from (scripts/make_iclr2026_sample.py);
nothing else is read.  Each ``docs/data/papers/{forum_id}.json`` there keeps every version of each reply the tracker
saw (its ``merge.py`` never drops one), each with OpenReview's ``cdate`` and ``tmdate``.

Papers: those of the sample with a real edit (a review whose review-form content changed after the release) or a
real late review (created after the release), then every tenth paper of the sample, up to ``--papers``; in the
sample's order.  Each paper as a season file (docs/replay.md): ``submitted_at`` = the note's ``cdate`` (kept from the
sample), ``reviews_public_at`` = 2025-11-12 (the release; the ``_meta`` line), each review's

- ``content`` / ``modified_at``: its latest version (the sample's text) and the ``tmdate`` of the first stored
  version showing that text;
- ``history``: its earlier stored versions whose review-form fields differ from the next one's, each with the
  ``tmdate`` of the first stored version showing it (versions that changed nothing in the form are one version);
- ``created_at``: the note's ``cdate``; ``visible_at``: the release day, or ``cdate`` when the review was written
  after it (posted public: a late review).

No text is changed; the latest version of every review must equal the sample's (else the build stops).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from make_iclr2026_sample import COMMIT, FORM, read_papers

DATA = Path(__file__).resolve().parent.parent / "grebench" / "ingest" / "data"
RELEASE = "2025-11-12"
RELEASE_MS = 1762905600000  # 2025-11-12T00:00:00Z: a review created later is a late one


def _form(note: dict[str, Any]) -> dict[str, Any]:
    return {k: note["content"][k] for k in FORM if k in note["content"]}


def _versions(paper_id: str, review: dict[str, Any], tracked: dict[str, Any]) -> list[dict[str, Any]]:
    """The review's stored versions, oldest first, one per distinct review-form content (dated by its first
    stored ``tmdate``), as ``{"modified_at", "content", "cdate"}``; the last must be the sample's."""
    notes = sorted((n for n in tracked["replies"] if n["id"] == review["id"]), key=lambda n: n["tmdate"])
    out: list[dict[str, Any]] = []
    for note in notes:
        if not out or _form(note) != out[-1]["content"]:
            out.append({"modified_at": note["tmdate"], "content": _form(note), "cdate": note["cdate"]})
    if not out or out[-1]["content"] != review["content"]:
        raise SystemExit(f"paper {paper_id}: review {review['id']}: the tracker's latest version is not the "
                         "sample's; build the season at the commit the sample came from (--commit)")
    return out


def season_record(paper: dict[str, Any], tracked: dict[str, Any]) -> dict[str, Any]:
    """One season line: the sample's record with each review's real versions and dates."""
    out = {k: v for k, v in paper.items() if k != "reviews_public_at"}  # the _meta line's
    reviews = []
    for review in paper["reviews"]:
        versions = _versions(paper["id"], review, tracked)
        created = versions[0]["cdate"]
        latest = {**review, "modified_at": versions[-1]["modified_at"], "created_at": created,
                  "visible_at": created if created > RELEASE_MS else RELEASE}
        if len(versions) > 1:
            latest["history"] = [{"modified_at": v["modified_at"], "content": v["content"]} for v in versions[:-1]]
        reviews.append(latest)
    out["reviews"] = reviews
    return out


def _eventful(record: dict[str, Any]) -> bool:
    """A paper with a real edit or a real late review."""
    return any(r.get("history") or r["visible_at"] != RELEASE for r in record["reviews"])


def build(git_dir: str, commit: str, n_papers: int) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The season's records (the sample's order) and their counts."""
    # split on newlines only: review texts hold U+2028, which splitlines() would split on
    lines = (DATA / "iclr2026_reviews.jsonl").read_text(encoding="utf-8").split("\n")
    sample = [json.loads(line) for line in lines if line.strip()]
    tracked = {p["id"]: p for p in read_papers(git_dir, commit, [p["id"] for p in sample])}
    records = [season_record(p, tracked[p["id"]]) for p in sample]
    chosen = {r["id"] for r in [r for r in records if _eventful(r)][:n_papers]}
    for record in records[::10]:
        if len(chosen) >= n_papers:
            break
        chosen.add(record["id"])
    season = [r for r in records if r["id"] in chosen]
    reviews = [r for p in season for r in p["reviews"]]
    counts = {"papers": len(season), "papers_with_events": sum(1 for p in season if _eventful(p)),
              "reviews": len(reviews), "reviews_with_edits": sum(1 for r in reviews if r.get("history")),
              "edits": sum(len(r.get("history", [])) for r in reviews),
              "late_reviews": sum(1 for r in reviews if r["visible_at"] != RELEASE)}
    return season, counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("git_dir", help="git directory of a clone of imczxx/ICLR2026ReviewTracker")
    parser.add_argument("--commit", default=COMMIT, help="the tracker's commit (default: the sample's)")
    parser.add_argument("--papers", type=int, default=30)
    parser.add_argument("--out", default=str(DATA / "iclr2026_season.jsonl"))
    args = parser.parse_args()
    try:
        season, counts = build(args.git_dir, args.commit, args.papers)
    except subprocess.CalledProcessError as exc:
        raise SystemExit(f"{args.git_dir}: git could not read commit {args.commit} there: "
                         f"{exc.stderr.decode(errors='replace').strip()}") from None
    meta = {"_meta": {"venue_id": "ICLR.cc/2026/Conference", "venue": "ICLR 2026", "reviews_public_at": RELEASE}}
    out = [json.dumps(meta)] + [json.dumps(p, ensure_ascii=False, sort_keys=True) for p in season]
    Path(args.out).write_text("\n".join(out) + "\n", encoding="utf-8")
    json.dump({**counts, "commit": args.commit, "out": args.out}, sys.stdout)
    print()


if __name__ == "__main__":
    main()

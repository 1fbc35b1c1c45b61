"""Resubmission links on the bundled samples: what ingest links, what a full comparison would, and the cost.

    python benchmarks/resubmission_links.py                 # the two bundled samples (700 papers)
    python benchmarks/resubmission_links.py --pad 20000     # plus 20,000 made-up papers: the time of one season

1. Both bundled samples (ICLR 2020, 400 papers; ICLR 2026, 300) and the built resubmission
   (``tests/data/archives/resubmission_iclr2026.jsonl``) are ingested into an in-memory store by the real ingest,
   which links new papers against every stored paper: every link is printed with both titles, to be read.
2. Every pair of the 700 sample papers is compared in full (no blocking): the highest title and abstract
   similarity of two different works, how many pairs each rule would link, and whether blocking missed any.
3. Simulated revisions of every sample paper (a resubmission as it is usually revised): the abstract's sentences
   with one dropped, one taken from another paper, and the order of two swapped; the title kept with a subtitle
   added, or replaced by another paper's title (retitled).  The share the rule links is its recall on such edits.
4. ``--pad N``: N made-up papers (titles and abstracts drawn from the samples' words, so they share words with
   the real ones at the samples' rates) are stored first, then the 300 ICLR 2026 papers are linked against all.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import re
import time
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

from grebench.ingest import bundled_path, link_papers, resolve_source, run_ingest
from grebench.ingest._links import (
    ABSTRACT_ALONE,
    ABSTRACT_SAME_TITLE,
    ABSTRACT_WITH_TITLE,
    TITLE_MIN,
    PaperText,
    _cosine,
    match,
)
from grebench.settings import load_settings
from grebench.store import open_store

ROOT = Path(__file__).resolve().parents[1]
RESUBMISSION = ROOT / "tests" / "data" / "archives" / "resubmission_iclr2026.jsonl"


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]


def full_comparison(papers: list[dict[str, Any]]) -> dict[str, Any]:
    """Every pair compared: the closest two different works, and the pairs the rule links."""
    from difflib import SequenceMatcher

    texts = [PaperText(p["id"], p["title"], p["abstract"]) for p in papers]
    best_abstract = best_title = (0.0, "", "")
    linked = []
    for a, b in itertools.combinations(texts, 2):
        abstract = _cosine(a.words or Counter(), b.words or Counter())
        matcher = SequenceMatcher(None, a.norm_title, b.norm_title, autojunk=False)
        title = matcher.ratio() if matcher.real_quick_ratio() >= 0.5 else 0.0
        if abstract > best_abstract[0]:
            best_abstract = (abstract, a.paper_id, b.paper_id)
        if title > best_title[0]:
            best_title = (title, a.paper_id, b.paper_id)
        if match(a, b):
            linked.append((a.paper_id, b.paper_id))
    return {"pairs": len(papers) * (len(papers) - 1) // 2, "linked": linked,
            "closest_abstracts": [round(best_abstract[0], 3), *best_abstract[1:]],
            "closest_titles": [round(best_title[0], 3), *best_title[1:]]}


def revision(paper: dict[str, Any], other: dict[str, Any], rng: random.Random, retitle: bool) -> PaperText:
    """A revised version of ``paper``: one sentence dropped, one of ``other``'s added, two swapped; a new title or a
    subtitle."""
    sentences = [x for x in re.split(r"(?<=[.!?])\s+", paper["abstract"] or "") if x]
    if len(sentences) > 2:
        sentences.pop(rng.randrange(len(sentences)))
        i = rng.randrange(len(sentences) - 1)
        sentences[i], sentences[i + 1] = sentences[i + 1], sentences[i]
    extra = [x for x in re.split(r"(?<=[.!?])\s+", other["abstract"] or "") if x]
    sentences.insert(rng.randrange(len(sentences) + 1), rng.choice(extra))
    title = other["title"] if retitle else paper["title"] + ": Revisited with New Experiments"
    return PaperText(paper["id"] + "-rev", title, " ".join(sentences))


def recall(papers: list[dict[str, Any]], seed: int = 11) -> dict[str, Any]:
    """Share of simulated revisions the rule links to their original, subtitled and retitled."""
    rng = random.Random(seed)
    out = {}
    for retitle in (False, True):
        hits = 0
        for paper in papers:
            other = rng.choice([p for p in papers if p["id"] != paper["id"]])
            original = PaperText(paper["id"], paper["title"], paper["abstract"])
            hits += match(original, revision(paper, other, rng, retitle)) is not None
        out["retitled" if retitle else "subtitled"] = f"{hits}/{len(papers)}"
    return out


def pad(store: Any, n: int, papers: list[dict[str, Any]], seed: int = 7) -> None:
    """n made-up papers, their words drawn from the samples' titles and abstracts."""
    rng = random.Random(seed)
    title_words = [w for p in papers for w in p["title"].split()]
    abstract_words = [w for p in papers for w in (p["abstract"] or "").split()]
    now = datetime(2024, 1, 1)
    rows = [[f"pad{i:06d}", "Pad.cc/2024/Conference", "Pad 2024", 2024,
             " ".join(rng.choices(title_words, k=rng.randint(5, 14))),
             " ".join(rng.choices(abstract_words, k=rng.randint(120, 260))), None, None, None, False, "pad", None,
             now, f"pad{i}", now, now] for i in range(n)]
    columns = ["paper_id", "venue_id", "venue", "venue_year", "title", "abstract", "authors", "keywords", "decision",
               "withdrawn", "source", "submitted_at", "reviews_public_at", "content_sha256", "ingested_at",
               "updated_at"]
    with store.transaction():
        store.insert_rows("papers", columns, rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pad", type=int, default=0, help="Made-up papers stored before the ICLR 2026 sample.")
    parser.add_argument("--no-full", action="store_true", help="Skip the all-pairs comparison (2-3 minutes).")
    args = parser.parse_args()
    samples = {name: _records(bundled_path(name)) for name in ("iclr2020", "iclr2026")}
    settings = load_settings(env={"GREBENCH_DATA_DIR": "/nonexistent"})
    store = open_store(None)
    out: dict[str, Any] = {"thresholds": {"title_min": TITLE_MIN, "abstract_with_title": ABSTRACT_WITH_TITLE,
                                          "abstract_same_title": ABSTRACT_SAME_TITLE,
                                          "abstract_alone": ABSTRACT_ALONE}}
    if args.pad:
        pad(store, args.pad, samples["iclr2020"] + samples["iclr2026"])
    timings = {}
    for spec in ("bundled:iclr2020", "bundled:iclr2026", f"archive:{RESUBMISSION}"):
        if args.pad and spec == "bundled:iclr2020":
            continue
        started = time.perf_counter()
        summary = run_ingest(resolve_source(spec, settings), store, settings, store.start_run("ingest", {}))
        timings[spec] = {"seconds": round(time.perf_counter() - started, 2), "links": summary.links}
    out["ingest"] = timings
    started = time.perf_counter()
    out["relink_all"] = link_papers(store)
    out["relink_all"]["seconds"] = round(time.perf_counter() - started, 2)
    out["papers_in_store"] = int(store.scalar("SELECT count(*) FROM papers"))
    links = store.rows("""SELECT l.method, l.title_similarity, l.abstract_similarity, a.paper_id AS a, a.venue AS
                                 a_venue, a.title AS a_title, b.paper_id AS b, b.venue AS b_venue, b.title AS b_title
                          FROM paper_links l JOIN papers a ON a.paper_id = l.paper_id
                          JOIN papers b ON b.paper_id = l.linked_id ORDER BY l.paper_id, l.linked_id""")
    out["links"] = links
    ids2026 = {p["id"] for p in samples["iclr2026"]}
    out["iclr2026_with_earlier_public_version"] = len({
        r["paper_id"] for r in store.rows("SELECT v.paper_id FROM paper_versions v JOIN papers q ON "
                                          "q.paper_id = v.version_id WHERE q.venue_id <> 'ICLR.cc/2026/Conference'")}
        & ids2026)
    out["recall_on_simulated_revisions"] = recall(samples["iclr2020"] + samples["iclr2026"])
    if not args.pad and not args.no_full:
        started = time.perf_counter()
        full = full_comparison(samples["iclr2020"] + samples["iclr2026"])
        full["seconds"] = round(time.perf_counter() - started, 1)
        found = {tuple(sorted((r["a"], r["b"]))) for r in links}
        full["missed_by_blocking"] = [p for p in full["linked"] if tuple(sorted(p)) not in found]
        out["full_comparison"] = full
    print(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()

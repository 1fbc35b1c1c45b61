"""Resubmission links on the bundled samples: what ingest links, what a full comparison would, and the cost.

    python benchmarks/resubmission_links.py                 # the two bundled samples (700 papers)
    python benchmarks/resubmission_links.py --pad 20000     # plus 20,000 made-up papers: the time of one season
    python benchmarks/resubmission_links.py --disguise      # only 5.: disguised resubmissions (issue 62)
    python benchmarks/resubmission_links.py --disguise --pad 2000   # ... linked against 2,000 more texts

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
5. ``--disguise`` (issue 62): disguised resubmissions, title and abstract rewritten strongly.
   * By their text: each staged PDF (``--pdfs``, default ``/work/shared/data/iclr2020/pdfs/papers``) is extracted
     by the product's PDF worker, then disguised three times (light / medium / heavy: title and abstract replaced by
     an ICLR 2026 sample paper's words shuffled; 10 / 20 / 30 % of the paragraphs dropped, 2 / 4 / 6 swapped,
     15 / 30 / 50 % of the sentences rewritten, a third of their words replaced and all shuffled, so they keep no
     shingle; 30 / 50 / 70 % of the captions rewritten; 10 / 20 / 30 % of the references dropped and 2 / 5 / 10
     of another paper's added; every paragraph wrapped again).  The texts of ``--parsed`` (the same papers extracted
     by another tool) are added as further versions.  Everything is stored with the 400 ICLR 2020 papers and linked
     by the real ``link_papers``: links and flags between versions of one work (found) and between different works
     (false).
   * By metadata: each ICLR 2020 paper disguised (title another paper's words shuffled; abstract another paper's
     words shuffled with a quarter of its own content words, cosine 0.1-0.4 to the original; authors kept, as a
     public earlier version shows them; keywords kept or replaced), assessed against its original; false links and
     flags on all 79,800 pairs of distinct ICLR 2020 papers.
6. ``--abstracts`` (issue 62 §3, second bullet): the 400 ICLR 2020 papers disguised by their title and abstract
   alone, without a PDF (``tests/fakes/abstracts.py``: every content word replaced by a synonym, a thesaurus else a
   distributional neighbour of the bundled abstracts; 30 % of the abstract's sentences dropped, the rest shuffled),
   stored as a venue of their own under review with both bundled samples, and linked by the real ``link_papers``
   without the LM view of the abstracts and again with it (``link_estimator``, default ``offline``): the disguises
   linked or flagged to their original, the flags between distinct papers (ICLR 2020 against ICLR 2026, the
   disguises against the other papers and each other), the venues' bars and the cost.
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

from grebench.ingest import bundled_path, extract_pdf, link_papers, resolve_source, run_ingest
from grebench.ingest._evidence import assess
from grebench.ingest._similarity import (
    ABSTRACT_ALONE,
    ABSTRACT_SAME_TITLE,
    ABSTRACT_WITH_TITLE,
    TITLE_MIN,
    KeywordRarity,
    PaperText,
    _bundled_keywords,
    _cosine,
    content_words,
    match,
)
from grebench.settings import load_settings
from grebench.store import Link, LinkFlag, open_store

ROOT = Path(__file__).resolve().parents[1]
RESUBMISSION = ROOT / "tests" / "data" / "archives" / "resubmission_iclr2026.jsonl"
STAGED = Path("/work/shared/data/iclr2020")
#: per strength: paragraphs dropped, paragraph swaps, sentences rewritten, references dropped, references added,
#: captions rewritten
STRENGTHS = {"light": (0.10, 2, 0.15, 0.10, 2, 0.3), "medium": (0.20, 4, 0.30, 0.20, 5, 0.5),
             "heavy": (0.30, 6, 0.50, 0.30, 10, 0.7)}
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_INTRODUCTION = re.compile(r"^\s*1\.?\s+introduction\s*$", re.IGNORECASE | re.MULTILINE)


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


def _rewritten(sentence: str, vocabulary: list[str], rng: random.Random) -> str:
    """A sentence rewritten beyond shingles: a third of its words replaced, all shuffled."""
    words = [rng.choice(vocabulary) if rng.random() < 0.35 else w for w in sentence.split()]
    rng.shuffle(words)
    return " ".join(words)


def _wrapped(paragraph: str, width: int = 88) -> str:
    lines, line = [], ""
    for word in paragraph.split():
        if line and len(line) + len(word) + 1 > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return "\n".join([*lines, line])


def _shuffled(text: str, rng: random.Random) -> str:
    words = text.split()
    rng.shuffle(words)
    return " ".join(words)


def disguise_text(text: str, other: dict[str, Any], other_references: str, rng: random.Random,
                  strength: str) -> tuple[str, str, str]:
    """(title, abstract, extracted text) of a disguised resubmission of the paper whose text is ``text``."""
    from grebench.ingest._fingerprints import split_text

    drop, swaps, rewrite, ref_drop, ref_add, cap_rewrite = STRENGTHS[strength]
    parts = split_text(text)
    vocabulary = (other["abstract"] or other["title"]).split()
    start = _INTRODUCTION.search(parts.body)
    paragraphs = [p for p in re.split(r"\n\s*\n", parts.body[start.start() if start else 0:]) if p.strip()]
    kept = paragraphs[:1] + [p for p in paragraphs[1:] if rng.random() >= drop]
    for _ in range(swaps):
        if len(kept) > 3:
            i = rng.randrange(1, len(kept) - 1)
            kept[i], kept[i + 1] = kept[i + 1], kept[i]
    body = [_wrapped(" ".join(_rewritten(x, vocabulary, rng) if rng.random() < rewrite else x
                              for x in _SENTENCE.split(" ".join(p.split())))) for p in kept]
    captions = [_rewritten(c, vocabulary, rng) if rng.random() < cap_rewrite else c
                for c in parts.captions.split("\n") if c.strip()]
    references = [r for r in parts.references.split("\n") if r.strip() and rng.random() >= ref_drop]
    extra = [r for r in other_references.split("\n") if r.strip()]
    for ref in rng.sample(extra, min(ref_add, len(extra))):
        references.insert(rng.randrange(len(references) + 1), ref)
    title, abstract = _shuffled(other["title"], rng), _shuffled(other["abstract"] or "", rng)
    half = len(body) // 2
    text = "\n\n".join([title, "Anonymous authors", f"ABSTRACT {abstract}", *body[:half], *captions, *body[half:],
                         "REFERENCES", "\n".join(references)])
    return title, abstract, text


def _staged_texts(pdfs: Path, parsed: Path | None) -> tuple[dict[str, str], dict[str, str]]:
    """Extracted text of each staged PDF (the product's worker), and the other tool's texts of the same papers."""
    texts = {}
    for path in sorted(pdfs.glob("*.pdf")):
        result = extract_pdf(path.read_bytes(), timeout_s=120, memory_mb=2048, max_bytes=60_000_000)
        if result.get("text"):
            texts[path.stem] = str(result["text"])
    others = {}
    for path in sorted(parsed.glob("*.txt")) if parsed and parsed.is_dir() else []:
        stem = path.name.split(".sakana")[0].split(".berenslab")[0]
        if stem in texts:
            others[stem] = path.read_text(encoding="utf-8")
    return texts, others


def _title_abstract(text: str) -> tuple[str, str]:
    """A staged paper's title (its first line) and abstract (the paragraph after "Abstract")."""
    title = next((line.strip() for line in text.split("\n") if line.strip()), "untitled")
    found = re.search(r"abstract\s*(.{200,2500}?)(?:\n\s*\n|\n\s*1\.?\s+introduction)", text,
                      re.IGNORECASE | re.DOTALL)
    return title[:300], (found.group(1) if found else text[:1500]).strip()


def _pad_texts(store: Any, n: int, papers: list[dict[str, Any]], seed: int = 13) -> float:
    """n made-up papers with extracted texts (3,000 words of the samples' abstracts, 40 made-up references), stored
    and fingerprinted; the seconds fingerprinting took."""
    from grebench.ingest._fingerprints import refresh_fingerprints

    rng = random.Random(seed)
    words = [w for p in papers for w in (p["abstract"] or "").split()]
    now = datetime(2024, 1, 1)
    rows, texts = [], []
    for i in range(n):
        body = "\n\n".join(" ".join(rng.choices(words, k=150)) for _ in range(20))
        refs = "\n".join(" ".join(rng.choices(words, k=14)) + f", {rng.randint(2010, 2023)}." for _ in range(40))
        rows.append([f"padt{i:06d}", "Pad.cc/2024/Conference", "Pad 2024", 2024, " ".join(rng.choices(words, k=9)),
                     " ".join(rng.choices(words, k=180)), None, None, None, False, "pad", None, now, f"padt{i}", now,
                     now])
        texts.append([f"padt{i:06d}", f"pad:{i}", None, None, f"{body}\n\nREFERENCES\n\n{refs}", None, None, "ok",
                      None, now])
    with store.transaction():
        store.insert_rows("papers", _PAPER_COLUMNS, rows)
        store.insert_rows("paper_texts", _TEXT_COLUMNS, texts)
    started = time.perf_counter()
    with store.transaction():
        refresh_fingerprints(store)
    return time.perf_counter() - started


_PAPER_COLUMNS = ["paper_id", "venue_id", "venue", "venue_year", "title", "abstract", "authors", "keywords",
                  "decision", "withdrawn", "source", "submitted_at", "reviews_public_at", "content_sha256",
                  "ingested_at", "updated_at"]
_TEXT_COLUMNS = ["paper_id", "pdf_ref", "pdf_sha256", "pages", "text", "hidden_json", "flags_json", "status", "error",
                 "extracted_at"]


def disguised_by_text(pdfs: Path, parsed: Path | None, samples: list[dict[str, Any]], seed: int = 5,
                      pad: int = 0) -> dict[str, Any]:
    """Staged papers, their disguises and other extractions, linked in a store with the ICLR 2020 sample.

    The disguises take their title and abstract words from ``samples`` (papers not stored: a title and abstract
    copied from a stored paper would link to that paper)."""
    from grebench.ingest._fingerprints import split_text

    rng = random.Random(seed)
    texts, others = _staged_texts(pdfs, parsed)
    work: dict[str, str] = {}  # paper id → the work it is a version of
    before: dict[str, Counter[str]] = {}
    papers: list[list[Any]] = []
    stored_texts: list[list[Any]] = []
    now = datetime(2026, 1, 1)
    names = sorted(texts)
    for i, name in enumerate(names):
        title, abstract = _title_abstract(texts[name])
        versions = [(f"staged{i}", title, abstract, texts[name])]
        if name in others:
            versions.append((f"staged{i}-other-tool", title, abstract, others[name]))
        other_refs = split_text(texts[names[(i + 1) % len(names)]]).references
        for strength in STRENGTHS:
            other = rng.choice(samples)
            versions.append((f"staged{i}-{strength}", *disguise_text(texts[name], other, other_refs, rng, strength)))
        original = PaperText("o", title, abstract, body=texts[name])
        for pid, t, a, body in versions[1:]:
            kind = pid.split("-", 1)[1]
            old = match(original, PaperText(pid, t, a, body=body))  # issue 48's rule (first pages only)
            bare = match(PaperText("o", title, abstract), PaperText(pid, t, a))  # no text at hand
            before.setdefault(kind, Counter()).update(
                [f"issue 48 rule: {old.method if old else 'missed'}", f"title+abstract only: "
                 f"{bare.method if bare else 'missed'}"])
        for pid, t, a, body in versions:
            work[pid] = name
            papers.append([pid, "Staged.cc/2026", "Staged 2026", 2026, t, a, None, None, None, False, "benchmark",
                           None, None, pid, now, now])
            stored_texts.append([pid, f"bench:{pid}", None, None, body, None, None, "ok", None, now])
    store = open_store(None)
    settings = load_settings(env={"GREBENCH_DATA_DIR": "/nonexistent"})
    run_ingest(resolve_source("bundled:iclr2020", settings), store, settings, store.start_run("ingest", {}))
    padding = {"papers": pad, "seconds_to_fingerprint": round(_pad_texts(store, pad, samples), 1)} if pad else None
    with store.transaction():
        store.insert_rows("papers", _PAPER_COLUMNS, papers)
        store.insert_rows("paper_texts", _TEXT_COLUMNS, stored_texts)
    started = time.perf_counter()
    summary = link_papers(store, set(work))
    seconds = round(time.perf_counter() - started, 2)
    if padding:  # one more paper linked against all: what ingest pays per new paper
        store.con.execute("UPDATE paper_texts SET extracted_at = ? WHERE paper_id = 'staged0-heavy'",
                          [datetime(2026, 2, 1)])
        started = time.perf_counter()
        link_papers(store, {"staged0-heavy"})
        padding["seconds_to_link_one_more"] = round(time.perf_counter() - started, 2)
        padding["fingerprint_keys"] = int(store.scalar("SELECT count(*) FROM paper_fingerprint_keys"))
    found = {(r["paper_id"], r["linked_id"]): r["method"] for r in store.rows(
        "SELECT paper_id, linked_id, method FROM paper_links")}
    flagged = {(r["paper_id"], r["linked_id"]): r["reason"] for r in store.rows(
        "SELECT paper_id, linked_id, reason FROM paper_link_flags")}
    evidence = {(r["paper_id"], r["linked_id"]): r for r in store.rows(
        "SELECT paper_id, linked_id, evidence_json FROM paper_link_flags")}
    by_strength: dict[str, Counter[str]] = {}
    for pid, name in work.items():
        if pid == f"staged{names.index(name)}":
            continue
        kind = pid.split("-", 1)[1]
        key = tuple(sorted((pid, f"staged{names.index(name)}")))
        outcome = f"linked:{found[key]}" if key in found else "flagged" if key in flagged else "missed"
        by_strength.setdefault(kind, Counter())[outcome] += 1
    ids = sorted(work)
    same = [(a, b) for a, b in itertools.combinations(ids, 2) if work[a] == work[b]]
    distinct = [(a, b) for a, b in itertools.combinations(ids, 2) if work[a] != work[b]]
    staged = set(ids)
    touching_sample = [k for k in [*found, *flagged] if (k[0] in staged) != (k[1] in staged)]
    same_found = sum(k in found for k in same)
    same_flagged = sum(k in flagged and k not in found for k in same)
    return {"staged_papers": len(names), "versions": len(ids), "seconds_to_link": seconds, "summary": summary,
            "padding": padding,
            "disguise_vs_original": {k: dict(v) for k, v in sorted(by_strength.items())},
            "disguise_vs_original_before": {k: dict(v) for k, v in sorted(before.items())},
            "same_work_pairs": len(same), "same_work_linked": same_found, "same_work_flagged": same_flagged,
            "distinct_pairs": len(distinct), "false_links": sum(k in found for k in distinct),
            "false_flags": sum(k in flagged for k in distinct),
            "links_or_flags_with_iclr2020_sample": touching_sample,
            "flag_reasons": {"/".join(k): v for k, v in flagged.items()},
            "flag_evidence": {"/".join(k): json.loads(v["evidence_json"]) for k, v in evidence.items()}}


def _metadata_disguise(paper: dict[str, Any], other: dict[str, Any], rng: random.Random,
                       keep_keywords: bool) -> PaperText:
    own = content_words(paper["abstract"])
    abstract = _shuffled(other["abstract"] or "", rng) + " " + " ".join(rng.sample(own, len(own) // 4))
    keywords = paper["papercopilot"].get("keywords") if keep_keywords else other["papercopilot"].get("keywords")
    return PaperText(paper["id"] + "-disguised", _shuffled(other["title"], rng), abstract,
                     (paper.get("miniconf") or {}).get("authors"), keywords)


def _sample_text(p: dict[str, Any]) -> PaperText:
    return PaperText(p["id"], p["title"], p["abstract"], (p.get("miniconf") or {}).get("authors"),
                     (p.get("papercopilot") or {}).get("keywords"))


def disguised_by_metadata(papers: list[dict[str, Any]], seed: int = 9) -> dict[str, Any]:
    """ICLR 2020 papers disguised in title and abstract, assessed against their originals; distinct pairs."""
    rng = random.Random(seed)
    count, df = _bundled_keywords()
    rarity = KeywordRarity(count, dict(df))
    originals = [_sample_text(p) for p in papers]
    out: dict[str, Any] = {}
    for keep in (True, False):
        outcome: Counter[str] = Counter()
        similarity = []
        for paper, original in zip(papers, originals, strict=True):
            other = rng.choice([p for p in papers if p["id"] != paper["id"]])
            disguised = _metadata_disguise(paper, other, rng, keep)
            similarity.append(_cosine(original.words or Counter(), disguised.words or Counter()))
            found = assess(original, disguised, rarity)
            outcome["linked" if isinstance(found, Link) else "flagged" if isinstance(found, LinkFlag) else
                    "missed"] += 1
        similarity.sort()
        out["keywords kept" if keep else "keywords replaced"] = {
            **dict(outcome), "papers": len(papers),
            "abstract_cosine_to_original": [round(similarity[len(similarity) // 10], 2),
                                            round(similarity[len(similarity) // 2], 2),
                                            round(similarity[9 * len(similarity) // 10], 2)]}
    links = flags = 0
    examples = []
    for a, b in itertools.combinations(originals, 2):
        found = assess(a, b, rarity)
        links += isinstance(found, Link)
        if isinstance(found, LinkFlag):
            flags += 1
            examples.append([a.title, b.title, found.reason])
    out["distinct_pairs"] = len(originals) * (len(originals) - 1) // 2
    out["false_links"], out["false_flags"], out["false_flag_examples"] = links, flags, examples[:5]
    return out


def disguised_abstracts(samples: dict[str, list[dict[str, Any]]], spec: str = "offline", seed: int = 5,
                        rate: float = 1.0, drop: float = 0.3) -> dict[str, Any]:
    """ICLR 2020 papers disguised by title and abstract (no PDF), linked without and with the LM view."""
    import sys
    import tempfile

    sys.path.insert(0, str(ROOT))
    from copy_detection import Neighbours

    from grebench.ingest._links import _candidates
    from grebench.scoring import EstimatorHandle, LMAbstractReader
    from tests.fakes.abstracts import disguised

    started = time.perf_counter()
    neighbours = Neighbours([p["abstract"] or "" for name in samples for p in samples[name]], size=3000)
    neighbours_s = time.perf_counter() - started
    rng = random.Random(seed)
    records, cosine = [], []
    for paper in samples["iclr2020"]:
        title, abstract = disguised(paper["title"], paper["abstract"] or "", rng, rate, drop,
                                    lambda w, r: neighbours.get(w, r))
        cosine.append(_cosine(Counter(content_words(paper["abstract"])), Counter(content_words(abstract))))
        records.append({"id": f"{paper['id']}-disguised", "venue": "Disguised 2021", "venue_id": "Disguised/2021",
                        "title": title, "abstract": abstract, "reviews": []})
    cosine.sort()
    settings = load_settings(env={"GREBENCH_DATA_DIR": "/nonexistent", "GREBENCH_LINK_ESTIMATOR": ""})
    store = open_store(None)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "disguised.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        for spec_ in ("bundled:iclr2020", "bundled:iclr2026", f"archive:{path}"):
            run_ingest(resolve_source(spec_, settings), store, settings, store.start_run("ingest", {}))
    originals = {r["id"]: r["id"][:-len("-disguised")] for r in records}
    reached = {tuple(sorted(p)) for p in _candidates(store, set(originals))}
    out: dict[str, Any] = {
        "disguises": len(records), "abstract_cosine_to_original_p10_p50_p90": [
            round(cosine[len(cosine) // 10], 2), round(cosine[len(cosine) // 2], 2),
            round(cosine[9 * len(cosine) // 10], 2)],
        "pairs_reaching_the_candidates": sum(tuple(sorted((d, o))) in reached for d, o in originals.items()),
        "neighbours_s": round(neighbours_s, 1)}

    def outcome(label: str, reader: LMAbstractReader | None) -> None:
        started = time.perf_counter()
        counts = link_papers(store, None, abstracts=reader)
        seconds = time.perf_counter() - started
        linked = {(r["paper_id"], r["linked_id"]) for r in store.rows("SELECT paper_id, linked_id FROM paper_links")}
        flagged = {(r["paper_id"], r["linked_id"]): r["reason"] for r in store.rows(
            "SELECT paper_id, linked_id, reason FROM paper_link_flags WHERE decision IS NULL")}
        true = {tuple(sorted((d, o))) for d, o in originals.items()}
        false_flags = sorted(set(flagged) - true)
        out[label] = {"linked": len(true & linked), "flagged": len(true & set(flagged)),
                      "false_links": len(linked - true), "false_flags": len(false_flags),
                      "false_flag_examples": [[*pair, flagged[pair]] for pair in false_flags[:3]],
                      "flagged_by_the_lm_view": sum("evaluation LM" in flagged[p] for p in true & set(flagged)),
                      "seconds": round(seconds, 2), "lm_view": counts.get("abstracts")}

    outcome("without_lm_view", None)
    outcome("with_lm_view", LMAbstractReader(store, EstimatorHandle(spec, settings)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pad", type=int, default=0, help="Made-up papers stored before the ICLR 2026 sample (with "
                        "--disguise: made-up papers with extracted texts, stored and fingerprinted first).")
    parser.add_argument("--no-full", action="store_true", help="Skip the all-pairs comparison (2-3 minutes).")
    parser.add_argument("--disguise", action="store_true", help="Only the disguised resubmissions (issue 62).")
    parser.add_argument("--abstracts", action="store_true",
                        help="Only 6.: disguised by title and abstract without a PDF, linked without and with the LM "
                             "view of the abstracts (issue 62 §3).")
    parser.add_argument("--estimator", default="offline", help="With --abstracts: the LM view's estimator spec.")
    parser.add_argument("--pdfs", type=Path, default=STAGED / "pdfs" / "papers", help="Staged paper PDFs.")
    parser.add_argument("--parsed", type=Path, default=STAGED / "parsed-text",
                        help="Texts of the same PDFs extracted by another tool.")
    args = parser.parse_args()
    samples = {name: _records(bundled_path(name)) for name in ("iclr2020", "iclr2026")}
    if args.abstracts:
        print(json.dumps(disguised_abstracts(samples, args.estimator), indent=1, default=str))
        return
    if args.disguise:
        print(json.dumps({"by_text": disguised_by_text(args.pdfs, args.parsed, samples["iclr2026"], pad=args.pad),
                          "by_metadata": disguised_by_metadata(samples["iclr2020"])}, indent=1, default=str))
        return
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

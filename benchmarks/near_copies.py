"""The near-paper copy check (issue 62, item 3) on disguised resubmissions the links miss, and its false positives.

    PYTHONPATH=. .venv/bin/python benchmarks/near_copies.py [--estimator offline] [--limit N]

1. Both bundled samples (ICLR 2020, ICLR 2026 less every tenth paper, held out as the generic reviews below) and the
   400 ICLR 2020 papers disguised by title and abstract without a PDF (``tests/fakes/abstracts.py``, as
   ``benchmarks/resubmission_links.py --abstracts``: synonyms, 30 % of the sentences dropped) are stored, the
   disguises as a venue of their own under review, and linked by the real ``link_papers`` with the LM view of the
   abstracts (``link_estimator`` offline).  The disguises linked or flagged to their original are left out: the rest
   are the resubmissions whose reviews would count as sealed.
2. Two submitted candidates review every one of them, sealed (made before any review of the disguise is public):
   *Paraphraser* writes a generic review (a review of a held-out paper) followed by 30 % of the sentences of every
   public review of the original, every content word synonymised, clauses rotated, sentences shuffled
   (``benchmarks/copy_detection.py::paraphrased``); *Generic* writes the generic review alone; *Template* writes
   one of two LLM-style template reviews that say nothing of the paper (the security tests' fake endpoint's: the
   kind of text that tripped the check in a 4-paper store, issue 62).  The product's copy
   check (:func:`grebench.submissions.check_copies` with ``near_copy_estimator``) is run on each: how many reviews
   the near-paper check flags, whether the original is among the near papers read, and the seconds.
3. False positives: every public review of both samples against its paper's near papers (picked as the product
   does, no date limit), with the bar the product calibrates (``NEAR_COPY_SAMPLE`` papers of the store) and with
   bars cross-fitted on the other half of the papers.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def main() -> None:
    import copy_detection
    from copy_detection import Neighbours, paraphrased

    from grebench.ingest import bundled_path, bundled_source, link_papers, resolve_source, run_ingest
    from grebench.scoring import EstimatorHandle, LMAbstractReader, NearCopyCheck, PaperReviews, conformal_bar
    from grebench.scoring import rules_judgment_lines as lines_of
    from grebench.settings import load_settings
    from grebench.store import PaperRecord, open_store, utcnow
    from grebench.submissions import check_copies
    from grebench.submissions._nearcopy import NEAR_COPY_SAMPLE, NEAR_PAPERS, ranked_near_papers
    from tests.fakes.abstracts import disguised
    from tests.fakes.openai_server import DEFAULT_REVIEW, IGNORE_FORMAT_REVIEW

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--estimator", default="offline", help="near_copy_estimator (and link_estimator) spec.")
    parser.add_argument("--limit", type=int, default=None, help="Only the first N unlinked disguises.")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--no-fp", action="store_true", help="Skip 3. (the false positives: a few minutes).")
    args = parser.parse_args()
    out: dict[str, Any] = {"estimator": args.estimator}
    samples = {name: [json.loads(x) for x in bundled_path(name).read_text(encoding="utf-8").split("\n") if x.strip()]
               for name in ("iclr2020", "iclr2026")}
    held_out = samples["iclr2026"][::10]
    parsed = {p.paper_id: [r.text for r in p.reviews if r.text]
              for name in samples for p in bundled_source(name).fetch() if isinstance(p, PaperRecord)}
    generic = [parsed[p["id"]][0] for p in held_out if parsed.get(p["id"])]
    started = time.perf_counter()
    words = Neighbours([p["abstract"] or "" for name in samples for p in samples[name]], size=3000)
    copy_detection.NEIGHBOURS.append(Neighbours([t for ts in parsed.values() for t in ts], size=3000))
    rng = random.Random(args.seed)
    records = []
    for paper in samples["iclr2020"]:
        title, abstract = disguised(paper["title"], paper["abstract"] or "", rng, 1.0, 0.3,
                                    lambda w, r: words.get(w, r))
        records.append({"id": f"{paper['id']}-disguised", "venue": "Disguised 2021", "venue_id": "Disguised/2021",
                        "title": title, "abstract": abstract, "reviews": []})
    kept26 = [p for p in samples["iclr2026"] if p not in held_out]
    env = {"GREBENCH_DATA_DIR": tempfile.mkdtemp(), "GREBENCH_LINK_ESTIMATOR": args.estimator,
           "GREBENCH_NEAR_COPY_ESTIMATOR": args.estimator}
    settings = load_settings(env=env)
    store = open_store(None)
    with tempfile.TemporaryDirectory() as tmp:
        for name, recs in (("iclr2026", kept26), ("disguised", records)):
            path = Path(tmp) / f"{name}.jsonl"
            path.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
        for spec in ("bundled:iclr2020", f"archive:{Path(tmp) / 'iclr2026.jsonl'}",
                     f"archive:{Path(tmp) / 'disguised.jsonl'}"):
            run_ingest(resolve_source(spec, load_settings(env={**env, "GREBENCH_LINK_ESTIMATOR": ""})), store,
                       settings, store.start_run("ingest", {}))
    link_papers(store, None, abstracts=LMAbstractReader(store, EstimatorHandle(args.estimator, settings)))
    caught = {(r["paper_id"], r["linked_id"]) for r in store.rows(
        "SELECT paper_id, linked_id FROM paper_links UNION SELECT paper_id, linked_id FROM paper_link_flags")}
    original = {r["id"]: r["id"][:-len("-disguised")] for r in records}
    unlinked = [d for d, o in original.items() if tuple(sorted((d, o))) not in caught]
    out["setup"] = {"disguises": len(records), "linked_or_flagged_to_original": len(records) - len(unlinked),
                    "unlinked": len(unlinked), "seconds": round(time.perf_counter() - started, 1)}
    unlinked = unlinked[:args.limit] if args.limit else unlinked
    reviews = parsed
    for name in ("Paraphraser", "Generic", "Template"):
        store.con.execute("INSERT INTO candidates (name, kind, params_json, updated_at) VALUES (?, 'submitted', "
                          "'{}', ?)", [name, utcnow()])
    for k, pid in enumerate(unlinked):
        stand_in = [generic[k % len(generic)]]
        text = paraphrased(0.3, stand_in)(list(reviews[original[pid]]), random.Random(f"{args.seed}/{pid}"), [])
        template = (DEFAULT_REVIEW, IGNORE_FORMAT_REVIEW)[k % 2]
        for name, review in (("Paraphraser", text), ("Generic", stand_in[0]), ("Template", template)):
            store.con.execute("INSERT INTO generations (generation_id, candidate, paper_id, prompt_version, "
                              "params_json, status, text, generated_at, sealed) VALUES (?, ?, ?, 'v1', '{}', 'ok', "
                              "?, ?, true)", [f"{name}/{pid}", name, pid, review, utcnow()])
    ranked = ranked_near_papers(store, unlinked, {r["paper_id"] for r in store.rows(
        "SELECT paper_id FROM papers WHERE reviews_public_at IS NOT NULL")}, EstimatorHandle(args.estimator, settings))
    out["original_among_the_near_papers_read"] = sum(original[d] in ranked.get(d, [])[:NEAR_PAPERS]
                                                     for d in unlinked)
    out["original_in_the_rare_word_pool"] = sum(original[d] in ranked.get(d, []) for d in unlinked)
    for name in ("Paraphraser", "Generic", "Template"):
        started = time.perf_counter()
        check = check_copies(store, name, settings)
        near = getattr(check, "near_copies", ())
        out[name] = {"reviews": check.checked, "near_paper_check_flags": len(near),
                     "flagging_the_original": sum(original[c.paper_id] in c.detail for c in near),
                     "word_level_or_prose_flags": len(check.copies) + len(check.not_prose),
                     "flagged_by_any": len({c.paper_id for c in (*near, *check.copies, *check.not_prose)}),
                     "seconds": round(time.perf_counter() - started, 1),
                     "example": near[0].detail if near else None}
    if args.no_fp:
        print(json.dumps(out, indent=1, default=str))
        return
    # 3. false positives: every honest review of both samples against its paper's near papers
    started = time.perf_counter()
    texts: dict[str, dict[str, str]] = {}
    for r in store.rows("SELECT r.paper_id, r.review_id, arg_max(v.text, v.version) AS text FROM reviews r JOIN "
                        "review_versions v USING (review_id) WHERE v.text IS NOT NULL GROUP BY ALL ORDER BY 2"):
        texts.setdefault(r["paper_id"], {})[r["review_id"]] = r["text"]
    readable = {pid for pid, rs in texts.items() if len(rs) >= 2}
    pids = sorted(readable)
    ranked_all = ranked_near_papers(store, pids, readable, EstimatorHandle(args.estimator, settings))
    near_of = {pid: nears[:NEAR_PAPERS] for pid, nears in ranked_all.items()}
    abstracts = {r["paper_id"]: r["abstract"] for r in store.rows("SELECT paper_id, abstract FROM papers")}
    papers = {pid: PaperReviews(pid, abstracts.get(pid), {rid: lines_of(t) for rid, t in texts[pid].items()})
              for pid in pids}
    handle = EstimatorHandle(args.estimator, settings)
    corpus = ({pid: ["\n".join(ls) for ls in p.reviews.values() if ls] for pid, p in papers.items()}
              if handle.info.needs_corpus else None)
    check_all = NearCopyCheck(handle.get(corpus), papers)
    honest = [(pid, lines_of(t), near_of.get(pid, [])) for pid in pids for t in texts[pid].values()]
    stats = [(pid, e.statistic) for (pid, _, _), e in zip(honest, check_all.statistics(honest), strict=True)
             if e.near_id is not None]
    handle.close()
    sample = {r["paper_id"] for r in store.rows(
        "SELECT paper_id FROM papers WHERE paper_id IN (SELECT unnest(?::VARCHAR[])) ORDER BY hash(paper_id) "
        "LIMIT ?", [pids, NEAR_COPY_SAMPLE])}
    product_bar = conformal_bar([v for pid, v in stats if pid in sample])
    fold = {pid: k % 2 for k, pid in enumerate(pids)}
    bars = [conformal_bar([v for pid, v in stats if fold[pid] != half]) for half in (0, 1)]
    is26 = {p["id"] for p in kept26}
    rows: dict[str, Any] = {}
    for label, keep in (("iclr2020", lambda p: p not in is26), ("iclr2026", lambda p: p in is26)):
        mine = [(pid, v) for pid, v in stats if keep(pid)]
        rows[label] = {"honest_reviews": len(mine),
                       "flagged_at_the_product_bar (calibration papers left out)": sum(
                           v >= product_bar for pid, v in mine if pid not in sample),
                       "of": sum(pid not in sample for pid, _ in mine),
                       "flagged_cross_fitted": sum(v >= bars[fold[pid]] for pid, v in mine),
                       "median": round(sorted(v for _, v in mine)[len(mine) // 2], 3),
                       "p99": round(sorted(v for _, v in mine)[int(len(mine) * 0.99)], 3)}
    out["false_positives"] = {**rows, "product_bar": round(product_bar, 3),
                              "cross_fitted_bars": [round(b, 3) for b in bars], "requests": check_all.requests,
                              "seconds": round(time.perf_counter() - started, 1)}
    print(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()

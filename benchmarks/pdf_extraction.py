"""Benchmark: PDF extraction pages/s through the limited subprocess and in-process (the ratio = process overhead).

Run: ``python benchmarks/pdf_extraction.py [--repeat N]``. Extracts the test PDFs and the other real papers in
``shared/data/iclr2020/pdfs/papers`` (missing ones are skipped); prints one row per PDF and a final JSON line
``{"pages_per_s": ..., "pages_per_s_inprocess": ..., "overhead_ratio": ...}``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grebench.ingest._pdf import extract_pdf  # noqa: E402
from grebench.ingest._pdf_worker import extract_bytes  # noqa: E402

SHARED = ROOT.parent / "shared" / "data" / "iclr2020" / "pdfs" / "papers"
PAPERS = [
    "iclr2020_BklSv34KvB_carpe_diem", "iclr2026sub_developer_emotion_classification",
    "arxiv_1706.03762_attention_is_all_you_need", "iclr2020_rklp93EtwH_automated_relational_meta_learning",
    "iclr2017workshop_hoffer_ailon_semi_supervised_metric_embedding", "arxiv_openreviewer_idahl_ahmadi",
    "iclr2026sub_common_corpus", "iclr2025_darkbench_misnamed_moe",
]


def _find(name: str) -> Path | None:
    """The PDF in tests/data or in the shared data, if present."""
    for folder in (ROOT / "tests" / "data" / "pdfs", SHARED):
        if (folder / f"{name}.pdf").exists():
            return folder / f"{name}.pdf"
    return None


def main() -> None:
    """Time both paths on every PDF found."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=1, help="Extract each PDF this many times per path.")
    args = parser.parse_args()
    total_pages, t_sub, t_in = 0, 0.0, 0.0
    print(f"{'pdf':60} {'pages':>5} {'subproc s':>9} {'inproc s':>9} {'ratio':>6}")
    for name in PAPERS:
        path = _find(name)
        if path is None:
            print(f"{name:60} skipped (missing)")
            continue
        data = path.read_bytes()
        start = time.perf_counter()
        for _ in range(args.repeat):
            result = extract_pdf(data, timeout_s=120, memory_mb=2048, max_bytes=100_000_000)
        sub = time.perf_counter() - start
        start = time.perf_counter()
        for _ in range(args.repeat):
            extract_bytes(data)
        inproc = time.perf_counter() - start
        if result["error"] is not None:
            print(f"{name:60} error: {result['error']}")
            continue
        pages = result["pages"] * args.repeat
        total_pages, t_sub, t_in = total_pages + pages, t_sub + sub, t_in + inproc
        print(f"{name[:60]:60} {result['pages']:5d} {sub:9.2f} {inproc:9.2f} {sub / inproc:6.2f}")
    summary = {"pages_per_s": round(total_pages / t_sub, 2) if t_sub else None,
               "pages_per_s_inprocess": round(total_pages / t_in, 2) if t_in else None,
               "overhead_ratio": round(t_sub / t_in, 3) if t_in else None, "pages": total_pages}
    print(json.dumps(summary))


if __name__ == "__main__":
    main()

"""Issue 31 §5: the snapshot's decoded-size bound is the importer's, not the snapshot's.

A small, highly compressible ``papers.parquet`` whose manifest declares a huge ``decoded_bytes`` used to be imported
whole (30,000 rows, 5.14 GB peak RSS); two members each under their own bound were never added up; the check ran
after a whole 8,192-row batch was decoded.  Now ``grebench snapshot import`` (the real CLI, in a fresh process so
its peak RSS is this import's) refuses it in one line, at most the bound decoded, with bounded memory, and the
store is left as it was.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from grebench.store import file_sha256, open_store
from grebench.store._snapshot import BATCH_ROWS, FORMAT, MIN_DECODED_BYTES, import_bound

WIDE = 16 * 1024  # each abstract: 16 KiB of one repeated letter (a 256-row batch: 4 MiB)
HUGE = 2 ** 40  # what the attacker's manifest declares


def papers(rows: int, prefix: str = "p") -> pa.Table:
    """``papers`` rows with distinct ids and one 16 KiB abstract: plain Arrow strings (no dictionary type), the
    Parquet writer dictionary-encodes and compresses them to a few kB."""
    now = datetime(2024, 1, 1)
    return pa.table({"paper_id": [f"{prefix}{i}" for i in range(rows)], "venue_id": ["V"] * rows,
                     "title": ["t"] * rows, "abstract": ["a" * WIDE] * rows, "source": ["bundled"] * rows,
                     "content_sha256": ["0" * 64] * rows, "ingested_at": [now] * rows, "updated_at": [now] * rows})


def reviews(rows: int) -> pa.Table:
    """``reviews`` rows with distinct ids and one 16 KiB signature each."""
    return pa.table({"review_id": [f"r{i}" for i in range(rows)], "paper_id": ["p0"] * rows,
                     "kind": ["official_review"] * rows, "signature": ["s" * WIDE] * rows,
                     "first_seen_at": [datetime(2024, 1, 1)] * rows,
                     "latest_version": pa.array([1] * rows, pa.int32())})


def snapshot(root: Path, members: dict[str, pa.Table]) -> Path:
    """A snapshot as an attacker cuts it: every hash and row count right, ``decoded_bytes`` as large as they like."""
    root.mkdir(parents=True)
    files: dict[str, Any] = {}
    for name, table in members.items():
        pq.write_table(table, root / name, compression="zstd", use_dictionary=True)
        files[name] = {"table": name.removesuffix(".parquet"), "rows": table.num_rows, "decoded_bytes": HUGE,
                       "bytes": (root / name).stat().st_size, "sha256": file_sha256(root / name)}
    (root / "README.md").write_text("snapshot\n")
    (root / "manifest.json").write_text(json.dumps({
        "format": FORMAT, "venue_id": "V", "product_version": "0", "files": files,
        "readme_sha256": file_sha256(root / "README.md")}))
    return root


_CLI = """
import json, re, sys
from grebench.cli._main import main

def peak_kib():  # VmHWM is this process's own peak (ru_maxrss would carry the parent's across exec)
    return int(re.search(r"VmHWM:\\s+(\\d+)", open("/proc/self/status").read()).group(1))

before = peak_kib()
try:
    main(["--data-dir", sys.argv[1], "snapshot", "import", sys.argv[2], "--json"], standalone_mode=False)
    message = None
except Exception as exc:  # click's ClickException carries the one-line refusal
    message = getattr(exc, "message", str(exc))
after = peak_kib()
print(json.dumps({"message": message, "rss_kib": [before, after]}))
"""


def _import(data: Path, snap: Path) -> dict[str, Any]:
    """``grebench --data-dir DATA snapshot import SNAP`` through the click entry point, in a fresh process."""
    out = subprocess.run([sys.executable, "-c", _CLI, str(data), str(snap)], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).resolve().parents[2])
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def _refused_after(message: str) -> int:
    return int(message.split("refused after ")[1].split(" bytes")[0].replace(",", ""))


def _counts(data: Path) -> tuple[int, int]:
    store = open_store(data / "grebench.duckdb")
    try:
        return tuple(store.con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]  # type: ignore[return-value]
                     for t in ("papers", "reviews"))
    finally:
        store.close()


def test_a_declared_huge_bound_is_not_the_importers(tmp_path: Path) -> None:
    rows = 32768  # 512 MiB decoded: under the 2 GiB the manifest's word used to allow
    snap = snapshot(tmp_path / "snap", {"papers.parquet": papers(rows)})
    size = (snap / "papers.parquet").stat().st_size
    assert size < 256 * 1024
    result = _import(tmp_path / "data", snap)
    message = result["message"]
    assert message and "\n" not in message and "importer's bound" in message and "nothing imported" in message, result
    bound = import_bound(size)
    assert bound == MIN_DECODED_BYTES  # 50 × a few kB is under the floor
    refused_after = _refused_after(message)
    assert bound - BATCH_ROWS * (WIDE + 256) < refused_after <= bound  # checked inside the member, before keeping
    before, after = result["rss_kib"]
    assert (after - before) * 1024 < 200 * 1024 ** 2, result  # not the 512 MiB it decodes to
    assert _counts(tmp_path / "data") == (0, 0)  # one transaction: the store is as it was


def test_the_bound_is_total_across_members(tmp_path: Path) -> None:
    # each member decodes to 10 MiB, under the floor on its own; together 20 MiB, over it
    per_member = 10 * 1024 ** 2 // WIDE
    snap = snapshot(tmp_path / "snap", {"papers.parquet": papers(per_member), "reviews.parquet": reviews(per_member)})
    result = _import(tmp_path / "data", snap)
    message = result["message"]
    assert message and message.startswith("reviews.parquet") and "importer's bound" in message, result
    assert _refused_after(message) <= MIN_DECODED_BYTES
    assert _counts(tmp_path / "data") == (0, 0)  # the first member's rows went with the refusal

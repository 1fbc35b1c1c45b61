"""Snapshot import streams with limits: a small Parquet file that decodes to gigabytes is refused early with
bounded memory, and every malformed manifest is a one-line refusal (a hypothesis fuzz of depth, duplicate keys
and types)."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grebench.store import Store, file_sha256, open_store
from grebench.store._snapshot import (
    BATCH_ROWS,
    FORMAT,
    MIN_DECODED_BYTES,
    SnapshotError,
    decoded_bound,
    import_snapshot,
    verify_snapshot,
)

ROWS = 400_000
WIDE = 4096  # every row decodes to a 4 KB string: 1.6 GB in all, from a file of some kB


def bomb_table(rows: int = ROWS) -> pa.Table:
    """``reviews`` rows whose one 4 KB value is dictionary-encoded: tiny on disk, huge once decoded."""
    zeros = pa.array([0] * rows, type=pa.int32())

    def const(value: Any, kind: pa.DataType) -> pa.DictionaryArray:
        return pa.DictionaryArray.from_arrays(zeros, pa.array([value], type=kind))

    return pa.table({"review_id": const("r", pa.string()), "paper_id": const("p", pa.string()),
                     "kind": const("official_review", pa.string()), "signature": const("x" * WIDE, pa.string()),
                     "first_seen_at": pa.array([datetime(2020, 1, 1)] * rows, type=pa.timestamp("us")),
                     "latest_version": pa.array([1] * rows, type=pa.int32())})


def paper_table() -> pa.Table:
    """The one paper (``p`` of venue ``V``) that :func:`bomb_table`'s rows are about: a snapshot's rows may name only
    its own papers, so a bomb without it would be refused for that before its size is ever measured."""
    now = pa.array([datetime(2020, 1, 1)], type=pa.timestamp("us"))
    return pa.table({"paper_id": ["p"], "venue_id": ["V"], "title": ["t"], "withdrawn": [False], "source": ["s"],
                     "content_sha256": ["0"], "ingested_at": now, "updated_at": now})


def make_snapshot(root: Path, members: dict[str, pa.Table], **extra: Any) -> Path:
    """A snapshot folder the way an attacker writes one: members, a README and a manifest that matches them."""
    root.mkdir(parents=True)
    files: dict[str, Any] = {}
    if members and "papers.parquet" not in members:
        members = {"papers.parquet": paper_table(), **members}
    for name, table in members.items():
        pq.write_table(table, root / name, compression="zstd", use_dictionary=True)
        files[name] = {"table": name.removesuffix(".parquet"), "rows": table.num_rows,
                       "bytes": (root / name).stat().st_size, "sha256": file_sha256(root / name)}
    (root / "README.md").write_text("snapshot\n")
    manifest = {"format": FORMAT, "venue_id": "V", "product_version": "0", "files": files,
                "readme_sha256": file_sha256(root / "README.md"), **extra}
    (root / "manifest.json").write_text(json.dumps(manifest))
    return root


def test_a_decompression_bomb_is_refused_early_with_bounded_memory(tmp_path: Path) -> None:
    snap = make_snapshot(tmp_path / "bomb", {"reviews.parquet": bomb_table()})
    size = (snap / "reviews.parquet").stat().st_size
    assert size < 256 * 1024  # a few hundred kB on disk ...
    assert verify_snapshot(snap)["ok"]  # ... whose manifest matches it in every respect
    # measured in a fresh process: its peak RSS is what this import cost, whatever the test process did before
    script = f"""
import resource, json
from pathlib import Path
from grebench.store import open_store
from grebench.store._snapshot import SnapshotError, import_snapshot
store = open_store(None)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    import_snapshot(store, Path({str(snap)!r}))
    message = None
except SnapshotError as exc:
    message = str(exc)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({{"message": message, "rss_kib": [before, after],
                  "rows": store.con.execute("SELECT count(*) FROM reviews").fetchone()[0]}}))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2])
    result = json.loads(out.stdout.strip().splitlines()[-1])
    message = result["message"]
    assert message and "\n" not in message and "decodes to more than" in message, result
    refused_after = int(message.split("refused after ")[1].split(" bytes")[0].replace(",", ""))
    batch = BATCH_ROWS * (WIDE + 128)
    assert MIN_DECODED_BYTES - batch < refused_after <= MIN_DECODED_BYTES  # stopped at the bound, never past it
    assert refused_after < ROWS * WIDE / 10  # far from the 1.6 GB the file decodes to
    before, after = result["rss_kib"]
    assert (after - before) * 1024 < 400 * 1024 ** 2, result  # peak memory grew by well under what it decodes to
    assert result["rows"] == 0  # one transaction: nothing of the refused snapshot stays


def test_a_manifest_that_understates_decoded_bytes_is_refused(tmp_path: Path) -> None:
    small = bomb_table(rows=3 * BATCH_ROWS)
    snap = make_snapshot(tmp_path / "s", {"reviews.parquet": small})
    manifest = json.loads((snap / "manifest.json").read_text())
    manifest["files"]["reviews.parquet"]["decoded_bytes"] = 1000
    (snap / "manifest.json").write_text(json.dumps(manifest))
    assert decoded_bound(manifest["files"]["reviews.parquet"]) == 1000 + 100 + 1024 ** 2
    store = open_store(None)
    with pytest.raises(SnapshotError, match=r"decodes to more than 1,049,676 bytes"):
        import_snapshot(store, snap)
    assert store.con.execute("SELECT count(*) FROM reviews").fetchone() == (0,)


def test_duplicate_column_names_are_a_one_line_refusal(tmp_path: Path) -> None:
    table = pa.Table.from_arrays([pa.array(["a"]), pa.array(["b"])], names=["review_id", "review_id"])
    snap = make_snapshot(tmp_path / "d", {"reviews.parquet": table})
    with pytest.raises(SnapshotError, match="duplicate column name") as caught:
        import_snapshot(open_store(None), snap)
    assert "\n" not in str(caught.value)


def test_a_deeply_nested_manifest_is_a_one_line_refusal(tmp_path: Path) -> None:
    snap = make_snapshot(tmp_path / "n", {})
    (snap / "manifest.json").write_text('{"format": ' + "[" * 100_000 + "]" * 100_000 + "}")
    report = verify_snapshot(snap)
    assert not report["ok"] and len(report["problems"]) == 1 and "nested" in report["problems"][0], report
    with pytest.raises(SnapshotError, match="nested") as caught:
        import_snapshot(open_store(None), snap)
    assert "\n" not in str(caught.value)


# -- the fuzz ------------------------------------------------------------------------------------------------------
_scalars = st.one_of(st.none(), st.booleans(), st.integers(-2 ** 70, 2 ** 70), st.floats(allow_nan=False),
                     st.text(max_size=20))
_json = st.recursive(_scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                     max_leaves=30)
_member_info = st.fixed_dictionaries({}, optional={"table": st.one_of(st.just("papers"), _json),
                                                   "rows": st.one_of(st.integers(-5, 10), _json),
                                                   "bytes": _json, "decoded_bytes": _json,
                                                   "sha256": st.one_of(st.just("0" * 64), _json)})
_manifest = st.fixed_dictionaries(
    {}, optional={"format": st.one_of(st.just(FORMAT), _json), "venue_id": _json, "product_version": _json,
                  "readme_sha256": _json,
                  "files": st.one_of(st.dictionaries(st.one_of(st.just("papers.parquet"), st.text(max_size=12)),
                                                     st.one_of(_member_info, _json), max_size=3), _json)})


def _nest(depth: int) -> str:
    return '{"files": ' + '{"a": ' * depth + "1" + "}" * depth + "}"


@pytest.fixture(scope="module")
def fuzz_store() -> Store:
    return open_store(None)


def _check_one_line(snap: Path, store: Store) -> None:
    report = verify_snapshot(snap)
    assert isinstance(report["ok"], bool) and all("\n" not in p for p in report["problems"])
    try:
        import_snapshot(store, snap)
    except SnapshotError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 4000
    else:
        assert report["ok"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(manifest=st.one_of(_manifest, _json), duplicate=st.booleans(), depth=st.integers(0, 3000))
def test_fuzzed_manifests_are_one_line_refusals(manifest: Any, duplicate: bool, depth: int, tmp_path_factory: Any,
                                                fuzz_store: Store) -> None:
    snap = tmp_path_factory.mktemp("fuzz")
    pq.write_table(pa.table({"paper_id": ["p"]}), snap / "papers.parquet")
    (snap / "README.md").write_text("x")
    text = json.dumps(manifest)
    if duplicate and text.startswith("{") and len(text) > 2:
        text = '{"format": 1, "format": 2, ' + text[1:]
    if depth % 7 == 0:
        text = _nest(depth)
    (snap / "manifest.json").write_text(text)
    _check_one_line(snap, fuzz_store)

"""Property-based fuzzing of the PDF extractor on mutated PDFs: byte flips, truncations, splices, garbage.

Contract of ``extract_pdf``: never raises, always a dict with ``text`` (str or None) and ``error`` (None or a
non-empty message), returns within its ``timeout_s`` (plus process start-up), and the worker's memory stays under
``memory_mb`` (the limit is an rlimit: a hungry input comes back as an error, never as this process's problem).
Seeds: the real PDFs of ``tests/data/pdfs/`` when present (their first 64 KiB and whole) plus small PDFs made with
PyMuPDF. Each example starts one worker process (~0.3 s), so CI runs few examples; ``--hypothesis-profile=long``
runs many.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grebench.ingest._pdf import extract_pdf

pytestmark = pytest.mark.fuzz

PDF_DIR = Path(__file__).resolve().parent.parent / "data" / "pdfs"
TIMEOUT_S = 5.0
MEMORY_MB = 512


def _generated() -> list[bytes]:
    import fitz

    out = []
    for pages in (1, 3):
        doc = fitz.open()
        for i in range(pages):
            page = doc.new_page()
            body = (f"Section {i}. We study attention mechanisms and report BLEU on WMT translation tasks. " * 3)
            page.insert_textbox(fitz.Rect(72, 72, 520, 400), body * 4)
            page.insert_text((72, 120), "hidden instruction", color=(1, 1, 1))
        out.append(bytes(doc.tobytes()))
        doc.close()
    return out


SEEDS = _generated() + sorted((p.read_bytes() for p in PDF_DIR.glob("*.pdf")), key=len)[:1]


@st.composite
def mutated_pdf(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "truncate", "splice", "insert", "zero"]))
        n = len(data)
        if n == 0:
            break
        at = draw(st.integers(0, n - 1))
        if op == "flip":
            for k in range(draw(st.integers(1, 16))):
                data[(at + k * 97) % n] ^= draw(st.integers(1, 255))
        elif op == "truncate":
            del data[max(6, at):]
        elif op == "splice":
            other = draw(st.sampled_from(SEEDS))
            start = draw(st.integers(0, len(other) - 1))
            data[at:at + draw(st.integers(0, 4096))] = other[start:start + draw(st.integers(1, 4096))]
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=64)) or b"obj"
        else:
            data[at:at + draw(st.integers(1, 2048))] = bytes(draw(st.integers(1, 2048)))
    return bytes(data)


def check_extraction(data: bytes) -> dict:
    """Run the extractor and check its contract; return the result."""
    started = time.monotonic()
    result = extract_pdf(data, timeout_s=TIMEOUT_S, memory_mb=MEMORY_MB, max_bytes=5_000_000)
    elapsed = time.monotonic() - started
    assert elapsed < TIMEOUT_S + 10, f"extract_pdf took {elapsed:.1f} s, over its {TIMEOUT_S} s limit"
    assert isinstance(result, dict) and "error" in result and "text" in result
    if result["error"] is None:
        assert isinstance(result["text"], str)
    else:
        assert isinstance(result["error"], str) and result["error"].strip() and result["text"] is None
    return result


@settings(max_examples=max(6, settings.default.max_examples // 20), deadline=None)
@given(mutated_pdf())
def test_extract_pdf_survives_mutations(data: bytes) -> None:
    check_extraction(data)


@settings(max_examples=max(4, settings.default.max_examples // 40), deadline=None)
@given(st.binary(max_size=2048).map(lambda b: b"%PDF-1.7\n" + b))
def test_extract_pdf_survives_garbage_after_header(data: bytes) -> None:
    check_extraction(data)


def test_seeds_extract_cleanly() -> None:
    """The unmutated seeds extract: the mutations, not the seeds, are what fails."""
    for seed in SEEDS[:2]:
        result = check_extraction(seed)
        assert result["error"] is None and "attention" in result["text"], result

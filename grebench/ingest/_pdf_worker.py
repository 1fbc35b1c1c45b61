"""The PDF extraction worker: in-process functions, and the child process ``grebench.ingest._pdf`` starts.

Why a separate process: MuPDF is C code reading untrusted bytes; a crafted PDF can make it loop or allocate without
bound. ``grebench.ingest._pdf.extract_pdf`` runs this module as a child with a wall-clock limit and an
address-space cap (``RLIMIT_AS``, Linux). Protocol: PDF bytes on stdin, one JSON object on stdout, exit status
``EXIT_MEMORY`` when the memory cap was hit.

``extract_bytes`` / ``extract_document`` are the same logic without the process (tests, benchmarks).
"""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING

import pymupdf

from grebench.ingest._pdf import EXIT_MEMORY
from grebench.ingest._pdf_hidden import find_injections, hidden_on_page
from grebench.ingest._pdf_layout import document_text, page_blocks, page_paragraphs

if TYPE_CHECKING:  # the worker runs under a memory cap: the store (DuckDB) is never imported at run time
    from grebench.store import HiddenText, InjectionFlag, PdfExtraction

_MEMORY_WORDS = ("malloc", "out of memory", "cannot allocate", "bad_alloc", "memory error")


class PdfMemoryError(Exception):
    """MuPDF or Python ran out of memory (under the worker's address-space cap)."""


def _failure(error: str) -> PdfExtraction:
    """The result of an extraction that produced no text."""
    return {"text": None, "pages": None, "hidden": [], "flags": [], "error": error}


def _is_memory_error(exc: BaseException) -> bool:
    """Whether an exception means memory ran out (MuPDF reports it as a generic error with a message)."""
    if isinstance(exc, MemoryError):
        return True
    return any(word in f"{type(exc).__name__} {exc}".lower() for word in _MEMORY_WORDS)


def _clean_str(text: str) -> str:
    """Valid UTF-8 without NULs (lone surrogates from broken fonts would break JSON consumers and DuckDB)."""
    return text.encode("utf-8", "replace").decode("utf-8").replace("\x00", "")


def extract_document(doc: pymupdf.Document) -> PdfExtraction:
    """Visible text in reading order, the hidden text removed from it, and phrases aimed at LLM reviewers."""
    pages, sizes = [], []
    hidden: list[HiddenText] = []
    warnings: list[str] = []
    for number in range(doc.page_count):
        try:
            page = doc.load_page(number)
            drop, records = hidden_on_page(page, number + 1)
            blocks = page_blocks(page.get_text("rawdict"), drop)
            size = (page.rect.width, page.rect.height)
        except Exception as exc:  # one broken page must not lose the others
            if _is_memory_error(exc):
                raise PdfMemoryError(str(exc)) from exc
            warnings.append(f"page {number + 1} could not be read: {exc}")
            blocks, records, size = [], [], (612.0, 792.0)
        pages.append(blocks)
        sizes.append(size)
        hidden.extend({"text": _clean_str(r["text"]), "reason": r["reason"], "page": r["page"]} for r in records)
    paragraphs = page_paragraphs(pages, sizes)
    flags: list[InjectionFlag] = [{"phrase": phrase, "page": i + 1, "hidden": False}
             for i, page_paras in enumerate(paragraphs) for phrase in find_injections("\n".join(page_paras))]
    flags += [{"phrase": phrase, "page": r["page"], "hidden": True} for r in hidden for phrase in
              find_injections(r["text"])]
    flags.sort(key=lambda f: (f["page"], f["hidden"]))
    text = _clean_str(document_text(paragraphs)).strip()
    result: PdfExtraction = {"text": text, "pages": doc.page_count, "hidden": hidden, "flags": flags, "error": None}
    if not text:
        result["text"], result["error"] = None, "no extractable text (a scanned PDF without a text layer?)"
    if warnings:
        result["warnings"] = warnings
    return result


def extract_bytes(data: bytes) -> PdfExtraction:
    """Open PDF bytes and extract them; bad input gives ``text=None`` and an ``error`` (memory errors raise)."""
    try:
        doc = pymupdf.open(stream=data, filetype="pdf")
    except Exception as exc:
        if _is_memory_error(exc):
            raise PdfMemoryError(str(exc)) from exc
        return _failure(f"corrupt PDF: {exc}")
    try:
        if doc.needs_pass:
            return _failure("encrypted PDF (needs a password)")
        if doc.page_count == 0:
            return _failure("corrupt PDF: no pages")
        return extract_document(doc)
    except PdfMemoryError:
        raise
    except Exception as exc:
        if _is_memory_error(exc):
            raise PdfMemoryError(str(exc)) from exc
        return _failure(f"corrupt PDF: {exc}")
    finally:
        doc.close()


def main(argv: list[str]) -> int:
    """Child-process entry: read stdin, print the JSON result on the real stdout.

    ``argv[0]`` is the memory cap in MiB; ``grebench.ingest._pdf`` has already applied it before this module was
    imported, and it is applied again here (idempotent) for ``python -m grebench.ingest._pdf_worker MEMORY_MB``.
    """
    memory_mb = int(argv[0]) if argv else 0
    if memory_mb > 0:
        import resource  # Linux/Unix only; the limit is the address space (virtual memory), not the RSS

        limit = memory_mb * 1024 * 1024
        if resource.getrlimit(resource.RLIMIT_AS)[0] != limit:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # anything MuPDF or a library prints goes to stderr, so stdout holds only the JSON
    pymupdf.TOOLS.mupdf_display_errors(False)
    pymupdf.TOOLS.mupdf_display_warnings(False)
    try:
        result = extract_bytes(sys.stdin.buffer.read())
        payload = json.dumps(result, ensure_ascii=False)
    except (MemoryError, PdfMemoryError):
        os.write(2, b"grebench pdf worker: out of memory\n")
        return EXIT_MEMORY
    out.write(payload)
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

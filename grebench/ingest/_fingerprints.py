"""Fingerprints of a paper's extracted text that a resubmission keeps: the body, the figure and table captions, and
the reference list (issue 62).

A title and an abstract can be rewritten in an hour; the body of a paper, its captions and above all its reference
list change little between a rejected version and its resubmission.  Each part is cut into word shingles and
summarised by a MinHash (``datasketch``, :data:`NUM_PERM` permutations): the share of equal minimum hashes of two
fingerprints estimates the Jaccard similarity of their shingle sets.

Fingerprints are stored (``paper_fingerprints``, keyed by the hash of the text they were made from, so an
extraction made again is fingerprinted again) with their locality-sensitive-hashing keys
(``paper_fingerprint_keys``: :data:`BANDS` bands of :data:`ROWS` minimum hashes each).  The papers that may match a
paper are those sharing a key of the same part, found by a join in the store: no paper is compared with the whole
season.  With 64 bands of 2 rows, two parts of Jaccard 0.2 share a key with probability 0.93 and of Jaccard 0.3 with
0.998; two unrelated papers (Jaccard below 0.01) with probability under 0.01.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from grebench.store import Store, utcnow

if TYPE_CHECKING:
    from numpy.typing import NDArray

NUM_PERM = 128
BANDS, ROWS = 64, 2
SEED = 1
#: shingle length in words per part: long enough that two papers of one field share few by chance
SHINGLE_WORDS = {"body": 5, "captions": 4, "references": 4}
MIN_SHINGLES = {"body": 200, "captions": 20, "references": 40}  # a part shorter than this is not fingerprinted
PARTS = tuple(SHINGLE_WORDS)
#: bump when the parts, shingles or hashing change: stored fingerprints of another version are made again
FINGERPRINT_VERSION = "fp1"

_REFERENCES = re.compile(r"^[ \t]*(?:\d+\.?[ \t]*)?(?:references|bibliography|literature cited)[ \t]*$",
                         re.IGNORECASE | re.MULTILINE)
_CAPTION = re.compile(r"^[ \t]*(?:figure|fig\.|table)[ \t]+[A-Z]?\d+[.:].*$", re.IGNORECASE | re.MULTILINE)
# the appendix after the references: "A PROOFS", "A.1 Setup", "Appendix A", "APPENDIX"
_APPENDIX = re.compile(r"^[ \t]*(?:appendix\b.*|[A-H](?:\.\d+)?[ \t]+[A-Z][A-Za-z ,:()-]{2,80})[ \t]*$", re.MULTILINE)
_WORD = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class PaperParts:
    """A paper's extracted text cut into what is fingerprinted: body (appendix included), captions, references."""

    body: str
    captions: str
    references: str

    def get(self, part: str) -> str:
        """The text of one of :data:`PARTS`."""
        return str(getattr(self, part))


def split_text(text: str) -> PaperParts:
    """Cut extracted text into body, captions and references.

    The references run from the last "References" heading to the first appendix heading after it (or the end); the
    captions are the lines that start "Figure N:" or "Table N."; the body is everything else.
    """
    captions = [m.group(0) for m in _CAPTION.finditer(text)]
    plain = _CAPTION.sub("", text)
    heads = list(_REFERENCES.finditer(plain))
    if not heads:
        return PaperParts(plain, "\n".join(captions), "")
    start = heads[-1].end()
    appendix = _APPENDIX.search(plain, start + 200)
    end = appendix.start() if appendix else len(plain)
    return PaperParts(plain[:heads[-1].start()] + "\n" + plain[end:], "\n".join(captions), plain[start:end])


def words(text: str) -> list[str]:
    """Words as shingled: NFKC, case-folded, a word broken by a hyphen at a line end joined again."""
    text = re.sub(r"(\w)-\s*\n\s*(\w)", r"\1\2", unicodedata.normalize("NFKC", text))
    return _WORD.findall(text.casefold())


def shingles(text: str, k: int) -> set[bytes]:
    """The distinct runs of ``k`` consecutive words, UTF-8 encoded."""
    seq = words(text)
    return {" ".join(seq[i:i + k]).encode() for i in range(len(seq) - k + 1)}


@dataclass(frozen=True)
class Fingerprint:
    """One part of one paper: its shingle count and MinHash values."""

    part: str
    shingles: int
    hashvalues: NDArray[np.uint64]

    def jaccard(self, other: Fingerprint) -> float:
        """Estimated Jaccard similarity of the two shingle sets: the share of equal minimum hashes."""
        return float(np.count_nonzero(self.hashvalues == other.hashvalues)) / len(self.hashvalues)

    def band_keys(self) -> list[int]:
        """The LSH keys: one signed 64-bit hash per band of :data:`ROWS` minimum hashes (the band's index included,
        so equal values in different bands do not collide)."""
        out = []
        for band in range(BANDS):
            chunk = self.hashvalues[band * ROWS:(band + 1) * ROWS].tobytes()
            digest = hashlib.blake2b(band.to_bytes(2, "little") + chunk, digest_size=8).digest()
            out.append(int.from_bytes(digest, "little", signed=True))
        return out


def fingerprint(text: str, part: str) -> Fingerprint | None:
    """The MinHash fingerprint of one part's text; None when it has fewer than :data:`MIN_SHINGLES` shingles."""
    from datasketch import MinHash  # imported on use: datasketch imports scipy

    found = shingles(text, SHINGLE_WORDS[part])
    if len(found) < MIN_SHINGLES[part]:
        return None
    minhash = MinHash(num_perm=NUM_PERM, seed=SEED)
    minhash.update_batch(sorted(found))
    return Fingerprint(part, len(found), np.asarray(minhash.hashvalues, dtype=np.uint64))


def fingerprints(text: str | None) -> dict[str, Fingerprint]:
    """Every part of an extracted text that is long enough, fingerprinted."""
    if not text or not text.strip():
        return {}
    parts = split_text(text)
    out = {}
    for part in PARTS:
        made = fingerprint(parts.get(part), part)
        if made is not None:
            out[part] = made
    return out


#: what a fingerprint was made from: the fingerprint version and the extraction (PDF identity and time), so a text
#: extracted again is fingerprinted again without hashing every stored text at every link
_TEXT_KEY = (f"'{FINGERPRINT_VERSION}:' || coalesce(t.pdf_sha256, t.pdf_ref) || ':' || "
             "strftime(t.extracted_at, '%Y-%m-%dT%H:%M:%S.%f')")


def refresh_fingerprints(store: Store, paper_ids: Collection[str] | None = None, limit: int | None = None) -> int:
    """Fingerprint the extracted texts of these papers (all when None) that have no fingerprint of their current
    extraction (at most ``limit`` of them), in the caller's transaction or its own statements; how many papers were
    fingerprinted."""
    want = "" if paper_ids is None else "AND t.paper_id IN (SELECT unnest(?::VARCHAR[]))"
    most = "" if limit is None else f"ORDER BY t.paper_id LIMIT {int(limit)}"
    stale = [(r["paper_id"], r["text"], r["key"]) for r in store.rows(
        f"SELECT t.paper_id, t.text, {_TEXT_KEY} AS key FROM paper_texts t WHERE t.status = 'ok' "
        f"AND t.text IS NOT NULL {want} AND {_TEXT_KEY} NOT IN (SELECT text_key FROM paper_fingerprints f "
        f"WHERE f.paper_id = t.paper_id) {most}", [] if paper_ids is None else [sorted(paper_ids)])]
    if not stale:
        return 0
    ids = sorted({pid for pid, _, _ in stale})
    for table in ("paper_fingerprints", "paper_fingerprint_keys"):
        store.con.execute(f"DELETE FROM {table} WHERE paper_id IN (SELECT unnest(?::VARCHAR[]))", [ids])
    now = utcnow()
    prints: list[list[object]] = []
    keys: list[list[object]] = []
    for pid, text, key in stale:
        made = fingerprints(text)
        if not made:  # a text with no part long enough still gets a row, so it is not read again at every link
            prints.append([pid, "none", key, 0, b"", now])
        for part, fp in made.items():
            prints.append([pid, part, key, fp.shingles, fp.hashvalues.tobytes(), now])
            keys.extend([pid, part, k] for k in fp.band_keys())
    store.insert_rows("paper_fingerprints", ["paper_id", "part", "text_key", "shingles", "minhash", "made_at"],
                      prints)
    if keys:
        store.insert_rows("paper_fingerprint_keys", ["paper_id", "part", "key"], keys)
    return len(stale)


def load_fingerprints(store: Store, paper_ids: Iterable[str]) -> dict[str, dict[str, Fingerprint]]:
    """paper id → part → stored fingerprint."""
    out: dict[str, dict[str, Fingerprint]] = {}
    for r in store.rows("SELECT paper_id, part, shingles, minhash FROM paper_fingerprints WHERE part <> 'none' "
                        "AND paper_id IN (SELECT unnest(?::VARCHAR[]))", [sorted(set(paper_ids))]):
        values = np.frombuffer(bytes(r["minhash"]), dtype=np.uint64)
        out.setdefault(r["paper_id"], {})[r["part"]] = Fingerprint(r["part"], r["shingles"], values)
    return out


def fingerprint_candidates(store: Store, paper_ids: Collection[str] | None) -> list[tuple[str, str]]:
    """Pairs (paper, other) whose fingerprints of one part share an LSH key: a join on the stored keys."""
    want = "" if paper_ids is None else "WHERE a.paper_id IN (SELECT unnest(?::VARCHAR[]))"
    rows = store.con.execute(
        f"SELECT DISTINCT a.paper_id, b.paper_id FROM paper_fingerprint_keys a JOIN paper_fingerprint_keys b "
        f"ON a.part = b.part AND a.key = b.key AND a.paper_id <> b.paper_id {want} ORDER BY 1, 2",
        [] if paper_ids is None else [sorted(paper_ids)]).fetchall()
    return [(a, b) for a, b in rows]

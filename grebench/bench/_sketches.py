"""An index of every public review in the store, for the copy check: rare-word sketches.

The copy check compares a text with the public reviews of its paper and of its linked versions; a copy of a review
of any *other* paper in the store (a resubmission the links missed, a review pasted to the wrong paper) was not
seen.  Comparing every text with every review of a 20,000-paper season in full is too slow, so each review version
keeps a **bottom-k sketch** (MinHash of one permutation): of its rare word stems (three letters or more, used in the
reviews of at most :data:`~grebench.bench._orderfree.RARE_SHARE` of the bundled samples' papers), the
:data:`SKETCH_SIZE` with the smallest stable hash.  The share of a review's sketch that a text holds estimates the share
of the review's rare words the text holds (a copy holds all of them, in any order); reviews at or above
:data:`MIN_CONTAINMENT` with at least :data:`MIN_HITS` sketch words are compared with the text in full by the copy
detector.  Sketches are stored (``review_sketches``, migration m0031) and made lazily for versions that have none.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping, Sequence

from grebench.store import Store

SKETCH_SIZE = 32
SKETCH_VERSION = "bottom32-v1"
#: A review whose sketch the text holds at least this share of is compared with it in full ...
MIN_CONTAINMENT = 0.5
#: ... when that is at least this many sketch words.
MIN_HITS = 6
#: At most this many other reviews are compared in full per text (the best by containment).
MAX_MATCHES = 5


def _rank(word: str) -> int:
    return int.from_bytes(hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest(), "big")


def rare_stems(text: str) -> set[str]:
    """The text's rare word stems, as sketches read them (rarity from the bundled samples' reviews, fixed)."""
    from grebench.bench._copies import bundled_background, stems
    from grebench.bench._orderfree import RARE_SHARE

    background = bundled_background()
    limit = RARE_SHARE * len(background.seen)
    return {w for w in stems(text) if len(w) >= 3 and not w.isdigit() and background.words.get(w, 0) <= limit}


def sketch(text: str) -> tuple[list[str], int]:
    """The bottom-k sketch of a text's rare stems, and how many rare stems it has."""
    words = rare_stems(text)
    return sorted(words, key=_rank)[:SKETCH_SIZE], len(words)


def update_sketches(store: Store) -> int:
    """Sketch every review version without a current sketch; how many were made (0 on a store it cannot write)."""
    rows = store.rows("SELECT v.review_id, v.version, v.content_sha256, v.text FROM review_versions v "
                      "LEFT JOIN review_sketches s ON s.review_id = v.review_id AND s.version = v.version "
                      "AND s.content_sha256 = v.content_sha256 AND s.sketch_version = ? "
                      "WHERE s.review_id IS NULL AND v.text IS NOT NULL", [SKETCH_VERSION])
    if not rows:
        return 0
    made = [(r["review_id"], r["version"], r["content_sha256"], *sketch(r["text"])) for r in rows]
    try:
        with store.transaction() as con:
            con.executemany("INSERT OR REPLACE INTO review_sketches VALUES (?, ?, ?, ?, ?, ?)",
                            [[*m, SKETCH_VERSION] for m in made])
    except Exception:  # a read-only store (a reader): the index stays as it is
        return 0
    return len(made)


def similar_reviews(store: Store, texts: Sequence[tuple[str, str]],
                    exclude: Mapping[str, Collection[str]]) -> list[list[tuple[str, str]]]:
    """For each (paper id, text): the public reviews of *other* papers (not in ``exclude[paper id]``: the paper and
    its linked versions) whose sketch the text holds at least :data:`MIN_CONTAINMENT` of, as (paper id, review
    text), best first."""
    update_sketches(store)
    words = [(i, w) for i, (_, text) in enumerate(texts) for w in rare_stems(text)]
    out: list[list[tuple[str, str]]] = [[] for _ in texts]
    if not words:
        return out
    rows = store.rows(
        "WITH q AS (SELECT unnest(?::INTEGER[]) AS i, unnest(?::VARCHAR[]) AS w), "
        "s AS (SELECT review_id, version, len(words) AS size, unnest(words) AS w FROM review_sketches "
        "  WHERE sketch_version = ?), "
        "hits AS (SELECT q.i, s.review_id, s.version, count(*) AS hits, any_value(s.size) AS size FROM q "
        "  JOIN s USING (w) GROUP BY ALL HAVING count(*) >= ?) "
        "SELECT h.i, r.paper_id, v.text, h.hits / h.size AS containment FROM hits h "
        "JOIN reviews r USING (review_id) JOIN review_versions v ON v.review_id = h.review_id "
        "AND v.version = h.version WHERE h.hits >= ? * h.size ORDER BY h.i, containment DESC, r.paper_id",
        [[i for i, _ in words], [w for _, w in words], SKETCH_VERSION, MIN_HITS, MIN_CONTAINMENT])
    for row in rows:
        i = int(row["i"])
        if row["paper_id"] in exclude.get(texts[i][0], ()) or len(out[i]) >= MAX_MATCHES:
            continue
        out[i].append((row["paper_id"], row["text"]))
    return out

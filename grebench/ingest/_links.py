"""Finding versions of the same work across venues and years, in the store: candidates, the rule, the links and
possible links written.

The rule on a pair is :func:`grebench.ingest._evidence.assess`: title, abstract, first pages, authors and keywords
(:mod:`grebench.ingest._similarity`, issues 31 and 48), then what a disguise does not rewrite cheaply, the MinHash
fingerprints of the extracted body, captions and references (:mod:`grebench.ingest._fingerprints`, issue 62).  A pair
above the "possible" bar only is flagged (:class:`grebench.store.LinkFlag`): until the operator decides (``grebench
links --decide``) it counts as linked, so the paper's generations are not sealed and the copy check reads the other
paper's reviews.

Comparing every pair of a 20,000-paper season is 2*10^8 comparisons of long texts; instead the candidates of a paper
are the papers sharing at least :data:`MIN_SHARED` of its rare words (a word in at most :data:`MAX_DF_SHARE` of the
papers), found by a join in the store (an inverted index), and only the best :data:`MAX_CANDIDATES` of those are
compared in full; the papers sharing a fingerprint's locality-sensitive-hashing key are added to them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import TypedDict

from grebench.ingest._abstract_view import (
    AbstractReader,
    AbstractViewReport,
    abstract_flags,
    calibration_pairs,
    calibration_sample,
)
from grebench.ingest._evidence import Evidence, assess, evidence
from grebench.ingest._fingerprints import fingerprint_candidates, load_fingerprints, refresh_fingerprints
from grebench.ingest._similarity import BODY_CHARS, PaperText, keyword_rarity
from grebench.store import EXPLICIT, Link, LinkFlag, Store, put_flags, put_links, utcnow

MIN_SHARED = 3              # rare words two papers must share to be compared
MAX_DF_SHARE = 0.01         # a word in more than this share of the papers (and more than MIN_DF) is not a key
MIN_DF = 20
MAX_CANDIDATES = 20         # papers compared in full per paper
FINGERPRINT_BATCH = 200     # texts fingerprinted per transaction before linking (a store's first run: all of them)


class _WordIndex:
    """The rare-word index of the stored papers (temp tables), queried for the candidates of some papers, then
    dropped: built once per link even when the LM view of the abstracts asks for its calibration pairs too."""

    def __init__(self, store: Store) -> None:
        self.con = store.con
        papers = int(store.scalar("SELECT count(*) FROM papers") or 0)
        max_df = max(MIN_DF, int(papers * MAX_DF_SHARE))
        self.con.execute(
            "CREATE OR REPLACE TEMP TABLE _link_words AS SELECT DISTINCT paper_id, w FROM ("
            "SELECT p.paper_id, unnest(regexp_split_to_array(lower(p.title || ' ' || coalesce(p.abstract, '') "
            "|| ' ' || coalesce(p.keywords, '') || ' ' || coalesce(p.authors, '') || ' ' "
            "|| coalesce(left(t.text, ?), '')), '[^[:alnum:]]+')) AS w "
            "FROM papers p LEFT JOIN paper_texts t ON t.paper_id = p.paper_id AND t.status = 'ok') "
            "WHERE length(w) > 3", [BODY_CHARS])
        self.con.execute("CREATE OR REPLACE TEMP TABLE _link_keys AS SELECT w.paper_id, w.w FROM _link_words w "
                         "JOIN (SELECT w FROM _link_words GROUP BY w HAVING count(*) <= ?) k USING (w)", [max_df])

    def candidates(self, paper_ids: Collection[str] | None, min_shared: int = MIN_SHARED,
                   limit: int = MAX_CANDIDATES, among: Collection[str] | None = None,
                   ranked: bool = False) -> list[tuple[str, str]]:
        """Pairs (paper, candidate) sharing at least ``min_shared`` rare words, the best ``limit`` per paper (the
        candidates only ``among`` these papers when given), ordered by paper, then by candidate id (``ranked``: the
        most shared words first)."""
        want = "" if paper_ids is None else " AND a.paper_id IN (SELECT unnest(?::VARCHAR[]))"
        if among is not None:
            want += " AND b.paper_id IN (SELECT unnest(?::VARCHAR[]))"
        rows = self.con.execute(
            f"""SELECT paper_id, other FROM (
                    SELECT a.paper_id, b.paper_id AS other, count(*) AS shared,
                           row_number() OVER (PARTITION BY a.paper_id ORDER BY count(*) DESC, b.paper_id) AS k
                    FROM _link_keys a JOIN _link_keys b ON a.w = b.w AND a.paper_id <> b.paper_id WHERE true {want}
                    GROUP BY a.paper_id, b.paper_id HAVING count(*) >= ?)
                WHERE k <= ? ORDER BY paper_id, {"k" if ranked else "other"}""",
            ([sorted(paper_ids)] if paper_ids is not None else []) + ([sorted(among)] if among is not None else [])
            + [min_shared, limit]).fetchall()
        return [(a, b) for a, b in rows]

    def close(self) -> None:
        """Drop the temp tables."""
        self.con.execute("DROP TABLE IF EXISTS _link_words")
        self.con.execute("DROP TABLE IF EXISTS _link_keys")


def _candidates(store: Store, paper_ids: Collection[str] | None) -> list[tuple[str, str]]:
    """Pairs (paper, candidate) sharing at least MIN_SHARED rare words, the best MAX_CANDIDATES per paper.

    The word index is built in the store (one row per paper and distinct word) and joined on itself restricted to
    rare words: linear in the papers' words, never a comparison of every pair.
    """
    index = _WordIndex(store)
    try:
        return index.candidates(paper_ids)
    finally:
        index.close()


#: Rare words a paper must share with another to be one of its near papers (:func:`near_papers`): one, since the
#: papers whose reviews it may carry are read by information afterwards, not linked.
NEAR_MIN_SHARED = 1


def near_papers(store: Store, paper_ids: Collection[str], among: Collection[str], limit: int
                ) -> dict[str, list[str]]:
    """paper id -> the papers ``among`` these sharing the most rare words with it (at most ``limit``, most first):
    the linking code's rare-word index, with a lower bar (:data:`NEAR_MIN_SHARED`), for the near-paper copy check
    (issue 62: the papers whose public reviews a review of a disguised resubmission may carry)."""
    if not paper_ids or not among:
        return {}
    index = _WordIndex(store)
    try:
        pairs = index.candidates(paper_ids, NEAR_MIN_SHARED, limit, among, ranked=True)
    finally:
        index.close()
    out: dict[str, list[str]] = {}
    for a, b in pairs:
        out.setdefault(a, []).append(b)
    return out


@dataclass
class FoundEvidence:
    """What :func:`find_all` found: links, possible links, and what the LM view of the abstracts did (None: off)."""

    links: list[Link]
    flags: list[LinkFlag]
    abstracts: AbstractViewReport | None = None


def find_all(store: Store, paper_ids: Collection[str] | None = None,
             abstracts: AbstractReader | None = None) -> FoundEvidence:
    """Links and possible links by similarity between these papers (all when None) and every stored paper.

    The extracted texts not fingerprinted yet are fingerprinted first (every stored paper's: a store from before the
    fingerprints is caught up once); the candidates are the rare-word index's and the fingerprint keys'.  With
    ``abstracts`` (the evaluation LM's view, :mod:`grebench.ingest._abstract_view`), the candidate pairs nothing
    else linked or flagged are read by it too, against bars calibrated on distinct pairs of their venues.
    """
    refresh_fingerprints(store)
    index = _WordIndex(store)
    try:
        pairs = sorted(set(index.candidates(paper_ids)) | set(fingerprint_candidates(store, paper_ids)))
        venue = {r["paper_id"]: r["venue"] for r in store.rows(
            "SELECT paper_id, coalesce(venue, venue_id) AS venue FROM papers")} if abstracts is not None else {}
        by_venue: dict[str, set[str]] = {}
        for pid, name in venue.items():
            by_venue.setdefault(name, set()).add(pid)
        # the venues of the pairs: their own candidate pairs are the distinct pairs the LM view's bars rest on
        touched = {venue[x] for pair in pairs for x in pair if x in venue}
        sample = [p for name in sorted(touched) for p in calibration_sample(by_venue[name])]
        calibrating = index.candidates(sample) if sample else []
    finally:
        index.close()
    known = {(r["paper_id"], r["version_id"]) for r in store.rows(
        "SELECT paper_id, version_id FROM paper_versions")} if calibrating else set()
    calibration = calibration_pairs(calibrating, venue, known)
    ids = sorted({x for pair in [*pairs, *(p for ps in calibration.values() for p in ps)] for x in pair})
    rows = store.rows(
        "SELECT p.paper_id, p.title, p.abstract, p.authors, p.keywords, p.reviews_public_at, left(t.text, ?) AS body "
        "FROM papers p LEFT JOIN paper_texts t ON t.paper_id = p.paper_id AND t.status = 'ok' "
        "WHERE p.paper_id IN (SELECT unnest(?::VARCHAR[]))", [BODY_CHARS, ids])
    texts = {r["paper_id"]: PaperText(r["paper_id"], r["title"], r["abstract"], r["authors"], r["keywords"],
                                      r["body"]) for r in rows}
    public = {r["paper_id"]: r["reviews_public_at"] for r in rows}
    prints = load_fingerprints(store, {x for pair in pairs for x in pair})
    rarity = keyword_rarity(store)
    seen: set[tuple[str, str]] = set()
    links: list[Link] = []
    flags: list[LinkFlag] = []
    pending: list[tuple[PaperText, PaperText, Evidence]] = []
    for a, b in pairs:
        key = (min(a, b), max(a, b))
        if key in seen or a not in texts or b not in texts:
            continue
        seen.add(key)
        pair = (prints.get(a, {}), prints.get(b, {}))
        found = assess(texts[a], texts[b], rarity, pair)
        if isinstance(found, Link):
            links.append(found)
        elif public[a] is None or public[a] != public[b]:
            # a flag only matters where it could move a paper's public-since date: two papers whose reviews came
            # out together (one venue's round) are not flagged
            if found is not None:
                flags.append(found)
            elif abstracts is not None and texts[a].words is not None and texts[b].words is not None:
                pending.append((texts[a], texts[b], evidence(texts[a], texts[b], rarity, pair)))
    if abstracts is None:
        return FoundEvidence(links, flags)
    decided = {(min(pair), max(pair)) for pair in [*((x.paper_id, x.linked_id) for x in links),
                                                  *((x.paper_id, x.linked_id) for x in flags)]}
    read = {v: [(texts[a], texts[b]) for a, b in ps if (a, b) not in decided and texts[a].words is not None
                and texts[b].words is not None] for v, ps in calibration.items()}
    more, report = abstract_flags(abstracts, pending, read, venue)
    return FoundEvidence(links, flags + more, report)


def find_evidence(store: Store, paper_ids: Collection[str] | None = None) -> tuple[list[Link], list[LinkFlag]]:
    """Links and possible links by similarity between these papers (all when None) and every stored paper, without
    the LM view (:func:`find_all`)."""
    found = find_all(store, paper_ids)
    return found.links, found.flags


def find_links(store: Store, paper_ids: Collection[str] | None = None) -> list[Link]:
    """Links by similarity between these papers (all when None) and every stored paper (:func:`find_evidence`)."""
    return find_evidence(store, paper_ids)[0]


def explicit_links(pairs: Iterable[tuple[str, str]]) -> list[Link]:
    """Links the source named (paper id, earlier version id)."""
    return [Link(a, b, EXPLICIT) for a, b in pairs if a and b and a != b]


#: What a paper's links were computed from: its metadata and, since links read the paper's text (issue 48), the PDF
#: whose text was extracted: a text extracted after the paper was linked (a rerun after a crash, a PDF that failed
#: before) makes its links be computed again, so the links do not depend on the order things arrived in.
_CHECK_KEY = ("p.content_sha256 || CASE WHEN t.status = 'ok' THEN '+text:' || coalesce(t.pdf_sha256, t.pdf_ref) "
              "ELSE '' END")


def unchecked_paper_ids(store: Store) -> set[str]:
    """Papers whose current version was never compared with the store (new, changed, or ingested by a run that
    stopped before linking)."""
    return {r["paper_id"] for r in store.rows(
        f"SELECT p.paper_id FROM papers p LEFT JOIN paper_link_checks c ON c.paper_id = p.paper_id "
        f"LEFT JOIN paper_texts t ON t.paper_id = p.paper_id WHERE c.content_sha256 IS DISTINCT FROM {_CHECK_KEY}")}


class LinkCounts(TypedDict, total=False):
    """The similarity links recomputed for some papers (:func:`link_papers`); an ingest that linked none: no key."""

    papers: int
    links: int
    by_method: dict[str, int]
    links_total: int
    flagged: int            # new possible links (issue 62): held unsealed until decided
    flagged_undecided: int  # every undecided possible link in the store
    abstracts: AbstractViewReport  # what the LM view of the abstracts read and flagged (absent: off)


def link_papers(store: Store, paper_ids: Collection[str] | None = None,
                explicit: Iterable[tuple[str, str]] = (), abstracts: AbstractReader | None = None) -> LinkCounts:
    """Recompute the similarity links and possible links of these papers (all when None) against every stored
    paper, add the explicit ones, and unseal what the links show was public, or may have been; one transaction.
    ``abstracts``: the evaluation LM's view of the abstracts, read on the candidate pairs nothing else decides
    (:func:`find_all`; None: not read).  The summary: links by method, flags."""
    named = explicit_links(explicit)
    # the texts not fingerprinted yet, in short transactions of their own: a store from before the fingerprints
    # (thousands of texts, ~60 ms each) is caught up without one long transaction holding the writer
    while True:
        with store.transaction():
            if refresh_fingerprints(store, limit=FINGERPRINT_BATCH) < FINGERPRINT_BATCH:
                break
    with store.transaction():
        result = find_all(store, paper_ids, abstracts) if paper_ids is None or paper_ids else FoundEvidence([], [])
        found, flags = result.links, result.flags
        replace = set(paper_ids) if paper_ids is not None else {r["paper_id"] for r in store.rows(
            "SELECT paper_id FROM papers")}
        written = put_links(store, [*found, *named], replace_computed_of=replace)
        flagged = put_flags(store, flags, replace_of=replace)
        store.con.execute(f"INSERT OR REPLACE INTO paper_link_checks SELECT p.paper_id, {_CHECK_KEY}, ? FROM papers p "
                          "LEFT JOIN paper_texts t ON t.paper_id = p.paper_id "
                          "WHERE p.paper_id IN (SELECT unnest(?::VARCHAR[]))", [utcnow(), sorted(replace)])
    by_method = Counter(link.method for link in [*found, *named])
    counts: LinkCounts = {
        "papers": len(replace), "links": written, "by_method": dict(sorted(by_method.items())),
        "links_total": int(store.scalar("SELECT count(*) FROM paper_links") or 0), "flagged": flagged,
        "flagged_undecided": int(store.scalar("SELECT count(*) FROM paper_link_flags WHERE decision IS NULL") or 0)}
    if result.abstracts is not None:
        counts["abstracts"] = result.abstracts
    return counts

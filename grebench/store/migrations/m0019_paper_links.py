"""Versions of the same work across venues and years, and the date from which any of them had public reviews.

A paper rejected at one venue and resubmitted to the next has public reviews from the first round under another
paper id. ``paper_links`` holds one row per pair of papers found to be the same work (``paper_id`` < ``linked_id``):
``method`` says how (``explicit``: the source named the earlier version; ``title``, ``title+abstract``,
``abstract``: by similarity, computed at ingest and recomputable with ``grebench links``). ``paper_link_checks``
says which version of each paper (its metadata hash) was last compared with the store: an ingest links every paper
not checked yet, so a run killed before linking (or a store from before this migration) is linked by the next.
``paper_versions`` is the transitive closure (every other version of a paper's work) and ``paper_public_since`` the
earliest date any version's reviews were public: the one date the contamination window and sealing use
(``clean_pairs`` is redefined on it).
"""

LINKS_TABLE = """
CREATE TABLE IF NOT EXISTS paper_links (
    paper_id VARCHAR NOT NULL,
    linked_id VARCHAR NOT NULL,
    method VARCHAR NOT NULL,             -- explicit | title | title+abstract | abstract
    title_similarity DOUBLE,
    abstract_similarity DOUBLE,
    linked_at TIMESTAMP NOT NULL,
    PRIMARY KEY (paper_id, linked_id)
)
"""
CHECKS_TABLE = """
CREATE TABLE IF NOT EXISTS paper_link_checks (
    paper_id VARCHAR PRIMARY KEY,
    content_sha256 VARCHAR NOT NULL,     -- the paper's metadata hash when its links were computed
    checked_at TIMESTAMP NOT NULL
)
"""
VERSIONS_VIEW = """
CREATE OR REPLACE VIEW paper_versions AS
WITH RECURSIVE edges(a, b) AS (
    SELECT paper_id, linked_id FROM paper_links UNION SELECT linked_id, paper_id FROM paper_links),
reach(paper_id, version_id) AS (
    SELECT a, b FROM edges UNION SELECT r.paper_id, e.b FROM reach r JOIN edges e ON e.a = r.version_id)
SELECT paper_id, version_id FROM reach WHERE paper_id <> version_id
"""
PUBLIC_SINCE_VIEW = """
CREATE OR REPLACE VIEW paper_public_since AS
SELECT p.paper_id, least(p.reviews_public_at, min(q.reviews_public_at)) AS public_since
FROM papers p
LEFT JOIN paper_versions v ON v.paper_id = p.paper_id
LEFT JOIN papers q ON q.paper_id = v.version_id
GROUP BY p.paper_id, p.reviews_public_at
"""
CLEAN_PAIRS_VIEW = """
CREATE OR REPLACE VIEW clean_pairs AS
SELECT g.candidate, g.paper_id, g.generation_id, g.sealed,
       (g.sealed OR (c.cutoff IS NULL AND c.kind NOT IN ('imported', 'submitted'))
        OR (c.cutoff IS NOT NULL AND (ps.public_since IS NULL
                                      OR c.cutoff < CAST(ps.public_since AS DATE)))) AS clean
FROM generations g
JOIN candidates c ON c.name = g.candidate
JOIN paper_public_since ps ON ps.paper_id = g.paper_id
"""

#: In order: what a store, or a reader built from an export (``grebench.site``), needs for the one public-since date.
STATEMENTS = (LINKS_TABLE, CHECKS_TABLE, VERSIONS_VIEW, PUBLIC_SINCE_VIEW, CLEAN_PAIRS_VIEW)
SQL = ";".join(STATEMENTS)

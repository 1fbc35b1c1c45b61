"""Resubmissions linked by what cannot be rewritten cheaply, and possible links held until decided (issue 62 §3).

``paper_fingerprints``: per paper and part of its extracted text (``body``, ``captions``, ``references``; ``none``
when no part was long enough), the MinHash values of its word shingles and the hash of the text they were made from.
``paper_fingerprint_keys``: their locality-sensitive-hashing band keys, joined to find the papers that may match.

``paper_link_flags``: a pair of papers that may be versions of one work (evidence above the "possible" bar, below
the link bar), with the reason shown to the operator.  Until the operator decides (``decision`` ``same`` or
``distinct``, ``grebench links --decide``), and after a ``same``, the pair counts as linked wherever versions
count: ``paper_versions`` (and so the public-since date, sealing, the contamination window and the copy check)
reads the flags that are not decided ``distinct``, and a ``distinct`` decision also sets aside any link of the pair
(the operator's word is the last).
"""

from grebench.store.migrations.m0019_paper_links import CLEAN_PAIRS_VIEW, PUBLIC_SINCE_VIEW

FINGERPRINTS_TABLE = """
CREATE TABLE IF NOT EXISTS paper_fingerprints (
    paper_id VARCHAR NOT NULL,
    part VARCHAR NOT NULL,               -- body | captions | references | none
    text_key VARCHAR NOT NULL,           -- what it was made from: fingerprint version, PDF, extraction time
    shingles INTEGER NOT NULL,
    minhash BLOB NOT NULL,               -- uint64 little-endian MinHash values
    made_at TIMESTAMP NOT NULL,
    PRIMARY KEY (paper_id, part)
)
"""
KEYS_TABLE = """
CREATE TABLE IF NOT EXISTS paper_fingerprint_keys (
    paper_id VARCHAR NOT NULL,
    part VARCHAR NOT NULL,
    key BIGINT NOT NULL
)
"""
FLAGS_TABLE = """
CREATE TABLE IF NOT EXISTS paper_link_flags (
    paper_id VARCHAR NOT NULL,
    linked_id VARCHAR NOT NULL,
    reason VARCHAR NOT NULL,             -- what was found, in words, for the operator
    evidence_json VARCHAR NOT NULL,      -- the similarities behind it
    flagged_at TIMESTAMP NOT NULL,
    decision VARCHAR,                    -- NULL (undecided) | same | distinct
    decided_at TIMESTAMP,
    decision_note VARCHAR,
    PRIMARY KEY (paper_id, linked_id)
)
"""
VERSIONS_VIEW = """
CREATE OR REPLACE VIEW paper_versions AS
WITH RECURSIVE pairs(a, b) AS (
    SELECT l.paper_id, l.linked_id FROM paper_links l WHERE NOT EXISTS (
        SELECT 1 FROM paper_link_flags f WHERE f.paper_id = l.paper_id AND f.linked_id = l.linked_id
        AND f.decision = 'distinct')
    UNION SELECT paper_id, linked_id FROM paper_link_flags WHERE decision IS DISTINCT FROM 'distinct'),
edges(a, b) AS (SELECT a, b FROM pairs UNION SELECT b, a FROM pairs),
reach(paper_id, version_id) AS (
    SELECT a, b FROM edges UNION SELECT r.paper_id, e.b FROM reach r JOIN edges e ON e.a = r.version_id)
SELECT paper_id, version_id FROM reach WHERE paper_id <> version_id
"""

#: In order: the tables and the views that read them (the public-since date and the clean pairs, as in m0019).
STATEMENTS = (FINGERPRINTS_TABLE, KEYS_TABLE, FLAGS_TABLE, VERSIONS_VIEW, PUBLIC_SINCE_VIEW, CLEAN_PAIRS_VIEW)
SQL = ";".join(STATEMENTS)

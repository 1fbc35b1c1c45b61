"""Board versions (issue 34): every publish of the boards is kept, dated and immutable.

A row is written once by the site build (:func:`grebench.site.publish_version`) and never updated: the site writes
``leaderboard_json`` and ``page_html`` verbatim under ``versions/<version_id>/`` on every build, so what a reader saw
at a version's URL never changes.  A build whose boards equal the latest version's adds no row (it keeps that one).
"""

SQL = """
CREATE TABLE IF NOT EXISTS board_versions (
    version_id VARCHAR PRIMARY KEY,        -- 20261126T193005Z-1a2b3c4d: publish time (UTC) and content hash
    published_at TIMESTAMP NOT NULL,
    content_sha256 VARCHAR NOT NULL,       -- of the boards as published (leaderboard.json's "boards")
    previous_id VARCHAR,                   -- the version this one followed (NULL for the first)
    leaderboard_json VARCHAR NOT NULL,     -- the exact text of versions/<id>/leaderboard.json
    basis_json VARCHAR NOT NULL,           -- what the boards stood on: papers, reference review versions, settings
    changes_json VARCHAR,                  -- what changed since previous_id (NULL for the first)
    page_html VARCHAR NOT NULL             -- the exact text of versions/<id>/index.html
)
"""

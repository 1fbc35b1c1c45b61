"""Rare-word sketches of every public review version (issue 48): the index through which the copy check compares a
text with every public review in the store, not only with the reviews of its paper and its linked versions.

``review_sketches``: per review version, the stems of its bottom-k rare words (``grebench.bench._sketches``) and how
many rare words it has.  Filled lazily by the copy check for versions without a row (keyed by the text's hash, so a
changed text is sketched again).
"""

SQL = """
CREATE TABLE IF NOT EXISTS review_sketches (
    review_id VARCHAR NOT NULL,
    version INTEGER NOT NULL,
    content_sha256 VARCHAR NOT NULL,
    words VARCHAR[] NOT NULL,
    rare_words INTEGER NOT NULL,
    sketch_version VARCHAR NOT NULL,
    PRIMARY KEY (review_id, version)
)
"""

"""Per-line attribution of scores (issue 35): what each judgment line of a scored review adds to its score.

One row per (score key, candidate line): ``contribution`` = log P(y | x, s) − log P(y | x without the line, s) in
nats (``method`` ``leave-one-out``; docs/scoring.md says why the decomposition is not exact).  ``generation_id``
is the generation the score key scored, so a new review of the same pair replaces its rows.  The rows travel with
the scores in snapshots.
"""

SQL = """
CREATE TABLE IF NOT EXISTS line_attribution (
    metric VARCHAR NOT NULL,
    estimator VARCHAR NOT NULL,
    preprocessor VARCHAR NOT NULL,
    candidate VARCHAR NOT NULL,
    paper_id VARCHAR NOT NULL,
    reference_review_id VARCHAR NOT NULL,
    generation_id VARCHAR NOT NULL,
    line_no INTEGER NOT NULL,              -- 0-based position among the candidate's judgment lines
    line VARCHAR NOT NULL,                 -- the judgment line
    contribution DOUBLE NOT NULL,          -- nats the score loses when the line is left out
    method VARCHAR NOT NULL,               -- leave-one-out
    created_at TIMESTAMP NOT NULL,
    PRIMARY KEY (metric, estimator, preprocessor, candidate, paper_id, reference_review_id, line_no)
)
"""

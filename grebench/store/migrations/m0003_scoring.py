"""Judgment lines, the log-prob cache, synopses and per-pair scores."""

SQL = """
CREATE TABLE judgments (
    text_sha256 VARCHAR NOT NULL,          -- hash of the review text that was preprocessed
    preprocessor VARCHAR NOT NULL,         -- rules | imported | litellm:MODEL (with prompt version)
    lines_json VARCHAR,                    -- ["The reviewer appreciates ...", ...]
    status VARCHAR NOT NULL,               -- ok | rejected | failed
    error VARCHAR,
    created_at TIMESTAMP NOT NULL,
    PRIMARY KEY (text_sha256, preprocessor)
);
CREATE TABLE synopses (
    paper_id VARCHAR NOT NULL,
    kind VARCHAR NOT NULL,                 -- abstract | assw
    producer VARCHAR NOT NULL,             -- who made it (litellm:MODEL@prompt) or 'abstract'
    text VARCHAR,
    status VARCHAR NOT NULL,
    error VARCHAR,
    created_at TIMESTAMP NOT NULL,
    PRIMARY KEY (paper_id, kind, producer)
);
CREATE TABLE logprob_cache (
    request_key VARCHAR PRIMARY KEY,       -- sha256 of the canonical request
    estimator VARCHAR NOT NULL,
    prompt_version VARCHAR NOT NULL,
    logprob DOUBLE NOT NULL,
    n_tokens INTEGER NOT NULL,
    created_at TIMESTAMP NOT NULL
);
CREATE TABLE scores (
    metric VARCHAR NOT NULL,               -- gem | gem-s | gem-s-assw | gem-raw
    estimator VARCHAR NOT NULL,
    preprocessor VARCHAR NOT NULL,
    prompt_version VARCHAR NOT NULL,
    candidate VARCHAR NOT NULL,
    paper_id VARCHAR NOT NULL,
    reference_review_id VARCHAR NOT NULL,
    generation_id VARCHAR NOT NULL,
    conditional DOUBLE NOT NULL,           -- log P(y | x, s)
    marginal DOUBLE NOT NULL,              -- log P(y | s)
    pmi DOUBLE NOT NULL,                   -- conditional - marginal
    n_tokens INTEGER NOT NULL,
    created_at TIMESTAMP NOT NULL,
    PRIMARY KEY (metric, estimator, preprocessor, candidate, paper_id, reference_review_id)
)
"""

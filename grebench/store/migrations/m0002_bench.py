"""Candidates, the human-baseline split, and generations (every candidate review)."""

SQL = """
CREATE TABLE candidates (
    name VARCHAR PRIMARY KEY,
    kind VARCHAR NOT NULL,                 -- llm | human | control
    model VARCHAR,                         -- litellm model string
    api_base VARCHAR,                      -- OpenAI-compatible base URL (optional)
    family VARCHAR,                        -- model family, for the judges' self-preference guard
    released DATE,
    cutoff DATE,                           -- training-data cutoff: papers public before it are contaminated
    api_key_env VARCHAR,                   -- NAME of the environment variable holding the key, never the key
    params_json VARCHAR NOT NULL,
    description VARCHAR,
    submitter VARCHAR,
    updated_at TIMESTAMP NOT NULL
);
CREATE TABLE baseline_splits (
    paper_id VARCHAR PRIMARY KEY,
    candidate_review_id VARCHAR NOT NULL,  -- the human review that plays the candidate
    reference_review_ids_json VARCHAR NOT NULL,  -- the others: references for every candidate
    seed INTEGER NOT NULL,
    created_at TIMESTAMP NOT NULL
);
CREATE TABLE generations (
    generation_id VARCHAR PRIMARY KEY,     -- hash of (candidate, paper, prompt version, params, source)
    candidate VARCHAR NOT NULL,
    paper_id VARCHAR NOT NULL,
    prompt_version VARCHAR NOT NULL,
    params_json VARCHAR NOT NULL,
    source_review_id VARCHAR,              -- for human-derived candidates and controls
    status VARCHAR NOT NULL,               -- ok | failed
    text VARCHAR,
    sections_json VARCHAR,
    parse_ok BOOLEAN,
    flags_json VARCHAR,
    error VARCHAR,
    attempts INTEGER NOT NULL DEFAULT 0,
    tokens_in INTEGER,
    tokens_out INTEGER,
    cost_usd DOUBLE,
    latency_s DOUBLE,
    generated_at TIMESTAMP NOT NULL,
    sealed BOOLEAN NOT NULL DEFAULT false  -- generated before the paper's reviews were public
)
"""

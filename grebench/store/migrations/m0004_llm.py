"""The LLM call cache, the link from a generation to its call, and the clean-pairs view."""

SQL = """
CREATE TABLE llm_calls (
    request_key VARCHAR PRIMARY KEY,       -- sha256 of the canonical request (never includes the API key)
    purpose VARCHAR NOT NULL,              -- review | preprocess | synopsis | judge | control
    model VARCHAR NOT NULL,
    api_base VARCHAR,
    prompt_version VARCHAR NOT NULL,
    params_json VARCHAR NOT NULL,
    messages_sha256 VARCHAR NOT NULL,
    status VARCHAR NOT NULL,               -- ok | failed (only ok rows are served from the cache)
    text VARCHAR,
    error VARCHAR,
    tokens_in INTEGER,
    tokens_out INTEGER,
    cost_usd DOUBLE,
    latency_s DOUBLE,
    attempts INTEGER NOT NULL,
    truncated BOOLEAN NOT NULL DEFAULT false,
    logprobs_json VARCHAR,
    generated_at TIMESTAMP NOT NULL
);
ALTER TABLE generations ADD COLUMN request_key VARCHAR;
CREATE VIEW clean_pairs AS
SELECT g.candidate, g.paper_id, g.generation_id, g.sealed,
       (g.sealed OR c.cutoff IS NULL OR p.reviews_public_at IS NULL
        OR c.cutoff < CAST(p.reviews_public_at AS DATE)) AS clean
FROM generations g
JOIN candidates c ON c.name = g.candidate
JOIN papers p ON p.paper_id = g.paper_id
"""

"""Model-endpoint submissions and the changelog of board changes.

The app writes submissions to a separate small queue file (``DATA_DIR/queue.duckdb``, same table); the
scheduler copies accepted ones into this table of the main store (always without the key ciphertext).
"""

SUBMISSIONS_DDL = """
CREATE TABLE IF NOT EXISTS submissions (
    id VARCHAR PRIMARY KEY,
    submitter VARCHAR NOT NULL,            -- normalised (lower-case) contact identity used for the rate limit
    contact VARCHAR NOT NULL,
    model_name VARCHAR NOT NULL,           -- becomes the candidate name
    model_string VARCHAR,                  -- litellm model string (one of model_string / base_url)
    base_url VARCHAR,                      -- OpenAI-compatible base URL as submitted
    normalised_url VARCHAR,                -- scheme://host:port/path, lower-case host
    params_json VARCHAR NOT NULL,
    dedup_key VARCHAR NOT NULL,            -- sha256 of (normalised url or model string, model name, params)
    released DATE,
    cutoff DATE NOT NULL,
    status VARCHAR NOT NULL,               -- queued | running | finished | failed
    reason VARCHAR,                        -- why it failed (or a note)
    key_ciphertext VARCHAR,                -- Fernet token of the API key, NULL when none or held in memory
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
)
"""

BOARD_CHANGES_DDL = """
CREATE TABLE IF NOT EXISTS board_changes (
    changed_at TIMESTAMP NOT NULL,
    kind VARCHAR NOT NULL,                 -- candidate_added | submission | estimator | note
    subject VARCHAR,
    detail VARCHAR
)
"""

SQL = SUBMISSIONS_DDL + ";" + BOARD_CHANGES_DDL

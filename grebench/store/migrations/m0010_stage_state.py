"""What each stage last computed from which inputs, so an unchanged rerun can skip the work (and write nothing)."""

SQL = """
CREATE TABLE stage_state (
    stage VARCHAR NOT NULL,                -- panel | site | bench | ...
    scope VARCHAR NOT NULL,                -- e.g. a venue id, or '*' for the whole stage
    fingerprint VARCHAR NOT NULL,          -- hash of everything the stage read (inputs, settings, code version)
    summary_json VARCHAR,                  -- the stage's summary for that scope, returned again when skipped
    updated_at TIMESTAMP NOT NULL,
    PRIMARY KEY (stage, scope)
)
"""

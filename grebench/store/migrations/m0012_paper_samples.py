"""The paper sample the last main job worked on (boards say which papers they cover)."""

SQL = """
CREATE TABLE paper_samples (
    venue_id VARCHAR NOT NULL,
    paper_id VARCHAR PRIMARY KEY,
    sample_json VARCHAR NOT NULL,          -- {description, size, eligible}
    created_at TIMESTAMP NOT NULL
)
"""

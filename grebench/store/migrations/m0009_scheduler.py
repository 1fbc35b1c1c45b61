"""Scheduler job state and the register of snapshots cut from the store."""

SQL = """
CREATE TABLE jobs (
    job_id VARCHAR PRIMARY KEY,            -- poll | generate | score | queue | site | snapshot
    kind VARCHAR NOT NULL,
    last_started_at TIMESTAMP,
    last_finished_at TIMESTAMP,
    status VARCHAR NOT NULL,               -- never | running | ok | failed | interrupted (the process died in it)
    last_error VARCHAR,
    runs INTEGER NOT NULL DEFAULT 0,       -- finished runs (ok or failed)
    last_run_id VARCHAR,                   -- the runs row of the latest start
    last_summary_json VARCHAR
);
CREATE TABLE snapshots (
    venue_id VARCHAR NOT NULL,
    venue_year INTEGER,
    slug VARCHAR NOT NULL,                 -- directory name under DATA_DIR/snapshots
    path VARCHAR PRIMARY KEY,              -- one yearly snapshot per venue-year, plus on-demand ones
    manifest_sha256 VARCHAR NOT NULL,
    files INTEGER NOT NULL,
    total_rows BIGINT NOT NULL,
    reason VARCHAR NOT NULL,               -- yearly | on-demand
    created_at TIMESTAMP NOT NULL
)
"""

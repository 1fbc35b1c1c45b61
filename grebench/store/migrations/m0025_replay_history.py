"""Replays (issue 34): a season run day by day on a simulated clock, and the board history it leaves.

``replay_days`` is a replay's progress: a day is ``running`` from its first job until its history is written, then
``done``; a replay started again skips the done days and runs the running one again (its jobs skip what they
finished: nothing is lost or repeated).  ``replay_history`` is each board row on each simulated day.
"""

SQL = """
CREATE TABLE IF NOT EXISTS replay_days (
    season VARCHAR NOT NULL,               -- the season's source spec (season:PATH or season:bundled)
    day TIMESTAMP NOT NULL,                -- the simulated time the day's jobs ran at (naive UTC)
    status VARCHAR NOT NULL,               -- running | done
    papers INTEGER,                        -- papers posted by then (in the store)
    papers_scoreable INTEGER,              -- papers with a human-baseline split (their reviews were public by then)
    papers_scored INTEGER,                 -- papers with at least one score
    sealed_generations INTEGER,            -- generations written before their paper's reviews were public
    review_versions INTEGER,               -- stored review versions (an edit adds one)
    board_version VARCHAR,                 -- the board version published that day (the latest by then)
    jobs_json VARCHAR,                     -- each job's outcome that day
    PRIMARY KEY (season, day)
);
CREATE TABLE IF NOT EXISTS replay_history (
    season VARCHAR NOT NULL,
    day TIMESTAMP NOT NULL,
    board_id VARCHAR NOT NULL,
    metric VARCHAR NOT NULL,
    candidate VARCHAR NOT NULL,
    rank INTEGER,                          -- NULL for references (controls: shown, never ranked)
    score DOUBLE NOT NULL,
    ci95_low DOUBLE, ci95_high DOUBLE,
    papers INTEGER NOT NULL,
    PRIMARY KEY (season, day, board_id, candidate)
)
"""

"""Leaderboards computed once at the end of scoring; the site, the app and the CLI only read them."""

SQL = """
CREATE TABLE boards (
    board_id VARCHAR PRIMARY KEY,          -- readable, unique slug (page names use it)
    venue_id VARCHAR NOT NULL,
    venue VARCHAR,
    metric VARCHAR NOT NULL,
    estimator VARCHAR NOT NULL,            -- the full estimator id (never mixed within a board)
    preprocessor VARCHAR NOT NULL,
    scope VARCHAR NOT NULL,                -- 'all': clean or sealed pairs, 'sealed': LLMs only where sealed
    papers INTEGER NOT NULL,               -- papers with at least one score on this board
    papers_eligible INTEGER,               -- papers of the venue with a human-baseline split
    sample_json VARCHAR,                   -- which paper sample the scores cover (NULL: every eligible paper)
    human_score DOUBLE, human_ci95_low DOUBLE, human_ci95_high DOUBLE,
    bootstrap_samples INTEGER NOT NULL,
    seed BIGINT NOT NULL,
    computed_at TIMESTAMP NOT NULL
);
CREATE TABLE board_rows (
    board_id VARCHAR NOT NULL,
    candidate VARCHAR NOT NULL,
    kind VARCHAR NOT NULL,                 -- llm | human | control | imported
    rank INTEGER,                          -- NULL for reference rows (controls) that are not ranked
    rank_low DOUBLE, rank_high DOUBLE,
    score DOUBLE NOT NULL,
    ci90_low DOUBLE, ci90_high DOUBLE, ci95_low DOUBLE, ci95_high DOUBLE,
    papers INTEGER NOT NULL, pairs INTEGER NOT NULL,
    clean_papers INTEGER, contaminated_papers INTEGER, sealed_share DOUBLE,
    diff_vs_human DOUBLE, p_vs_human DOUBLE,
    cost_usd DOUBLE, latency_s DOUBLE,
    PRIMARY KEY (board_id, candidate)
)
"""

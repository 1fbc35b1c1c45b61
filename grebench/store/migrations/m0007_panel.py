"""The Auto-PRE judge panel: judges, qualification exams, votes, verdicts, debates, rankings, machine metrics."""

SQL = """
CREATE TABLE judges (
    name VARCHAR PRIMARY KEY,
    kind VARCHAR NOT NULL,                 -- reference (no LLM) | llm
    model VARCHAR,                         -- litellm model string (llm judges)
    family VARCHAR,                        -- model family: the judge never votes on its own family's reviews
    description VARCHAR,
    updated_at TIMESTAMP NOT NULL
);
CREATE TABLE judge_exams (
    venue_id VARCHAR NOT NULL,
    judge VARCHAR NOT NULL,
    p_c DOUBLE,                            -- consistency: share of pairs whose preference survives the swap
    p_p DOUBLE,                            -- pertinence: share where the review of this paper wins
    p_s DOUBLE,                            -- self-confidence: 1 if more confident on easy pairs than hard ones
    passed BOOLEAN NOT NULL,
    weight DOUBLE NOT NULL,                -- (p_c + p_p + p_s) / 3, used only when passed
    failed_json VARCHAR NOT NULL,          -- ["consistency", "pertinence"] tests failed
    eta_c DOUBLE,
    eta_p DOUBLE,
    details_json VARCHAR,
    created_at TIMESTAMP NOT NULL,
    PRIMARY KEY (venue_id, judge)
);
CREATE TABLE panel_votes (
    venue_id VARCHAR NOT NULL,
    paper_id VARCHAR NOT NULL,
    candidate_a VARCHAR NOT NULL,
    candidate_b VARCHAR NOT NULL,
    generation_a VARCHAR NOT NULL,
    generation_b VARCHAR NOT NULL,
    judge VARCHAR NOT NULL,
    order_ab VARCHAR NOT NULL,             -- ab: review a shown first | ba: review b shown first
    preference VARCHAR NOT NULL,           -- the answer as given: one (first shown) | two | tie
    confidence DOUBLE,
    reason VARCHAR,
    created_at TIMESTAMP NOT NULL,
    PRIMARY KEY (paper_id, generation_a, generation_b, judge, order_ab)
);
CREATE TABLE panel_verdicts (
    venue_id VARCHAR NOT NULL,
    paper_id VARCHAR NOT NULL,
    candidate_a VARCHAR NOT NULL,
    candidate_b VARCHAR NOT NULL,
    score DOUBLE NOT NULL,                 -- weighted vote in [-1, 1], > 0: a is better
    outcome INTEGER NOT NULL,              -- 1 a better | 0 tie | -1 b better
    debated BOOLEAN NOT NULL,
    flagged BOOLEAN NOT NULL,              -- LLM judges still disagree after debate: for human adjudication
    PRIMARY KEY (paper_id, candidate_a, candidate_b)
);
CREATE TABLE debates (
    paper_id VARCHAR NOT NULL,
    candidate_a VARCHAR NOT NULL,
    candidate_b VARCHAR NOT NULL,
    round INTEGER NOT NULL,
    judge VARCHAR NOT NULL,
    preference VARCHAR NOT NULL,           -- relative to (a, b): one = a better
    reason VARCHAR,
    created_at TIMESTAMP NOT NULL
);
CREATE TABLE panel_rankings (
    venue_id VARCHAR NOT NULL,
    candidate VARCHAR NOT NULL,
    strength DOUBLE NOT NULL,              -- Bradley-Terry log-strength, centred on 0
    ci95_low DOUBLE,
    ci95_high DOUBLE,
    rank INTEGER NOT NULL,
    rank_low INTEGER,
    rank_high INTEGER,
    created_at TIMESTAMP NOT NULL,
    PRIMARY KEY (venue_id, candidate)
);
CREATE TABLE panel_agreement (
    venue_id VARCHAR NOT NULL,
    gem_metric VARCHAR NOT NULL,
    kendall_tau DOUBLE,
    pair_agreement DOUBLE,
    n_pairs INTEGER NOT NULL,
    disagreements_json VARCHAR NOT NULL,
    created_at TIMESTAMP NOT NULL
);
CREATE TABLE machine_metrics (
    text_sha256 VARCHAR PRIMARY KEY,       -- the review text measured
    paper_id VARCHAR NOT NULL,             -- the paper it was measured against (first seen, for constant texts)
    words INTEGER NOT NULL,
    section_coverage DOUBLE NOT NULL,
    specificity DOUBLE NOT NULL,
    abstract_overlap DOUBLE NOT NULL,
    created_at TIMESTAMP NOT NULL
)
"""

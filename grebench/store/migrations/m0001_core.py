"""Papers, reviews with versions, and run records."""

SQL = """
CREATE TABLE papers (
    paper_id VARCHAR PRIMARY KEY,          -- OpenReview forum id
    venue_id VARCHAR NOT NULL,             -- e.g. ICLR.cc/2020/Conference
    venue VARCHAR,                         -- display name, e.g. ICLR 2020
    venue_year INTEGER,
    title VARCHAR NOT NULL,
    abstract VARCHAR,                      -- NULL: GEM-S cannot be computed for this paper
    authors VARCHAR,
    keywords VARCHAR,
    decision VARCHAR,
    withdrawn BOOLEAN NOT NULL DEFAULT false,
    source VARCHAR NOT NULL,               -- bundled | archive:PATH | openreview:VENUE
    submitted_at TIMESTAMP,
    reviews_public_at TIMESTAMP,           -- when the human reviews became public
    content_sha256 VARCHAR NOT NULL,       -- hash of the metadata above, to detect edits
    ingested_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);
CREATE TABLE paper_texts (
    paper_id VARCHAR PRIMARY KEY,
    pdf_ref VARCHAR NOT NULL,              -- the source's identity of the PDF content
    pdf_sha256 VARCHAR,
    pages INTEGER,
    text VARCHAR,                          -- model-facing text (hidden spans removed)
    hidden_json VARCHAR,                   -- [{text, reason, page}]
    flags_json VARCHAR,                    -- [{phrase, page, hidden}] prompt-injection phrases
    status VARCHAR NOT NULL,               -- ok | failed
    error VARCHAR,
    extracted_at TIMESTAMP NOT NULL
);
CREATE TABLE reviews (
    review_id VARCHAR PRIMARY KEY,
    paper_id VARCHAR NOT NULL,
    kind VARCHAR NOT NULL,                 -- official_review | meta_review
    signature VARCHAR,
    visible_at TIMESTAMP,                  -- when the review became public (OpenReview cdate/pdate)
    first_seen_at TIMESTAMP NOT NULL,
    latest_version INTEGER NOT NULL
);
CREATE TABLE review_versions (
    review_id VARCHAR NOT NULL,
    version INTEGER NOT NULL,
    modified_at TIMESTAMP,                 -- OpenReview tmdate/mdate
    content_sha256 VARCHAR NOT NULL,
    title VARCHAR,
    rating VARCHAR,
    confidence VARCHAR,
    text VARCHAR NOT NULL,                 -- the review as one text, sections headed
    sections_json VARCHAR NOT NULL,        -- [[heading, text], ...]
    content_json VARCHAR NOT NULL,         -- the source's content object, verbatim
    judgments_json VARCHAR,                -- imported judgment lines, if the archive had them
    judgments_preprocessor VARCHAR,
    fetched_at TIMESTAMP NOT NULL,
    PRIMARY KEY (review_id, version)
);
CREATE TABLE runs (
    run_id VARCHAR PRIMARY KEY,
    command VARCHAR NOT NULL,
    args_json VARCHAR,
    started_at TIMESTAMP NOT NULL,
    finished_at TIMESTAMP,
    status VARCHAR NOT NULL,               -- running | ok | failed (something failed) | crashed
    summary_json VARCHAR
);
CREATE TABLE run_failures (
    run_id VARCHAR NOT NULL,
    stage VARCHAR NOT NULL,
    item VARCHAR,
    reason VARCHAR NOT NULL,
    failed_at TIMESTAMP NOT NULL
)
"""

"""Validation reports of the metric (Cohen's d per metric and transformation), stored with the run."""

SQL = """
CREATE TABLE validation_reports (
    run_id VARCHAR NOT NULL,
    estimator VARCHAR NOT NULL,
    preprocessor VARCHAR NOT NULL,
    rows_json VARCHAR NOT NULL,
    created_at TIMESTAMP NOT NULL,
    PRIMARY KEY (run_id, estimator, preprocessor)
)
"""

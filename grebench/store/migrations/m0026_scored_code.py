"""The code that made a scored setup's scores (issue 34 §3: provenance of every number).

``code_json`` is :func:`grebench.scoring.code_version` as the score stage saw it when it last scored with the setup
(package version, git commit, SHA-256 of the scoring code); NULL for setups scored before this migration.  It
travels with the setup in snapshots, so a board rebuilt elsewhere still says which code made its scores.
"""

SQL = """
ALTER TABLE scored_setups ADD COLUMN IF NOT EXISTS code_json VARCHAR
"""

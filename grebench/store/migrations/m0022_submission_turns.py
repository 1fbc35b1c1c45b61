"""Submitted endpoints take turns on the scheduler's worker; what each has used of it.

The queue job gives every running submission a time slice in turn (``submission_slice_s``), round robin, so one
slow or hostile endpoint delays another's evaluation by at most one slice per round.  A submission's own wall time
(what ``submission_max_wall_s`` counts) is the sum of its slices, possibly over several queue passes and restarts,
so it is kept here.  Which papers are done needs no column: every completed call leaves a generation row of the
submission's candidate (ok or failed), and a resumed submission skips those papers.
"""

SQL = """
CREATE TABLE IF NOT EXISTS submission_turns (
    id VARCHAR PRIMARY KEY,                -- the submission
    slices INTEGER NOT NULL,               -- turns taken so far
    spent_s DOUBLE NOT NULL,               -- wall seconds of its own turns (what submission_max_wall_s counts)
    updated_at TIMESTAMP NOT NULL
)
"""

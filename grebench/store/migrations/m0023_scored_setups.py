"""The setups the score stage scored with, as typed columns (issue 32).

Before, the last scored setup was one ``stage_state`` row whose fingerprint was the string ``"spec|prep"`` and whose
summary held the ids; readers matched a spec to an id with SQL ``LIKE`` and fell back to "any id of the same kind".
Now every scoring records (estimator spec, preprocessor spec) → (estimator id, preprocessor id); a reader looks a
named spec or id up by equality.  What an older store knew is carried over: its recorded setup exactly, and every
other (estimator id, preprocessor id) its scores carry under the id as its own spec (an old store never recorded
the spec those were made from; a reader names them by id).
"""

from __future__ import annotations

import json

import duckdb

SQL = """
CREATE TABLE IF NOT EXISTS scored_setups (
    estimator_spec VARCHAR NOT NULL,       -- as written: offline, hf:smollm2-135m, vllm:URL|MODEL
    preprocessor_spec VARCHAR NOT NULL,    -- as written: rules, llm:...
    estimator_id VARCHAR NOT NULL,         -- what the scores carry: the spec plus weights hash, dtype, options
    preprocessor_id VARCHAR NOT NULL,
    role VARCHAR NOT NULL,                 -- main: the metric's estimator; proxy: the fast proxy scored beside it
    run_id VARCHAR,                        -- the run that scored with it last (NULL: carried over by m0023)
    scored_at TIMESTAMP NOT NULL,
    PRIMARY KEY (estimator_spec, preprocessor_spec, estimator_id, preprocessor_id)
)
"""


def up(con: duckdb.DuckDBPyConnection) -> None:
    """Create the table and carry over the setups an older store knew."""
    con.execute(SQL)
    recorded = con.execute("""SELECT fingerprint, summary_json, updated_at FROM stage_state
                              WHERE stage = 'score' AND scope = 'scored-setup'""").fetchone()
    if recorded is not None and recorded[1]:
        estimator, sep, preprocessor = str(recorded[0]).rpartition("|")
        ids = json.loads(recorded[1])
        if sep and estimator and preprocessor and ids.get("estimator") and ids.get("preprocessor"):
            con.execute("INSERT OR IGNORE INTO scored_setups VALUES (?, ?, ?, ?, 'main', NULL, ?)",
                        [estimator, preprocessor, ids["estimator"], ids["preprocessor"], recorded[2]])
    con.execute("""INSERT OR IGNORE INTO scored_setups
                   SELECT s.estimator, s.preprocessor, s.estimator, s.preprocessor, 'main', NULL, max(s.created_at)
                   FROM scores s WHERE s.preprocessor <> 'none' AND NOT EXISTS (
                       SELECT 1 FROM scored_setups k
                       WHERE k.estimator_id = s.estimator AND k.preprocessor_id = s.preprocessor)
                   GROUP BY s.estimator, s.preprocessor""")
    con.execute("DELETE FROM stage_state WHERE stage = 'score' AND scope = 'scored-setup'")

"""The public submissions log (issue 63 §2): every submission ever made, refused tries included, and nothing deleted.

``submission_log`` has one row per submission or refused try: its id (a try refused before it was queued gets
``r-<12 hex>``), the public handle (the contact when it is a handle, never an e-mail address), ``group_key`` (a salted
hash of the submitter, so variants of one submitter group together without naming them), the model name, the
endpoint's fingerprint (16 hex of a SHA-256 of its address: never the URL, never the key; an uploaded file of
reviews: of its bytes), its status and a refusal's public class
(:data:`grebench.submissions.REASON_CLASSES`) and when it came.  The status of an accepted one (held, scored,
withdrawn, refused at evaluation) is read from ``submissions``, the holds and the scores, and written back here by
each sync, so that a snapshot, which carries this table and not ``submissions``, says it too.  The queue
file keeps the same rows with the private ``submitter`` in place of ``group_key``; the scheduler copies them here
(:func:`grebench.submissions.sync_log`), which also fills the rows of submissions made before this migration.
"""

#: The main store's log (public columns only: exports and snapshots carry it as it is).
SUBMISSION_LOG_DDL = """
CREATE TABLE IF NOT EXISTS submission_log (
    id VARCHAR PRIMARY KEY,
    kind VARCHAR NOT NULL,                 -- endpoint (a model endpoint) | upload (a file of reviews written elsewhere)
    handle VARCHAR,                        -- the public handle, or NULL (an e-mail address is never one)
    group_key VARCHAR,                     -- 16 hex: salted SHA-256 of the submitter (NULL: no well-formed contact)
    model_name VARCHAR,                    -- NULL when the form's name was not well-formed
    endpoint_fingerprint VARCHAR,          -- 16 hex of SHA-256 of the endpoint (normalised URL or model string)
    status VARCHAR NOT NULL,               -- accepted | refused | withdrawn | held | scored (as of the last sync)
    reason_class VARCHAR,                  -- a refusal's public class (NULL unless refused)
    created_at TIMESTAMP NOT NULL
)
"""

SQL = SUBMISSION_LOG_DDL

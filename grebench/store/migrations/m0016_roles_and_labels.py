"""Per-kind facts the readers need, written by the scoring layer from the registries (the web layer computes nothing).

``board_rows.role`` is what the candidate's kind is on a board (contestant | baseline | reference), and ``labels``
holds the words for every metric, estimator id, preprocessor id and candidate kind the boards use.  Rows of boards
stored before this migration get the role their kind had then (the two bundled kinds were the only non-contestants),
so a site built before the boards are recomputed still shows the human baseline and the controls unranked.
"""

SQL = """
ALTER TABLE board_rows ADD COLUMN role VARCHAR;
UPDATE board_rows SET role = CASE kind WHEN 'human' THEN 'baseline' WHEN 'control' THEN 'reference'
                                       ELSE 'contestant' END;
CREATE TABLE labels (
    what VARCHAR NOT NULL,                 -- metric | estimator | preprocessor | candidate_kind
    id VARCHAR NOT NULL,                   -- the stored id (a metric name, an estimator id, a kind name)
    label VARCHAR NOT NULL,                -- in words (a candidate kind: the tag after a name, '' for none)
    role VARCHAR,                          -- estimator: proxy or model, candidate_kind: contestant|baseline|reference
    colour VARCHAR,                        -- candidate_kind: its colour in board plots
    PRIMARY KEY (what, id)
)
"""

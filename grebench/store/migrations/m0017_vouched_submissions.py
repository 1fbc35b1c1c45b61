"""Submitted models are vouched for, or ranked on sealed reviews only; board rows say which.

A model submitted by the public (kind ``submitted``) declares a training cutoff that nobody has checked: until the
operator vouches for it (``grebench submissions approve``), the candidate has no cutoff and, like an imported
candidate without one, only its sealed reviews (written before the paper's reviews were public) are clean.
Submissions accepted before this migration were stored as ``llm`` candidates with the declared cutoff as if it were
true: they become ``submitted`` candidates without a cutoff (the declared one stays in ``submissions.cutoff``), so
the operator vouches for them again.  ``board_rows.vouched`` says whether a contestant's cutoff is vouched for
(configured by the operator, approved, or an import the operator trusted); NULL for the baseline and references.
"""

SQL = """
UPDATE candidates SET kind = 'submitted', cutoff = NULL
WHERE kind = 'llm' AND name IN (SELECT model_name FROM submissions);
CREATE OR REPLACE VIEW clean_pairs AS
SELECT g.candidate, g.paper_id, g.generation_id, g.sealed,
       (g.sealed OR (c.cutoff IS NULL AND c.kind NOT IN ('imported', 'submitted'))
        OR (c.cutoff IS NOT NULL AND (p.reviews_public_at IS NULL
                                      OR c.cutoff < CAST(p.reviews_public_at AS DATE)))) AS clean
FROM generations g
JOIN candidates c ON c.name = g.candidate
JOIN papers p ON p.paper_id = g.paper_id;
ALTER TABLE board_rows ADD COLUMN vouched BOOLEAN;
"""

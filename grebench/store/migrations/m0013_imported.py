"""Imported candidates: the clean-pairs view learns that an imported model without a cutoff proves nothing.

The human baseline and the controls have no cutoff and are clean on every paper.  An ``imported`` candidate
(reviews written elsewhere, ``grebench bench import``) may have no cutoff either, but it is a model that may have
read anything: without a cutoff only its sealed reviews (generated before the paper's reviews were public) are
clean.  For every other kind the view is unchanged.
"""

CLEAN_PAIRS_VIEW = """
CREATE OR REPLACE VIEW clean_pairs AS
SELECT g.candidate, g.paper_id, g.generation_id, g.sealed,
       (g.sealed OR (c.cutoff IS NULL AND c.kind <> 'imported')
        OR (c.cutoff IS NOT NULL AND (p.reviews_public_at IS NULL
                                      OR c.cutoff < CAST(p.reviews_public_at AS DATE)))) AS clean
FROM generations g
JOIN candidates c ON c.name = g.candidate
JOIN papers p ON p.paper_id = g.paper_id
"""

SQL = CLEAN_PAIRS_VIEW

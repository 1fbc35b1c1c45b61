"""The human baseline and the controls are never sealed.

"Sealed" says a review was written before the paper's human reviews were public, so it cannot have copied them.
The human baseline and the controls are built *from* those reviews; earlier versions marked them sealed whenever
the clock at build time happened to be before the recorded publication time, so two runs (or a run resumed after a
crash) could store different flags for the same text.
"""

SQL = """
UPDATE generations SET sealed = false
WHERE sealed AND candidate IN (SELECT name FROM candidates WHERE kind IN ('human', 'control'))
"""

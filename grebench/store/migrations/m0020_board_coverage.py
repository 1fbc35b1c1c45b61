"""Board rows say whether they cover the board's sample: an incomplete contestant is shown, never ranked.

``due_papers``: the board papers the candidate was due to review (clean for it by its cutoff, or sealed);
``missing_papers``: how many of them it has no ``ok`` review of; ``complete``: whether that is within what it may
miss (:mod:`grebench.scoring._coverage`).  Rows computed before this migration keep NULL (read as complete); the
next board computation fills them (the boards' version changed).
"""

SQL = """
ALTER TABLE board_rows ADD COLUMN due_papers INTEGER;
ALTER TABLE board_rows ADD COLUMN missing_papers INTEGER;
ALTER TABLE board_rows ADD COLUMN complete BOOLEAN;
"""

"""What a board can tell (issue 63 §5): each row against the floor controls.

``board_rows.vs_floor_json``: the row's paired test against each floor control on its board (a control registered
with ``floor=``: ``other-paper``, ``generic``), ``{control: {"diff", "p", "papers", "distinguishable"}}``; NULL for a
control, and for boards computed before this migration (the next board computation fills it: the boards' version
changed).
"""

SQL = """
ALTER TABLE board_rows ADD COLUMN vs_floor_json VARCHAR;
"""

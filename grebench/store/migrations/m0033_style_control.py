"""The style-controlled view beside the headline (issue 63 §3): board rows and boards say what it found.

``board_rows.style_score`` (with ``style_ci95_low``/``style_ci95_high``): a contestant's score difference to the
human baseline at zero style difference, the intercept of the board's pooled fit (:mod:`grebench.scoring._style`);
``boards.style_control_json``: the fit's features, coefficients with their CIs, the features' means and SDs, the rows
and the method.  Boards computed before this migration keep NULL (no style-controlled view); the next board
computation fills them (the boards' version changed).
"""

SQL = """
ALTER TABLE board_rows ADD COLUMN style_score DOUBLE;
ALTER TABLE board_rows ADD COLUMN style_ci95_low DOUBLE;
ALTER TABLE board_rows ADD COLUMN style_ci95_high DOUBLE;
ALTER TABLE boards ADD COLUMN style_control_json VARCHAR;
"""

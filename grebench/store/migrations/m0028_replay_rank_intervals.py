"""The board history keeps each row's rank interval (issue 34: "show ranks with their uncertainty").

``rank_low`` / ``rank_high``: the 2.5 / 97.5 percentiles of the candidate's rank over the board's paper bootstrap,
as the day's board row had them (:func:`grebench.scoring.leaderboard`); NULL for unranked rows and for days
replayed before this migration (their plot draws the rank without a band).
"""

SQL = """
ALTER TABLE replay_history ADD COLUMN IF NOT EXISTS rank_low DOUBLE;
ALTER TABLE replay_history ADD COLUMN IF NOT EXISTS rank_high DOUBLE;
"""

"""Panel rankings rank contestants only: a control judged as an anchor is a reference row without a rank."""

SQL = """
ALTER TABLE panel_rankings ALTER COLUMN rank DROP NOT NULL
"""

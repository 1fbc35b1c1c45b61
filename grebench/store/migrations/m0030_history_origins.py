"""Board history that reads true (issue 51).

``replay_history.scope``: each replayed row says whether its board was the ``all`` or the ``sealed`` one.  Before,
the scope was looked up in ``boards``, where a board replaced by a later fit no longer is, so a day's rows came in
two unlabelled blocks per metric.  Rows replayed before this migration keep NULL (read through ``boards`` where the
board is still stored).

``board_versions.origin``: ``site`` for a version this store published, ``snapshot`` for one a snapshot brought
(the importer forces it).  Imported versions are part of what ``--as-of`` and ``--history`` read; only the store's
own versions chain a new publish to its previous one.
"""

SQL = """
ALTER TABLE replay_history ADD COLUMN IF NOT EXISTS scope VARCHAR;
ALTER TABLE board_versions ADD COLUMN IF NOT EXISTS origin VARCHAR DEFAULT 'site';
UPDATE board_versions SET origin = 'site' WHERE origin IS NULL
"""

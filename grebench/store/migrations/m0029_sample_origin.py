"""Where a recorded paper sample came from: this store's own jobs, or a snapshot it imported.

Before, ``grebench snapshot import`` added a snapshot's ``paper_samples`` rows beside the store's own, and every
reader of the recorded sample (``validate``, ``exam``, ``judge``, the boards' "which papers" line) took the union:
a snapshot, hostile or not, could enlarge or shrink the sample this store's numbers claim to be made on.  Now each
row says its ``origin``: ``run`` (a job of this store drew it) or ``snapshot`` (the importer forces it, whatever the
snapshot holds).  Readers read ``run`` rows only; ``grebench snapshot rebuild`` adopts the snapshot's sample in its
own temporary store.  The key becomes (origin, paper_id), so an imported row never collides with the store's own.
"""

import duckdb


def up(con: duckdb.DuckDBPyConnection) -> None:
    """Recreate ``paper_samples`` with ``origin`` (DuckDB cannot change a primary key in place); rows so far: run."""
    con.execute("""CREATE TABLE paper_samples_m0029 (
                       venue_id VARCHAR NOT NULL,
                       paper_id VARCHAR NOT NULL,
                       sample_json VARCHAR NOT NULL,      -- {description, size, eligible}
                       created_at TIMESTAMP NOT NULL,
                       origin VARCHAR NOT NULL DEFAULT 'run',  -- run: drawn by this store's job; snapshot: imported
                       PRIMARY KEY (origin, paper_id))""")
    con.execute("INSERT INTO paper_samples_m0029 SELECT venue_id, paper_id, sample_json, created_at, 'run' "
                "FROM paper_samples")
    con.execute("DROP TABLE paper_samples")
    con.execute("ALTER TABLE paper_samples_m0029 RENAME TO paper_samples")

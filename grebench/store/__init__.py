"""The DuckDB store: one writer process, numbered migrations, typed records.

Readers never open the writer's live file (DuckDB forbids a second process on
a file opened read-write); they read ``grebench export`` Parquet files or a
read-only copy made by :meth:`Store.copy_to`.
"""

from grebench.store._records import PaperRecord, ReviewRecord, utcnow
from grebench.store._store import Store, open_store

__all__ = ["PaperRecord", "ReviewRecord", "Store", "open_store", "utcnow"]

"""The DuckDB store: one writer process, numbered migrations, typed records, snapshots, input fingerprints.

Readers never open the writer's live file (DuckDB forbids a second process on a file opened read-write); they read
``grebench export`` Parquet files or a read-only copy made by :meth:`Store.copy_to`.
"""

from grebench.store._clock import WALL_CLOCK, SimulatedClock, WallClock, clock, naive_utc, use_clock
from grebench.store._fingerprint import BOOKKEEPING_COLUMNS, code_files, fingerprint, table_digests
from grebench.store._links import EXPLICIT, PUBLIC_SINCE_VIEW, Link, linked_versions, public_since, put_links
from grebench.store._migrate import migrate
from grebench.store._records import (
    BASELINE,
    CONTESTANT,
    MODEL_ROLE,
    PROXY_ROLE,
    REFERENCE,
    HiddenText,
    InjectionFlag,
    PaperRecord,
    PdfExtraction,
    ReviewRecord,
    utcnow,
)
from grebench.store._schedule import cut_due_snapshots, snapshot_day
from grebench.store._snapshot import (
    SnapshotError,
    export_snapshot,
    file_sha256,
    find_venue,
    import_snapshot,
    record_snapshot,
    venue_years,
    verify_snapshot,
)
from grebench.store._store import (
    PRIVATE_COLUMNS,
    Store,
    StoreLocked,
    ident,
    open_store,
    public_select,
    schema_tables,
)

__all__ = [
    "BASELINE",
    "BOOKKEEPING_COLUMNS",
    "CONTESTANT",
    "EXPLICIT",
    "MODEL_ROLE",
    "PRIVATE_COLUMNS",
    "PROXY_ROLE",
    "PUBLIC_SINCE_VIEW",
    "REFERENCE",
    "WALL_CLOCK",
    "HiddenText",
    "InjectionFlag",
    "Link",
    "PaperRecord",
    "PdfExtraction",
    "ReviewRecord",
    "SimulatedClock",
    "SnapshotError",
    "Store",
    "StoreLocked",
    "WallClock",
    "clock",
    "code_files",
    "cut_due_snapshots",
    "export_snapshot",
    "file_sha256",
    "find_venue",
    "fingerprint",
    "ident",
    "import_snapshot",
    "linked_versions",
    "migrate",
    "naive_utc",
    "open_store",
    "public_select",
    "public_since",
    "put_links",
    "record_snapshot",
    "schema_tables",
    "snapshot_day",
    "table_digests",
    "use_clock",
    "utcnow",
    "venue_years",
    "verify_snapshot",
]

"""One download per snapshot: ``FOLDER.tar.gz``, the snapshot folder exactly as ``snapshot verify`` and ``snapshot
import`` accept it (written by :func:`grebench.store.build_archive`, which reads it back too).

Its size is bounded (``snapshot_archive_max_mb``): a larger snapshot, or one whose folder does not verify, gets no
archive, its single files stay listed.  Each archive is built once per manifest hash and archive format into
``DATA_DIR/snapshot-archives/`` and hard-linked (else copied) into the site and the app, world-readable (0644) like
every other file the site publishes.
"""

from __future__ import annotations

import shutil
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from grebench.store import ARCHIVE_FORMAT, ARCHIVE_MODE, ArchiveRefused, build_archive, file_sha256

if TYPE_CHECKING:
    from grebench.site._data import SnapshotListing

SUFFIX = ".tar.gz"


def publish_archives(source: Path, target: Path, cache: Path, max_bytes: int) -> list[SnapshotListing]:
    """``target/FOLDER.tar.gz`` for each snapshot folder of ``source`` with a manifest (built once per manifest hash
    and :data:`grebench.store.ARCHIVE_FORMAT` into ``cache``, then linked); the listing ``{name, bytes, sha256,
    folder, archive: True}``.  A folder that is not archived (too large, odd names, does not verify) is skipped:
    its files stay listed one by one."""
    out: list[SnapshotListing] = []
    if not source.is_dir():
        return out
    for folder in sorted(p for p in source.iterdir() if p.is_dir() and not p.is_symlink()
                         and not p.name.startswith(".") and (p / "manifest.json").is_file()):
        key = f"{file_sha256(folder / 'manifest.json')[:16]}v{ARCHIVE_FORMAT}"
        cached = cache / f"{folder.name}-{key}{SUFFIX}"
        if not cached.is_file():
            try:
                build_archive(folder, cached, max_bytes)
            except ArchiveRefused:
                continue
            for old in cache.glob(f"{folder.name}-*{SUFFIX}"):  # an earlier cut of this snapshot, or format
                if old != cached and old.name[len(folder.name) + 1:-len(SUFFIX)].isalnum():
                    old.unlink(missing_ok=True)
        if stat.S_IMODE(cached.stat().st_mode) != ARCHIVE_MODE:  # published: readable by the web server's user
            cached.chmod(ARCHIVE_MODE)
        dst = target / f"{folder.name}{SUFFIX}"
        dst.parent.mkdir(parents=True, exist_ok=True)
        try:
            dst.hardlink_to(cached)
        except OSError:
            shutil.copy2(cached, dst)
        out.append({"name": dst.name, "bytes": cached.stat().st_size, "sha256": file_sha256(cached),
                    "folder": folder.name, "archive": True})
    return out

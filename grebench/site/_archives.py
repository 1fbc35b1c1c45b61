"""One download per snapshot: a deterministic ``FOLDER.tar.gz`` of the snapshot's files, its manifest among them,
and ``manifest.json.sha256`` (the manifest's SHA-256 in ``sha256sum`` form) beside it inside the archive.

The archive is built from our own snapshot folder, never from input: only regular files (no symbolic link is
followed) under the folder, each named by its path relative to it, which must be plain (``[A-Za-z0-9._-]`` parts,
no ``..``, nothing absolute), so that unpacking it can write nowhere but ``FOLDER/``.  Its size is bounded
(``snapshot_archive_max_mb``): a larger snapshot gets no archive, its single files stay listed.  Archives are
deterministic (sorted members, fixed owner and times, gzip without a time stamp), so the same snapshot always gives
the same bytes and the same published SHA-256; each is built once per manifest hash into
``DATA_DIR/snapshot-archives/`` and hard-linked (else copied) into the site and the app.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import re
import shutil
import tarfile
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from grebench.site._data import SnapshotListing

_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
#: Every member's time in the archive (a fixed date: the archive's bytes depend on the snapshot's only).
MEMBER_MTIME = 946684800  # 2000-01-01T00:00:00Z
SUFFIX = ".tar.gz"


class ArchiveRefused(ValueError):
    """A snapshot folder that is not archived (too large, or a member name that is not plain); the reason."""


def _members(folder: Path) -> list[tuple[str, Path]]:
    """(name inside the folder, path) of every regular file under ``folder``, sorted; refuses anything else."""
    out = []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if path.is_symlink():
            raise ArchiveRefused(f"{rel} is a symbolic link")
        if path.is_dir():
            continue
        if not path.is_file():
            raise ArchiveRefused(f"{rel} is not a regular file")
        if not all(_PART.match(part) for part in rel.parts):
            raise ArchiveRefused(f"{rel} is not a plain file name")
        out.append((rel.as_posix(), path))
    return out


def build_archive(folder: Path, out: Path, max_bytes: int) -> None:
    """Write ``folder``'s archive to ``out`` (atomically: a temporary file renamed), or raise
    :class:`ArchiveRefused`.  Members are ``FOLDER/<name>``, then ``FOLDER/manifest.json.sha256``."""
    name = folder.name
    if not _PART.match(name):
        raise ArchiveRefused(f"the folder name {name!r} is not plain")
    members = _members(folder)
    manifest = folder / "manifest.json"
    if not any(rel == "manifest.json" for rel, _ in members):
        raise ArchiveRefused("the folder has no manifest.json")
    total = sum(p.stat().st_size for _, p in members)
    if total > max_bytes:
        raise ArchiveRefused(f"the snapshot is {total:,} bytes (archives up to {max_bytes:,})")
    digest = hashlib.sha256(manifest.read_bytes()).hexdigest()
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    try:
        with os.fdopen(fd, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz, \
                tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for rel, path in members:
                with path.open("rb") as fh:
                    tar.addfile(_info(f"{name}/{rel}", path.stat().st_size), fh)
            check = f"{digest}  manifest.json\n".encode()
            tar.addfile(_info(f"{name}/manifest.json.sha256", len(check)), io.BytesIO(check))
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _info(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = size, 0o644, MEMBER_MTIME
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def sha256_file(path: Path) -> str:
    """A file's SHA-256, read in blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def publish_archives(source: Path, target: Path, cache: Path, max_bytes: int) -> list[SnapshotListing]:
    """``target/FOLDER.tar.gz`` for each snapshot folder of ``source`` with a manifest (built once per manifest hash
    into ``cache``, then linked); the listing ``{name, bytes, sha256, folder, archive: True}``.  A folder that is
    not archived (too large, odd names) is skipped: its files stay listed one by one."""
    out: list[SnapshotListing] = []
    if not source.is_dir():
        return out
    for folder in sorted(p for p in source.iterdir() if p.is_dir() and not p.is_symlink()
                         and not p.name.startswith(".") and (p / "manifest.json").is_file()):
        key = sha256_file(folder / "manifest.json")[:16]
        cached = cache / f"{folder.name}-{key}{SUFFIX}"
        if not cached.is_file():
            try:
                build_archive(folder, cached, max_bytes)
            except ArchiveRefused:
                continue
            for old in cache.glob(f"{folder.name}-*{SUFFIX}"):  # the archives of an earlier cut of this snapshot
                if old != cached and old.name[len(folder.name) + 1:-len(SUFFIX)].isalnum():
                    old.unlink(missing_ok=True)
        dst = target / f"{folder.name}{SUFFIX}"
        dst.parent.mkdir(parents=True, exist_ok=True)
        try:
            dst.hardlink_to(cached)
        except OSError:
            shutil.copy2(cached, dst)
        out.append({"name": dst.name, "bytes": cached.stat().st_size, "sha256": sha256_file(cached),
                    "folder": folder.name, "archive": True})
    return out

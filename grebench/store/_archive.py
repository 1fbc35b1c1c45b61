"""A snapshot as one file: ``FOLDER.tar.gz`` holds the snapshot folder ``FOLDER/`` exactly as verify accepts it.

Written and read here, in one module, so that what the archive holds and what ``snapshot verify`` and ``snapshot
import`` accept cannot drift apart (issue 63: the archive once carried a ``manifest.json.sha256`` beside the
manifest, which verify rightly counted as a file not in the manifest, so the Downloads page's own command failed on
the folder a plain ``tar -xzf`` made).

Writing (:func:`build_archive`): only a folder that verifies is archived, and the archive holds its files and nothing
else, each as ``FOLDER/<name>`` (plain names, no directory entry, no link), deterministic (sorted members, fixed
owner and times, gzip without a time stamp), so the same snapshot always gives the same bytes and the same published
SHA-256.  The file is world-readable (0644): it is published.

Reading (:func:`unpacked`): an archive from elsewhere is hostile input.  It is read as a stream through a byte budget
(no member, header or decompressed byte is read past it), and only regular files named ``FOLDER/<plain name>`` under
one top folder are written, each created afresh in a new temporary folder; a link, a device, a ``..`` or absolute
name, a nested path, a duplicate, more files than a snapshot has, or more bytes than the importer's bound
(:func:`grebench.store._snapshot.import_bound` of the archive's size: settings ``snapshot_import_max_*``) refuses the
whole archive, and the temporary folder is removed: nothing is imported.
"""

from __future__ import annotations

import gzip
import io
import os
import re
import tarfile
import tempfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from grebench.store._snapshot import (
    MANIFEST,
    MAX_DECODED_BYTES,
    MAX_EXPANSION,
    README,
    TABLES,
    SnapshotError,
    import_bound,
    verify_snapshot,
)

#: Bump when the bytes an archive of the same snapshot would have change: archives are cached by manifest hash and
#: this format, so a new format is built afresh (and the site's fingerprint changes).
ARCHIVE_FORMAT = 2  # 2: exactly the snapshot folder (no manifest.json.sha256 member), 0644
SUFFIX = ".tar.gz"
#: Every member's time in the archive (a fixed date: the archive's bytes depend on the snapshot's only).
MEMBER_MTIME = 946684800  # 2000-01-01T00:00:00Z
#: What a published archive's mode is (readable by a web server running as another user).
ARCHIVE_MODE = 0o644
#: Most bytes the reader lets one member's headers take (extended pax headers included): they are read whole.
HEADER_BYTES = 1024 ** 2
#: Most regular files an archive may hold: one per snapshot table, the manifest and the README.
MAX_MEMBERS = len(TABLES) + 2
_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class ArchiveRefused(SnapshotError):
    """A snapshot archive that is not written or not read (the message says why)."""


# -- writing -----------------------------------------------------------------------------------------------------

def build_archive(folder: Path, out: Path, max_bytes: int) -> None:
    """Write ``folder``'s archive to ``out`` (atomically: a temporary file renamed, mode 0644), or raise
    :class:`ArchiveRefused`: a folder that does not verify, larger than ``max_bytes`` or with an odd name."""
    name = folder.name
    if not _PART.match(name):
        raise ArchiveRefused(f"the folder name {name!r} is not plain")
    report = verify_snapshot(folder)
    if not report["ok"]:  # the archive holds what verify accepts, so a folder that does not verify gets none
        raise ArchiveRefused(f"{name} does not verify: {'; '.join(report['problems'][:3])}")
    members = _members(folder)
    total = sum(p.stat().st_size for _, p in members)
    if total > max_bytes:
        raise ArchiveRefused(f"the snapshot is {total:,} bytes (archives up to {max_bytes:,})")
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    try:
        os.fchmod(fd, ARCHIVE_MODE)  # mkstemp makes 0600: a web server running as another user could not serve it
        with os.fdopen(fd, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz, \
                tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for rel, path in members:
                with path.open("rb") as fh:
                    tar.addfile(_info(f"{name}/{rel}", path.stat().st_size), fh)
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _members(folder: Path) -> list[tuple[str, Path]]:
    """(name, path) of every file of a verified snapshot folder, sorted: exactly what verify accepted (it counts
    anything else as a problem), each checked again to be a plain regular file."""
    out = []
    for path in sorted(folder.iterdir()):
        if path.is_symlink() or not path.is_file() or not _PART.match(path.name):
            raise ArchiveRefused(f"{path.name[:60]!r} is not a plain regular file")
        out.append((path.name, path))
    return out


def _info(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = size, 0o644, MEMBER_MTIME
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


# -- reading -----------------------------------------------------------------------------------------------------

class _Budget(io.RawIOBase):
    """A readable stream that refuses to be read past a budget the reader sets before each header and member."""

    def __init__(self, raw: io.BufferedIOBase) -> None:
        self.raw, self.read_bytes, self.until = raw, 0, 0

    def readable(self) -> bool:
        return True

    def allow(self, more: int) -> None:
        """Let ``more`` bytes past what is read so far be read (tarfile reads ahead 10 KiB: within the slack)."""
        self.until = self.read_bytes + more

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        view = memoryview(buffer).cast("B")
        room = self.until - self.read_bytes
        if room <= 0:
            raise ArchiveRefused("a member's header is larger than a snapshot archive's (refused)")
        data = self.raw.read(min(len(view), room))
        view[:len(data)] = data
        self.read_bytes += len(data)
        return len(data)


@contextmanager
def unpacked(archive: Path, *, max_expansion: int = MAX_EXPANSION, max_decoded_bytes: int = MAX_DECODED_BYTES,
             workdir: Path | None = None) -> Iterator[Path]:
    """The snapshot folder unpacked from ``archive`` into a new temporary folder (under ``workdir``, else the system
    temp dir), removed when the block ends; :class:`ArchiveRefused` for an archive that is not a snapshot's."""
    bound = import_bound(Path(archive).stat().st_size, max_expansion, max_decoded_bytes)
    if workdir is not None:
        workdir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".grebench-unpack-", dir=workdir) as tmp:
        yield unpack(Path(archive), Path(tmp), bound)


def unpack(archive: Path, into: Path, max_bytes: int) -> Path:
    """Unpack a snapshot archive into the empty folder ``into`` (at most ``max_bytes`` of file contents); return the
    snapshot folder made there.  Refuses anything but regular files named ``FOLDER/<plain name>``."""
    try:
        with archive.open("rb") as raw, gzip.GzipFile(fileobj=raw, mode="rb") as gz:
            budget = _Budget(gz)  # type: ignore[arg-type]
            budget.allow(HEADER_BYTES)  # opening reads the first member's header
            with tarfile.open(fileobj=budget, mode="r|") as tar:
                return _unpack(tar, budget, into, max_bytes)
    except ArchiveRefused:
        raise
    except (tarfile.TarError, gzip.BadGzipFile, zlib.error, EOFError, OSError, UnicodeError) as exc:
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        raise ArchiveRefused(f"{archive.name}: not a snapshot archive (.tar.gz): {type(exc).__name__}: {first}") \
            from None


def _unpack(tar: tarfile.TarFile, budget: _Budget, into: Path, max_bytes: int) -> Path:
    folder: str | None = None
    seen: set[str] = set()
    total = 0
    while True:
        budget.allow(HEADER_BYTES)
        member = tar.next()
        if member is None:
            break
        shown = member.name[:80]
        parts = member.name.split("/")
        if member.name.startswith("/") or ".." in parts or not all(_PART.match(p) for p in parts):
            raise ArchiveRefused(f"{shown!r}: not a plain name inside the snapshot's folder (refused)")
        if folder is None:
            folder = parts[0]
        if parts[0] != folder:
            raise ArchiveRefused(f"{shown!r}: outside the archive's one folder {folder!r} (refused)")
        if member.isdir() and len(parts) == 1 and folder not in seen:
            seen.add(folder)  # the folder's own entry (an archive made with `tar -czf F.tar.gz F`)
            continue
        if member.issym() or member.islnk():
            raise ArchiveRefused(f"{shown!r}: a link (refused: a snapshot holds regular files only)")
        if member.type not in (tarfile.REGTYPE, tarfile.AREGTYPE):
            raise ArchiveRefused(f"{shown!r}: not a regular file (refused)")
        if len(parts) != 2:
            raise ArchiveRefused(f"{shown!r}: not a file directly in the folder {folder!r} (refused)")
        if member.name in seen:
            raise ArchiveRefused(f"{shown!r}: in the archive twice (refused)")
        seen.add(member.name)
        if len(seen - {folder}) > MAX_MEMBERS:
            raise ArchiveRefused(f"more than {MAX_MEMBERS} files (a snapshot has its tables, {MANIFEST} and "
                                 f"{README}; refused)")
        total += member.size
        if total > max_bytes:
            raise ArchiveRefused(f"{shown!r}: the archive unpacks to more than the importer's bound of "
                                 f"{max_bytes:,} bytes (settings snapshot_import_max_*; refused)")
        budget.allow(member.size + HEADER_BYTES)
        _write(tar, member, into / folder)
    if folder is None or not seen - {folder}:
        raise ArchiveRefused("the archive holds no file (refused)")
    return into / folder


def _write(tar: tarfile.TarFile, member: tarfile.TarInfo, folder: Path) -> None:
    """Copy one member's bytes into a file created afresh (never one already there, never through a link)."""
    folder.mkdir(exist_ok=True)
    source = tar.extractfile(member)
    assert source is not None  # a regular file
    fd = os.open(folder / member.name.split("/")[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as out:
        for block in iter(lambda: source.read(1 << 20), b""):
            out.write(block)

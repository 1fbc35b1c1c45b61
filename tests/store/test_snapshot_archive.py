"""A snapshot's archive (``FOLDER.tar.gz``): it holds exactly the folder verify accepts, verify and import take it
as it stands, and a hostile archive (a ``..`` name, a link, a device, a nested path, too many files, too many
bytes, a huge header) is refused with one clear line and writes nothing (issue 63)."""

from __future__ import annotations

import gzip
import io
import os
import re
import shutil
import stat
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from grebench.store import (
    ARCHIVE_MODE,
    ArchiveRefused,
    SnapshotError,
    Store,
    build_archive,
    export_snapshot,
    import_snapshot,
    open_store,
    venue_years,
    verify_snapshot,
)
from grebench.store._archive import HEADER_BYTES, MAX_MEMBERS, unpack
from tests.site.conftest import fill_store

BOARDS = "SELECT b.*, r.* EXCLUDE (board_id) FROM boards b JOIN board_rows r USING (board_id) ORDER BY ALL"


@pytest.fixture(scope="module")
def cut(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Store, Path, str]]:
    """A filled store, one venue-year's snapshot folder ``ICLR-2020`` cut from it, and the manifest's SHA-256."""
    store = open_store(None)
    fill_store(store)
    venue = venue_years(store)[0]
    root = tmp_path_factory.mktemp("cut")
    manifest = export_snapshot(store, venue["venue_id"], root / venue["slug"])
    yield store, root / venue["slug"], manifest["manifest_sha256"]
    store.con.close()


@pytest.fixture
def snapshot(cut: tuple[Store, Path, str], tmp_path: Path) -> tuple[Store, Path, str]:
    """:func:`cut`, its folder copied into this test's own folder (a test may change it)."""
    store, folder, sha = cut
    shutil.copytree(folder, tmp_path / "snapshots" / folder.name)
    return store, tmp_path / "snapshots" / folder.name, sha


def _boards(store: Store, venue_id: str) -> list[tuple[object, ...]]:
    return store.con.execute(BOARDS.replace("ORDER BY", "WHERE b.venue_id = ? ORDER BY"), [venue_id]).fetchall()


def test_the_archive_holds_exactly_the_folder_verify_accepts_and_is_world_readable(
        snapshot: tuple[Store, Path, str], tmp_path: Path) -> None:
    _, folder, _ = snapshot
    first, again = tmp_path / "a.tar.gz", tmp_path / "b.tar.gz"
    before = os.umask(0o077)  # a private umask changes nothing: the archive is published
    try:
        build_archive(folder, first, 10**8)
    finally:
        os.umask(before)
    assert stat.S_IMODE(first.stat().st_mode) == ARCHIVE_MODE == 0o644
    (folder / "README.md").touch()  # a new mtime changes nothing in the archive
    build_archive(folder, again, 10**8)
    assert first.read_bytes() == again.read_bytes()  # deterministic: the published SHA-256 stays true
    with tarfile.open(first) as tar:
        members = tar.getmembers()
    assert [m.name for m in members] == [f"{folder.name}/{p.name}" for p in sorted(folder.iterdir())]
    assert all(m.isreg() and m.mode == 0o644 for m in members)
    plain = tmp_path / "plain"
    with tarfile.open(first) as tar:  # a plain extract, as `tar -xzf` does it
        tar.extractall(plain, filter="data")
    report = verify_snapshot(plain / folder.name)
    assert report["ok"] and report["problems"] == [], report


def test_a_folder_that_does_not_verify_or_is_too_big_gets_no_archive(snapshot: tuple[Store, Path, str],
                                                                     tmp_path: Path) -> None:
    _, folder, _ = snapshot
    with pytest.raises(ArchiveRefused, match="archives up to"):
        build_archive(folder, tmp_path / "big.tar.gz", 100)
    (folder / "escape").symlink_to("/etc/passwd")
    with pytest.raises(ArchiveRefused, match="does not verify: escape: not in the manifest"):
        build_archive(folder, tmp_path / "link.tar.gz", 10**8)
    (folder / "escape").unlink()
    (folder / "manifest.json.sha256").write_text("x  manifest.json\n")  # what archives once carried (issue 63)
    with pytest.raises(ArchiveRefused, match="not in the manifest"):
        build_archive(folder, tmp_path / "extra.tar.gz", 10**8)
    assert not list(tmp_path.glob("*.tar.gz")) and not list(tmp_path.glob(".*"))  # nothing half-written is left


def test_verify_and_import_take_the_archive_itself(snapshot: tuple[Store, Path, str], tmp_path: Path) -> None:
    source, folder, sha = snapshot
    archive = tmp_path / f"{folder.name}.tar.gz"
    build_archive(folder, archive, 10**8)
    report = verify_snapshot(archive, sha)
    assert report["ok"] and report["authenticated"] and report["path"] == str(archive), report
    assert not verify_snapshot(archive, "0" * 64)["ok"]
    fresh = open_store(tmp_path / "fresh" / "grebench.duckdb")
    try:
        imported = import_snapshot(fresh, archive, sha)
        assert imported["authenticated"] and imported["path"] == str(archive)
        venue_id = str(imported["venue_id"])
        assert _boards(fresh, venue_id) == _boards(source, venue_id) != []
        assert all(p.name.startswith("grebench.duckdb") for p in (tmp_path / "fresh").iterdir())  # removed
        # said of the archive, not of the temporary folder it was unpacked into
        with pytest.raises(SnapshotError, match=f"^{re.escape(str(archive))}: verification failed"):
            import_snapshot(fresh, archive, "0" * 64)
    finally:
        fresh.close()


def _tar(members: list[tuple[tarfile.TarInfo, bytes]]) -> bytes:
    raw = io.BytesIO()
    with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz, tarfile.open(fileobj=gz, mode="w",
                                                                             format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            info.size = len(data) if info.isreg() else 0
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return raw.getvalue()


def _file(name: str, data: bytes = b"x") -> tuple[tarfile.TarInfo, bytes]:
    return tarfile.TarInfo(name), data


def _special(name: str, kind: bytes, target: str = "") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info, b""


def _huge_pax() -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo("S/a.parquet")
    info.pax_headers = {"comment": "x" * (2 * HEADER_BYTES)}
    return info, b"x"


HOSTILE: dict[str, tuple[Callable[[Path], list[tuple[tarfile.TarInfo, bytes]]], str]] = {
    "dot-dot": (lambda s: [*_good(s)[:2], _file("S/../../evil.txt")], "not a plain name"),
    "absolute": (lambda s: [_file("/tmp/evil.txt")], "not a plain name"),
    "symlink": (lambda s: [*_good(s), _special("S/papers2.parquet", tarfile.SYMTYPE, "/etc/passwd")], "a link"),
    "hard link": (lambda s: [*_good(s), _special("S/x.parquet", tarfile.LNKTYPE, "S/README.md")], "a link"),
    "device": (lambda s: [_special("S/dev", tarfile.CHRTYPE)], "not a regular file"),
    "fifo": (lambda s: [_special("S/fifo", tarfile.FIFOTYPE)], "not a regular file"),
    "nested": (lambda s: [_special("S/sub", tarfile.DIRTYPE), _file("S/sub/a.parquet")], "not a regular file"),
    "nested file": (lambda s: [_file("S/sub/a.parquet")], "not a file directly in the folder"),
    "two folders": (lambda s: [_file("S/a.parquet"), _file("T/a.parquet")], "outside the archive's one folder"),
    "twice": (lambda s: [_file("S/a.parquet"), _file("S/a.parquet")], "in the archive twice"),
    "too many": (lambda s: [_file(f"S/t{i}.parquet") for i in range(MAX_MEMBERS + 1)], f"more than {MAX_MEMBERS}"),
    "huge header": (lambda s: [_huge_pax()], "header is larger"),
    "empty": (lambda s: [], "holds no file"),
}


def _good(folder: Path) -> list[tuple[tarfile.TarInfo, bytes]]:
    return [_file(f"S/{p.name}", p.read_bytes()) for p in sorted(folder.iterdir())]


@pytest.mark.parametrize("case", HOSTILE, ids=list(HOSTILE))
def test_a_hostile_archive_is_refused_and_writes_nothing(case: str, snapshot: tuple[Store, Path, str],
                                                        tmp_path: Path) -> None:
    _, folder, sha = snapshot
    members, why = HOSTILE[case]
    archive = tmp_path / "hostile.tar.gz"
    archive.write_bytes(_tar(members(folder)))
    data = tmp_path / "data"
    fresh = open_store(data / "grebench.duckdb")
    try:
        with pytest.raises(SnapshotError, match=why):
            import_snapshot(fresh, archive, sha)
        assert fresh.scalar("SELECT count(*) FROM papers") == 0
        report = verify_snapshot(archive, sha)
        assert not report["ok"] and why in report["problems"][0], report
    finally:
        fresh.close()
    assert all(p.name.startswith("grebench.duckdb") for p in data.iterdir())  # nothing unpacked is left
    assert not (tmp_path.parent / "evil.txt").exists() and not Path("/tmp/evil.txt").exists()


def test_unpacking_stops_at_the_byte_bound_and_refuses_what_is_not_an_archive(tmp_path: Path) -> None:
    archive = tmp_path / "big.tar.gz"
    archive.write_bytes(_tar([_file("S/a.parquet", b"\0" * 5000), _file("S/b.parquet", b"\0" * 5000)]))
    (tmp_path / "into").mkdir()
    with pytest.raises(ArchiveRefused, match=r"'S/b\.parquet': the archive unpacks to more than .* 8,000 bytes"):
        unpack(archive, tmp_path / "into", 8000)
    (tmp_path / "again").mkdir()
    assert unpack(archive, tmp_path / "again", 10_000) == tmp_path / "again" / "S"
    (tmp_path / "not.tar.gz").write_bytes(b"PAR1 not an archive")
    (tmp_path / "into2").mkdir()
    with pytest.raises(ArchiveRefused, match="not a snapshot archive"):
        unpack(tmp_path / "not.tar.gz", tmp_path / "into2", 10_000)

"""A snapshot's one-file download: deterministic, bounded, and it can only unpack into its own folder."""

from __future__ import annotations

import hashlib
import tarfile
from pathlib import Path

import pytest

from grebench.site._archives import ArchiveRefused, build_archive, publish_archives


def _snapshot(root: Path, name: str = "ICLR-2026") -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text('{"files": {}}')
    (folder / "papers.parquet").write_bytes(b"PAR1" + b"x" * 1000)
    (folder / "README.md").write_text("a snapshot")
    return folder


def test_the_archive_holds_the_folder_and_the_manifest_hash_and_is_the_same_every_time(tmp_path: Path) -> None:
    folder = _snapshot(tmp_path / "snapshots")
    first, again = tmp_path / "a.tar.gz", tmp_path / "b.tar.gz"
    build_archive(folder, first, 10**6)
    (folder / "README.md").touch()  # a new mtime changes nothing in the archive
    build_archive(folder, again, 10**6)
    assert first.read_bytes() == again.read_bytes()
    with tarfile.open(first) as tar:
        assert tar.getnames() == ["ICLR-2026/README.md", "ICLR-2026/manifest.json", "ICLR-2026/papers.parquet",
                                  "ICLR-2026/manifest.json.sha256"]
        check = tar.extractfile("ICLR-2026/manifest.json.sha256").read().decode()  # type: ignore[union-attr]
    assert check == hashlib.sha256(b'{"files": {}}').hexdigest() + "  manifest.json\n"


def test_links_odd_names_and_big_snapshots_get_no_archive(tmp_path: Path) -> None:
    folder = _snapshot(tmp_path / "snapshots")
    with pytest.raises(ArchiveRefused, match="archives up to"):
        build_archive(folder, tmp_path / "big.tar.gz", 100)
    (folder / "escape").symlink_to("/etc/passwd")
    with pytest.raises(ArchiveRefused, match="symbolic link"):
        build_archive(folder, tmp_path / "link.tar.gz", 10**6)
    (folder / "escape").unlink()
    (folder / "..hidden name").write_text("x")
    with pytest.raises(ArchiveRefused, match="not a plain file name"):
        build_archive(folder, tmp_path / "odd.tar.gz", 10**6)
    assert not list(tmp_path.glob("*.tar.gz")) and not list(tmp_path.glob(".*"))  # nothing half-written is left
    # published: the refused folder is skipped (its files stay listed one by one), a good one is linked
    _snapshot(tmp_path / "snapshots", "ICLR-2020")
    listed = publish_archives(tmp_path / "snapshots", tmp_path / "site", tmp_path / "cache", 10**6)
    assert [(a["name"], a["folder"]) for a in listed] == [("ICLR-2020.tar.gz", "ICLR-2020")]
    assert hashlib.sha256((tmp_path / "site" / "ICLR-2020.tar.gz").read_bytes()).hexdigest() == listed[0]["sha256"]

"""A snapshot's one-file download on the site: built once per manifest and archive format, linked, world-readable;
a folder that does not verify gets none (the archive itself: tests/store/test_snapshot_archive.py)."""

from __future__ import annotations

import hashlib
import stat
from pathlib import Path

from grebench.site._archives import publish_archives
from grebench.store import ARCHIVE_FORMAT, export_snapshot, open_store, venue_years
from tests.site.conftest import fill_store


def _snapshots(root: Path) -> dict[str, str]:
    """Both venue-years of the filled store cut into ``root``: folder -> manifest SHA-256."""
    store = open_store(None)
    try:
        fill_store(store)
        return {v["slug"]: export_snapshot(store, v["venue_id"], root / v["slug"])["manifest_sha256"]
                for v in venue_years(store)}
    finally:
        store.con.close()


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_archives_are_published_world_readable_and_a_folder_that_does_not_verify_gets_none(tmp_path: Path) -> None:
    source, cache = tmp_path / "snapshots", tmp_path / "cache"
    manifests = _snapshots(source)
    (source / "ICLR-2024" / "manifest.json.sha256").write_text("x  manifest.json\n")  # not the snapshot's
    listed = publish_archives(source, tmp_path / "site", cache, 10**8)
    assert [(a["name"], a["folder"]) for a in listed] == [("ICLR-2020.tar.gz", "ICLR-2020")]
    published = tmp_path / "site" / "ICLR-2020.tar.gz"
    assert hashlib.sha256(published.read_bytes()).hexdigest() == listed[0]["sha256"]
    assert _mode(published) == 0o644
    [cached] = cache.glob("ICLR-2020-*.tar.gz")
    assert cached.name == f"ICLR-2020-{manifests['ICLR-2020'][:16]}v{ARCHIVE_FORMAT}.tar.gz"


def test_an_archive_cached_by_an_earlier_format_or_private_is_replaced(tmp_path: Path) -> None:
    """An archive built before issue 63 (manifest hash only in its name, mode 0600, an extra member) is never
    served again: the cache is keyed by the format too, and the old one is removed."""
    source, cache = tmp_path / "snapshots", tmp_path / "cache"
    manifests = _snapshots(source)
    cache.mkdir()
    old = cache / f"ICLR-2020-{manifests['ICLR-2020'][:16]}.tar.gz"
    old.write_bytes(b"an archive of the earlier format")
    old.chmod(0o600)
    publish_archives(source, tmp_path / "site", cache, 10**8)
    assert not old.exists()
    [current] = cache.glob("ICLR-2020-*.tar.gz")
    current.chmod(0o600)  # a cache left private by hand (or by an older grebench) is published readable
    publish_archives(source, tmp_path / "again", cache, 10**8)
    assert _mode(tmp_path / "again" / "ICLR-2020.tar.gz") == 0o644

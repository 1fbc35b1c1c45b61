"""Issue 63: the archive the Downloads page offers, unpacked as a visitor unpacks it, imports with the page's own
command (the same boards as the source) and verifies; the archive itself imports too; every file the site writes is
world-readable (the archive was 0600)."""

from __future__ import annotations

import json
import os
import shlex
import stat
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bs4 import BeautifulSoup
from click.testing import CliRunner

from grebench.cli import main
from grebench.settings import load_settings
from grebench.site import build_site
from grebench.store import Store, export_snapshot, open_store, venue_years
from tests.conftest import FAST_ENV
from tests.site.conftest import fill_store

BOARDS = "SELECT b.*, r.* EXCLUDE (board_id) FROM boards b JOIN board_rows r USING (board_id) ORDER BY ALL"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A data dir with both venue-years cut as snapshots, and its site built (umask 022, a web host's usual)."""
    root = tmp_path_factory.mktemp("download")
    settings = load_settings(None, env={**FAST_ENV, "GREBENCH_DATA_DIR": str(root / "data")})
    store = open_store(settings.db_path)
    before = os.umask(0o022)
    try:
        fill_store(store)
        for v in venue_years(store):
            export_snapshot(store, v["venue_id"], settings.snapshots_path / v["slug"])
        site = Path(build_site(store, settings, root / "site")["out"])
    finally:
        os.umask(before)
        store.close()
    page = BeautifulSoup((site / "downloads.html").read_text(encoding="utf-8"), "html.parser")
    sections = {s["data-folder"]: {"command": s.select_one("code.import-command").get_text(),
                                   "archive": s.select_one("a.archive-download")["href"]}
                for s in page.select("section.snapshot")}
    yield {"settings": settings, "site": site, "sections": sections, "root": root}


def _boards(store: Store, venue_id: str) -> list[tuple[object, ...]]:
    return store.con.execute(BOARDS.replace("ORDER BY", "WHERE b.venue_id = ? ORDER BY"), [venue_id]).fetchall()


def _venue_id(folder: Path) -> str:
    return str(json.loads((folder / "manifest.json").read_text(encoding="utf-8"))["venue_id"])


def _same_boards(built: dict[str, Any], data: Path, venue_id: str) -> None:
    source = open_store(built["settings"].db_path, read_only=True)
    imported = open_store(data / "grebench.duckdb", read_only=True)
    try:
        assert _boards(imported, venue_id) == _boards(source, venue_id) != []
    finally:
        source.close()
        imported.close()


def _cli(args: list[str], data: Path) -> Any:
    return CliRunner().invoke(main, args, env={**FAST_ENV, "GREBENCH_DATA_DIR": str(data), "GREBENCH_CONFIG": None})


@pytest.mark.parametrize("folder", ["ICLR-2020", "ICLR-2024"])
def test_the_pages_command_imports_the_unpacked_archive_and_verify_says_ok(
        built: dict[str, Any], folder: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    section = built["sections"][folder]
    archive = built["site"] / section["archive"]
    assert archive.name == f"{folder}.tar.gz"
    user = tmp_path / "user"
    user.mkdir()
    with tarfile.open(archive) as tar:  # a plain extract, where the visitor then runs the command
        tar.extractall(user, filter="data")
    assert [p.name for p in user.iterdir()] == [folder]
    monkeypatch.chdir(user)
    command = shlex.split(section["command"])
    assert command[:3] == ["grebench", "snapshot", "import"] and command[-1] == folder
    result = _cli(command[1:], tmp_path / "data")
    assert result.exit_code == 0, result.output
    assert "(manifest authenticated)" in result.output and "warning" not in result.output
    _same_boards(built, tmp_path / "data", _venue_id(user / folder))
    checked = _cli(["snapshot", "verify", folder], tmp_path / "data")
    assert checked.exit_code == 0 and checked.output.startswith(f"{folder}: ok ("), checked.output


def test_the_archive_itself_imports_with_the_pages_hash(built: dict[str, Any], tmp_path: Path) -> None:
    folder = "ICLR-2020"
    section = built["sections"][folder]
    archive = built["site"] / section["archive"]
    command = shlex.split(section["command"])
    result = _cli([*command[1:-1], str(archive)], tmp_path / "data")
    assert result.exit_code == 0, result.output
    assert "(manifest authenticated)" in result.output
    _same_boards(built, tmp_path / "data", _venue_id(built["settings"].snapshots_path / folder))
    checked = _cli(["snapshot", "verify", *command[3:5], str(archive)], tmp_path / "data")
    assert checked.exit_code == 0 and ": ok (" in checked.output, checked.output
    # and a wrong hash is refused, nothing imported
    other = _cli(["snapshot", "import", "--manifest-sha256", "0" * 64, str(archive)], tmp_path / "other")
    assert other.exit_code == 1 and f"{archive}: verification failed" in other.output, other.output


def test_every_file_the_site_writes_is_world_readable(built: dict[str, Any]) -> None:
    site: Path = built["site"]
    archives = list((site / "snapshots").glob("*.tar.gz"))
    assert len(archives) == 2
    modes = {p.relative_to(site).as_posix(): stat.S_IMODE(p.stat().st_mode) for p in site.rglob("*")}
    assert {name: oct(mode) for name, mode in modes.items()
            if mode != (0o755 if (site / name).is_dir() else 0o644)} == {}

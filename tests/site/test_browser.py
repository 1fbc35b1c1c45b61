"""A real headless Chromium renders the static leaderboard page from file:// (DOM and PNG checked)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from grebench.settings import Settings
from grebench.site import build_site
from grebench.store import Store
from tests.site.conftest import chromium, console_errors, requires_chromium


def keep_artifact(path: Path) -> None:
    """Copy a screenshot to GREBENCH_TEST_ARTIFACTS when set (for looking at it after the run)."""
    target = os.environ.get("GREBENCH_TEST_ARTIFACTS")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, Path(target) / path.name)


@pytest.mark.browser
@requires_chromium
def test_leaderboard_page_renders_in_chromium(small_store: Store, settings: Settings, tmp_path: Path) -> None:
    site = Path(build_site(small_store, settings, tmp_path / "site")["out"])
    page = next((site / "boards").glob("iclr.cc-2020-*.html"))
    result = chromium(page.as_uri(), "--dump-dom", profile=tmp_path / "profile")
    assert result.returncode == 0, result.stderr[-2000:]
    dom = BeautifulSoup(result.stdout, "html.parser")
    rows = dom.select("table.board tbody tr")
    assert [r["data-candidate"] for r in rows] == ["late-llm", "human", "good-llm", "generic"]
    # sort.js ran: every header is a button (Enter and Space sort, as on any button)
    assert all(th.select_one("button.sort") is not None for th in dom.select("table.board th"))
    assert "Human baseline band" in dom.get_text() and dom.select_one("figure img")["src"].endswith(".svg")
    assert console_errors(result.stderr) == []

    png = tmp_path / "leaderboard.png"
    shot = chromium(page.as_uri(), f"--screenshot={png}", "--window-size=1280,1600", profile=tmp_path / "profile")
    assert shot.returncode == 0 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
    keep_artifact(png)

"""The app shows each board's history plot beside the board: the site's own figure (``history_svg``), or "no
history yet"; a real Chromium sees it on the Leaderboard tab."""

from __future__ import annotations

import base64
import shutil
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grebench.settings import Settings, load_settings
from grebench.site._app import board_history, create_app
from grebench.site._history import NO_HISTORY
from grebench.store import open_store
from tests.conftest import FAST_ENV
from tests.site._cdp import Browser
from tests.site.conftest import fill_store, launch_app, record_history, requires_chromium
from tests.site.test_browser import keep_artifact

SETUP = "offline / rules"
HISTORY_IMG = "document.querySelector('#board-history img[src^=\"data:image/svg+xml;base64,\"]')"


def _exported(root: Path, with_history: bool) -> Settings:
    """Settings on a data dir whose export holds the small store (and a replay's history of its boards)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings = load_settings(env={**FAST_ENV, "GREBENCH_DATA_DIR": str(root / "data"),
                                  "GREBENCH_APP_PORT": str(port)})
    store = open_store(settings.db_path)
    try:
        fill_store(store)
        if with_history:
            record_history(store)
        store.export_parquet(settings.export_path)
    finally:
        store.close()
    return settings


def _svg(html: str) -> str:
    data = html.split("data:image/svg+xml;base64,", 1)[1].split('"', 1)[0]
    return base64.b64decode(data).decode("utf-8")


def test_the_board_history_is_the_sites_figure_or_says_there_is_none(tmp_path: Path) -> None:
    plain = _exported(tmp_path / "plain", with_history=False)
    assert NO_HISTORY in board_history(plain, "ICLR.cc/2020/Conference", "gem-s", SETUP, False)
    replayed = _exported(tmp_path / "replayed", with_history=True)
    html = board_history(replayed, "ICLR.cc/2020/Conference", "gem-s", SETUP, False)
    assert NO_HISTORY not in html and "<figure" in html
    svg = _svg(html)
    assert "rank (band = 95%" in svg and "good-llm" in svg and "(1–" in svg  # the rank panel, its intervals
    assert board_history(replayed, "ICLR.cc/2020/Conference", "gem-s", "no / such", False) == ""


@pytest.fixture
def live_app(tmp_path: Path) -> Iterator[dict[str, Any]]:
    settings = _exported(tmp_path, with_history=True)
    demo = create_app(settings, resolver={})
    url = launch_app(demo, settings)
    yield {"url": url.rstrip("/"), "settings": settings}
    demo.close()


@pytest.mark.browser
@requires_chromium
def test_chromium_sees_the_history_plot_beside_the_board(live_app: dict[str, Any], tmp_path: Path) -> None:
    exe = shutil.which("chromium")
    assert exe is not None
    browser = Browser(exe, tmp_path / "profile")
    try:
        session = browser.open_tab(live_app["url"] + "/")
        deadline = time.monotonic() + 60  # the first load reads the export and draws the plot
        while not browser.evaluate(session, f"!!{HISTORY_IMG} && {HISTORY_IMG}.naturalWidth > 0"):
            assert time.monotonic() < deadline, "the app never showed the board's history plot"
            time.sleep(0.2)
        src = browser.evaluate(session, f"{HISTORY_IMG}.getAttribute('src')")
        assert "rank (band = 95%" in base64.b64decode(src.split(",", 1)[1]).decode("utf-8")
        caption = browser.evaluate(session, "document.querySelector('#board-history figcaption').textContent")
        assert "rank interval" in caption
        assert browser.evaluate(session, "document.querySelector('#board-table').textContent.includes('1–')")
        shot = browser.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}, session)
        png = tmp_path / "app-board-history.png"
        png.write_bytes(base64.b64decode(shot["data"]))
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
        keep_artifact(png)
    finally:
        browser.close()

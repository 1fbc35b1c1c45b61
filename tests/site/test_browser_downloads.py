"""Issue 27: a visitor downloads every published snapshot, from the static site and from the app, in a real
headless Chromium (click, the file arrives, its SHA-256 matches), and the first screens show the headline board
with its sample (screenshots checked)."""

from __future__ import annotations

import base64
import functools
import hashlib
import http.server
import json
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from grebench.cli import main
from grebench.settings import load_settings
from grebench.site import build_site
from grebench.site._app import create_app
from grebench.store import export_snapshot, open_store, venue_years, verify_snapshot
from tests.conftest import FAST_ENV
from tests.site._cdp import Browser
from tests.site._cdp import wait_for as _wait
from tests.site.conftest import fill_store, free_port, launch_app, requires_chromium
from tests.site.test_browser import keep_artifact
from tests.site.test_headline import HEADLINE_TITLE, SAMPLE_2024, headline_store

pytestmark = [pytest.mark.browser, requires_chromium]



def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A data dir with two cut snapshots and its export; the static site built from it, served on loopback."""
    root = tmp_path_factory.mktemp("downloads")
    settings = load_settings(None, env={**FAST_ENV, "GREBENCH_DATA_DIR": str(root / "data"),
                                        "GREBENCH_APP_PORT": str(free_port())})
    store = open_store(settings.db_path)
    fill_store(store)
    headline_store(store, settings)
    manifests = {v["slug"]: export_snapshot(store, v["venue_id"], settings.snapshots_path / v["slug"])
                 for v in venue_years(store)}
    store.export_parquet(settings.export_path)
    site = Path(build_site(store, settings, root / "site")["out"])
    store.close()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield {"settings": settings, "site": site, "manifests": manifests,
           "site_url": f"http://127.0.0.1:{server.server_address[1]}"}
    server.shutdown()
    server.server_close()


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    exe = shutil.which("chromium")
    assert exe is not None
    b = Browser(exe, tmp_path / "profile")
    yield b
    b.close()


def _open(browser: Browser, url: str) -> str:
    target = browser.send("Target.createTarget", {"url": url})["targetId"]
    session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    browser.send("Runtime.enable", session=session)
    return str(session)




def _reload(browser: Browser, session: str, ready: str) -> None:
    """Load the page again and wait until ``ready`` is true (Chromium lets one page load start about ten downloads
    from its links: a visitor downloading a whole snapshot reloads, or saves link by link); the folded lists of
    single files are opened, as a visitor opens them to click a file."""
    browser.evaluate(session, "window.__before_reload = true")
    browser.send("Page.reload", {}, session)
    _wait(browser, session, f"!window.__before_reload && document.readyState === 'complete' && ({ready})",
          "the page again")
    browser.evaluate(session, "document.querySelectorAll('details.snapshot-files-list').forEach(d => d.open = true)")


def _click_and_download(browser: Browser, session: str, selector: str, index: int, into: Path) -> Path:
    """Click the index-th link matching selector as a user would; wait until Chromium reports the file complete."""
    browser.send("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(into),
                                                 "eventsEnabled": True})
    found = browser.evaluate(session, f"(() => {{ const all = document.querySelectorAll({json.dumps(selector)}); "
                                      f"const a = all[{index}]; if (!a) return 'only ' + all.length + ' ' + "
                                      "document.body.innerText.slice(0, 300); "
                                      "a.scrollIntoView({block: 'center'}); const r = "
                                      "a.getBoundingClientRect(); return [a.href, r.left + r.width / 2, "
                                      "r.top + r.height / 2]; })()")
    assert isinstance(found, list), (index, found)
    name, x, y = found
    for kind in ("mousePressed", "mouseReleased"):  # a real click (mouse input), as a visitor clicks
        browser.send("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1},
                     session)
    try:
        begun = browser.wait_event("Browser.downloadWillBegin", lambda p: p["url"] == name)["params"]
    except TimeoutError:
        raise AssertionError(f"no download of {name}: events {[e['method'] for e in browser.events][-8:]}") from None
    done = browser.wait_event("Browser.downloadProgress",
                              lambda p: p["guid"] == begun["guid"] and p["state"] in ("completed", "canceled"))
    assert done["params"]["state"] == "completed", (name, done)
    return into / begun["suggestedFilename"]


def test_every_snapshot_downloads_from_the_static_site(published: dict[str, Any], browser: Browser,
                                                       tmp_path: Path) -> None:
    session = _open(browser, published["site_url"] + "/downloads.html")
    # the whole page, not its first section: Chromium runs scripts while a slow machine still parses the rest
    _wait(browser, session, "document.readyState === 'complete' && document.querySelectorAll('section.snapshot')"
          ".length", "the snapshot sections")
    sections = browser.evaluate(session, """[...document.querySelectorAll('section.snapshot')].map(s => ({
        folder: s.dataset.folder, sha: s.querySelector('.manifest-sha256').innerText,
        command: s.querySelector('.import-command').innerText,
        links: [...s.querySelectorAll('.snapshot-files a[download]')].map(a => [a.textContent, a.dataset.sha256])}))""")
    manifests = published["manifests"]
    assert sorted(s["folder"] for s in sections) == sorted(manifests)  # every published snapshot
    for i, section in enumerate(sections):
        folder, manifest = section["folder"], manifests[section["folder"]]
        assert section["sha"] == manifest["manifest_sha256"]
        assert section["command"] == f"grebench snapshot import --manifest-sha256 {manifest['manifest_sha256']} " \
                                     f"{folder}"
        on_disk = sorted(p.name for p in (published["settings"].snapshots_path / folder).iterdir())
        assert sorted(n.split("/", 1)[1] for n, _ in section["links"]) == on_disk
        target = tmp_path / "site-downloads" / folder
        target.mkdir(parents=True)
        for k, (name, sha) in enumerate(section["links"]):
            if k % 8 == 0:  # also before each snapshot: the count is per page load
                _reload(browser, session, "document.querySelectorAll('section.snapshot a[download]').length")
            got = _click_and_download(browser, session,
                                      f"section.snapshot:nth-of-type({i + 1}) .snapshot-files a[download]", k, target)
            assert got.name == name.split("/", 1)[1] and _sha(got) == sha, name
        report = verify_snapshot(target, manifest["manifest_sha256"])
        assert report["ok"] and report["authenticated"], report
    # the command shown imports the downloaded folder as it stands
    first = sorted(manifests)[0]
    env = {**FAST_ENV, "GREBENCH_DATA_DIR": str(tmp_path / "fresh")}
    command = next(s["command"] for s in sections if s["folder"] == first).split()
    result = CliRunner().invoke(main, [*command[1:-1], str(tmp_path / "site-downloads" / first)], env=env)
    assert result.exit_code == 0, result.output


def test_each_snapshot_is_one_archive_whose_hash_matches_the_page(published: dict[str, Any], browser: Browser,
                                                                  tmp_path: Path, monkeypatch: pytest.MonkeyPatch) \
        -> None:
    """One click per snapshot: the archive's SHA-256 is the page's, it unpacks into the snapshot's folder only and
    holds exactly the snapshot's files, and the command shown, run where it was unpacked, imports it with the same
    boards (issue 63: the archive carried a file verify refused, so the command failed)."""
    import tarfile

    session = _open(browser, published["site_url"] + "/downloads.html")
    _wait(browser, session, "document.readyState === 'complete' && document.querySelectorAll('a.archive-download')"
          ".length", "the archive links")
    shown = browser.evaluate(session, """[...document.querySelectorAll('section.snapshot')].map(s => ({
        folder: s.dataset.folder, manifest: s.querySelector('.manifest-sha256').innerText,
        archive: s.querySelector('.archive-sha256').innerText, command: s.querySelector('.import-command').innerText,
        size: s.querySelector('p.archive').innerText}))""")
    manifests = published["manifests"]
    assert sorted(s["folder"] for s in shown) == sorted(manifests)
    for i, section in enumerate(shown):
        folder = section["folder"]
        got = _click_and_download(browser, session, "a.archive-download", i, tmp_path / "archives")
        assert got.name == f"{folder}.tar.gz" and _sha(got) == section["archive"], section
        assert "KiB" in section["size"] or "MiB" in section["size"], section  # a size in words, not in bytes
        assert got.stat().st_size and (published["site"] / "snapshots" / got.name).stat().st_mode & 0o777 == 0o644
        with tarfile.open(got) as tar:
            names = tar.getnames()
            assert all(n.startswith(f"{folder}/") and ".." not in n for n in names), names
            tar.extractall(tmp_path / "unpacked", filter="data")
        unpacked = tmp_path / "unpacked" / folder
        assert sorted(p.name for p in unpacked.iterdir()) == \
            sorted(p.name for p in (published["settings"].snapshots_path / folder).iterdir())
        assert _sha(unpacked / "manifest.json") == section["manifest"] == manifests[folder]["manifest_sha256"]
        report = verify_snapshot(unpacked, section["manifest"])
        assert report["ok"] and report["authenticated"], report
    # the same bytes on every build: the published hash stays true
    again = Path(build_site_again(published))
    assert {p.name: _sha(p) for p in (again / "snapshots").glob("*.tar.gz")} == \
        {f"{s['folder']}.tar.gz": s["archive"] for s in shown}
    first = shown[0]
    env = {**FAST_ENV, "GREBENCH_DATA_DIR": str(tmp_path / "fresh")}
    monkeypatch.chdir(tmp_path / "unpacked")  # the command as shown, where the archive was unpacked
    result = CliRunner().invoke(main, first["command"].split()[1:], env=env)
    assert result.exit_code == 0 and "(manifest authenticated)" in result.output, result.output
    venue_id = manifests[first["folder"]]["venue_id"]
    query = ("SELECT b.*, r.* EXCLUDE (board_id) FROM boards b JOIN board_rows r USING (board_id) "
             "WHERE b.venue_id = ? ORDER BY ALL")
    boards = []
    for db in (published["settings"].db_path, tmp_path / "fresh" / "grebench.duckdb"):
        store = open_store(db, read_only=True)
        try:
            boards.append(store.con.execute(query, [venue_id]).fetchall())
        finally:
            store.close()
    assert boards[0] == boards[1] != []


def build_site_again(published: dict[str, Any]) -> str:
    """The site built once more from the same data dir (the archives come from their cache, or are rebuilt)."""
    settings = published["settings"]
    store = open_store(settings.db_path)
    try:
        return str(build_site(store, settings, published["site"].parent / "site-again", publish=False)["out"])
    finally:
        store.close()


@pytest.fixture(scope="module")
def live_app(published: dict[str, Any]) -> Iterator[str]:
    demo = create_app(published["settings"], resolver={})
    url = launch_app(demo, published["settings"])
    yield url.rstrip("/")
    demo.close()


FILE_LINKS = "#snapshot-files a[download]"


def test_every_snapshot_downloads_from_the_app(published: dict[str, Any], live_app: str, browser: Browser,
                                               tmp_path: Path) -> None:
    settings, manifests = published["settings"], published["manifests"]
    session = _open(browser, live_app + "/?tab=downloads")
    shown = _wait(browser, session, "document.querySelector('#snapshot-info')?.innerText.includes('import') && "
                                    "document.querySelector('#snapshot-info').innerText", "the snapshot's command")
    folder = next(f for f in manifests if f"{f}.tar.gz" in shown)
    manifest = manifests[folder]
    assert f"grebench snapshot import --manifest-sha256 {manifest['manifest_sha256']} {folder}" in shown
    count = len(list((settings.snapshots_path / folder).iterdir())) + 1  # its files and its archive
    _wait(browser, session, f"document.querySelectorAll('{FILE_LINKS}').length === {count}", "the file links")
    archive = settings.snapshot_archives_path
    target = tmp_path / "app-downloads" / folder
    target.mkdir(parents=True)
    for k in range(count):
        if k and k % 8 == 0:
            _reload(browser, session, f"document.querySelectorAll('{FILE_LINKS}').length === {count}")
        got = _click_and_download(browser, session, FILE_LINKS, k, target)
        if got.name.endswith(".tar.gz"):  # the archive: the cached one, whose hash the page states
            assert _sha(got) == _sha(next(archive.glob(f"{folder}-*.tar.gz"))) and _sha(got) in shown, shown
            got.unlink()
            continue
        assert _sha(got) == _sha(settings.snapshots_path / folder / got.name), got.name
    report = verify_snapshot(target, manifest["manifest_sha256"])
    assert report["ok"] and report["authenticated"], report

    # every snapshot through the app's API (what the dropdown calls), each file fetched over HTTP
    from gradio_client import Client

    client = Client(live_app, verbose=False)
    for name, manifest in manifests.items():
        files, text = client.predict(name, api_name="/snapshot")
        assert manifest["manifest_sha256"] in text
        fetched = {Path(f).name: _sha(Path(f)) for f in files if not f.endswith(".tar.gz")}
        assert fetched == {p.name: _sha(p) for p in (settings.snapshots_path / name).iterdir()}
        assert sum(f.endswith(f"{name}.tar.gz") for f in files) == 1
    # the data dir stays closed: the snapshot's own path (and the store) answer 403
    for path in (settings.snapshots_path / folder / "manifest.json", settings.db_path):
        assert httpx.get(f"{live_app}/gradio_api/file={path}").status_code == 403


def _screenshot(browser: Browser, session: str, path: Path) -> None:
    shot = browser.send("Page.captureScreenshot", {"format": "png"}, session)
    path.write_bytes(base64.b64decode(shot["data"]))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 20_000
    keep_artifact(path)


VISIBLE = """(sel) => { const el = document.querySelector(sel); if (!el) return null;
  const r = el.getBoundingClientRect();
  return {top: r.top, bottom: r.bottom, height: window.innerHeight, text: el.innerText}; }"""


def test_first_screens_show_the_headline_board_and_its_sample(published: dict[str, Any], live_app: str,
                                                              browser: Browser, tmp_path: Path) -> None:
    sample = SAMPLE_2024.format(seed=published["settings"].seed)
    session = _open(browser, live_app + "/")
    _wait(browser, session, "document.querySelector('#board-info')?.innerText.includes('Sample:')", "board info")
    _wait(browser, session, "document.querySelector('#board-table')?.innerText.includes('good-llm') && "
                            "!document.querySelector('.pending, .generating')", "the board rows, updated")
    info = browser.evaluate(session, f"({VISIBLE})('#board-info')")
    assert "ICLR 2024" in info["text"] and HEADLINE_TITLE in info["text"] and sample in info["text"]
    assert info["top"] >= 0 and info["bottom"] <= info["height"]  # on the first screen, no scrolling
    values = browser.evaluate(session, "[...document.querySelectorAll('input[role=listbox], .wrap input')]"
                                       ".map(i => i.value)")
    assert "GEM-S (abstract)" in values and "scored by SmolLM2-135M (hf, float32) · rules preprocessor" in values
    _screenshot(browser, session, tmp_path / "app-first-screen.png")

    site = published["site"]
    page = next(p for p in (site / "boards").glob("iclr.cc-2024-*-gem-s-hf*.html"))
    board = _open(browser, f"{published['site_url']}/boards/{page.name}")
    _wait(browser, board, "!!document.querySelector('p.sample')", "the board page")
    head = browser.evaluate(board, f"({VISIBLE})('h1')")
    line = browser.evaluate(board, f"({VISIBLE})('p.sample')")
    assert "GEM-S" in head["text"] and sample in line["text"] and line["bottom"] <= line["height"]
    _screenshot(browser, board, tmp_path / "site-board-page.png")

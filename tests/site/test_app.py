"""The Gradio app driven through gradio_client: submissions, server-side checks, file routes, key secrecy."""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from bs4 import BeautifulSoup

from grebench.scoring import compute_boards
from grebench.settings import Settings, load_settings
from grebench.site._app import LOG_HEADERS, create_app, launch_kwargs, queue_path
from grebench.store import open_store
from tests.conftest import FAST_ENV
from tests.site.conftest import (
    add_attribution,
    chromium,
    console_errors,
    exported_app_settings,
    fill_store,
    free_port,
    launch_app,
    requires_chromium,
)
from tests.site.test_browser import keep_artifact

CANARY = "sk-CANARY-app-5e1d77c0"
RESOLVER = {"api.model.example": ["93.184.216.34"], "sneaky.example": ["10.9.8.7"], "eval.example": ["93.184.216.99"]}



@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The app on a free loopback port, reading an export of the small store."""
    root = tmp_path_factory.mktemp("app")
    config = root / "grebench.toml"
    # every test submits from 127.0.0.1 and refused submissions count toward the address limit
    config.write_text('estimator = "vllm:http://eval.example:8000"\nsubmissions_per_address_per_week = 1000\n')
    settings = load_settings(config, env={"GREBENCH_DATA_DIR": str(root / "data"),
                                          "GREBENCH_APP_PORT": str(free_port())})
    store = open_store(settings.db_path)
    fill_store(store)
    add_attribution(store)
    store.export_parquet(settings.data_path / "export")
    store.close()
    demo = create_app(settings, resolver=RESOLVER)
    url = launch_app(demo, settings)
    from gradio_client import Client

    client = Client(url, verbose=False)
    yield {"url": url.rstrip("/"), "client": client, "settings": settings, "config": config}
    demo.close()


def _submit(client: Any, **fields: str) -> str:
    base = {"model_name": "", "model_string": "", "base_url": "", "released": "2025-03-01", "cutoff": "2024-12-01",
            "contact": "alice@example.org", "api_key": "", "params": ""}
    base.update(fields)
    return str(client.predict(*base.values(), api_name="/submit"))


def test_good_submission_is_queued_and_listed(app: dict[str, Any], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    message = _submit(app["client"], model_name="Acme-1", base_url="https://api.model.example/v1",
                      api_key=CANARY, contact="acme@example.org")
    assert message.startswith("Queued as"), message
    assert CANARY not in message
    queue = app["client"].predict(api_name="/queue")
    rows = queue["data"] if isinstance(queue, dict) else queue
    assert any(r[1] == "Acme-1" and r[2] == "queued" for r in rows)
    assert CANARY not in str(queue) and CANARY not in caplog.text
    assert CANARY.encode() not in queue_path(app["settings"]).read_bytes()
    # the Submissions tab reads the published export (the scheduler copies the log there): its endpoint answers
    log = app["client"].predict(api_name="/submissions_log")
    assert (log["headers"] if isinstance(log, dict) else LOG_HEADERS) == LOG_HEADERS
    assert CANARY not in str(log) and "api.model.example" not in str(log)


@pytest.mark.parametrize(("url", "reason"), [
    ("https://169.254.169.254/", "link-local"),
    ("https://[::ffff:127.0.0.1]/", "IPv4-mapped"),
    ("https://2130706433/", "numerically encoded"),
    ("https://0177.0.0.1/", "numerically encoded"),
    ("https://127.0.0.1:22/", "port 22"),
    ("http://example.com/v1", "plain http"),
    ("file:///etc/passwd", "scheme"),
    ("https://10.0.0.5/v1", "private"),
    ("https://sneaky.example/v1", "private"),
    ("https://eval.example:8000/v1", "own services"),
])
def test_bad_urls_are_refused_through_the_api(app: dict[str, Any], url: str, reason: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    attempts: list[Any] = []
    real_connect = socket.socket.connect

    def connect(sock: socket.socket, address: Any) -> Any:
        if not (isinstance(address, tuple) and address[0] in ("127.0.0.1", "::1", "localhost")):
            attempts.append(address)
            raise AssertionError(f"outbound connection to {address}")
        return real_connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    message = _submit(app["client"], model_name="Evil", base_url=url)
    assert message.startswith("Rejected: base URL rejected") and reason in message, message
    assert attempts == []


def test_file_routes_cannot_read_the_store_or_secrets(app: dict[str, Any]) -> None:
    settings: Settings = app["settings"]
    targets = [settings.db_path, queue_path(settings), settings.data_path / "export" / "scores.parquet",
               app["config"], Path("/etc/passwd")]
    paths = []
    for target in targets:
        text = str(target.resolve())
        paths += [text, text.replace(str(settings.data_path.resolve()), str(settings.data_path / "export" / "..")),
                  f"{Path.cwd()}/../../..{text}", f"..%2F..%2F..{text}"]
    with httpx.Client(timeout=10) as http:
        for path in paths:
            for prefix in ("/gradio_api/file=", "/file=", "/gradio_api/file/"):
                response = http.get(app["url"] + prefix + path)
                assert response.status_code in (403, 404, 405), (prefix, path, response.status_code)
                assert b"DUCK" not in response.content and b"estimator" not in response.content
                assert b"root:" not in response.content


def test_model_and_paper_endpoints_read_the_export(app: dict[str, Any]) -> None:
    scores, _window, sample = app["client"].predict("good-llm", api_name="/model")
    data = scores["data"] if isinstance(scores, dict) else scores
    assert {row[0] for row in data} == {"ICLR 2020", "ICLR 2024"}  # venue-years in words, not ids
    assert "Judgment of good-llm" in sample
    head, reviews, _pairs, lines = app["client"].predict("p2020_0", api_name="/paper")
    assert head.startswith("Paper 0 of 2020")
    shaded = [(span["token"], span["class_or_confidence"]) for span in lines]  # the shaded lines, with their class
    assert ("The reviewer appreciates line 0 of human <b>bold</b>  [0.80]\n", "carries information") in shaded
    assert ("The reviewer appreciates line 0 of generic <b>bold</b>  [-0.50]\n", "less than none") in shaded
    texts = [r[2] for r in (reviews["data"] if isinstance(reviews, dict) else reviews)]
    assert any("<script>alert('xss')</script>" in t for t in texts)


def test_an_uploaded_import_is_checked_line_by_line_and_queued(app: dict[str, Any], tmp_path: Path) -> None:
    from gradio_client import handle_file

    def upload(name: str, lines: list[Any] | None, contact: str = "carol@example.org") -> str:
        path = None
        if lines is not None:
            path = tmp_path / f"{name}.jsonl"
            path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
        return str(app["client"].predict(name, contact, "2019-01-01", "agent-x", "",
                                         None if path is None else handle_file(str(path)), api_name="/submit_import"))

    good = upload("Agent-Web", [{"paper_id": "p2020_0", "review": "Summary: solid."},
                                {"paper_id": "p2024_1", "review": "Weaknesses: few baselines."}])
    assert good.startswith("Queued as"), good
    assert "2 reviews of Agent-Web (declared cutoff 2019-01-01: shown, not trusted" in good, good
    queue = app["client"].predict(api_name="/queue")
    rows = queue["data"] if isinstance(queue, dict) else queue
    assert any(r[1] == "Agent-Web (imported reviews)" and r[2] == "queued" for r in rows)

    bad = upload("Agent-Bad", [{"paper_id": "nope", "review": "x"}, "", {"paper_id": "p2020_1", "review": " "},
                               '{"paper_id": "p2020_2", "rev'])
    assert bad.splitlines() == ["Rejected: the uploaded file refused, nothing written: 3 bad lines",
                                "- line 1: unknown paper id 'nope' (not in the store)", "- line 3: review is empty",
                                bad.splitlines()[3]]
    assert bad.splitlines()[3].startswith("- line 4: invalid JSON (truncated or malformed)")
    assert "is taken" in upload("good-llm", [{"paper_id": "p2020_0", "review": "x"}])  # a candidate of the export
    assert upload("Agent-None", None).startswith("Rejected: choose a JSON Lines file")
    names = [r[1] for r in (app["client"].predict(api_name="/queue")["data"])]
    assert "Agent-Bad (imported reviews)" not in names and "good-llm (imported reviews)" not in names


@pytest.mark.browser
@requires_chromium
def test_submit_tab_renders_in_chromium(app: dict[str, Any], tmp_path: Path) -> None:
    url = app["url"] + "/?tab=submit"
    result = chromium(url, "--dump-dom", profile=tmp_path / "profile")
    assert result.returncode == 0, result.stderr[-2000:]
    dom = BeautifulSoup(result.stdout, "html.parser")
    tabs = {b.get_text(strip=True): b.get("aria-selected") for b in dom.select("button[role=tab]")}
    # tabs that do not fit the window's width are in Gradio's overflow menu (not rendered as tab buttons)
    assert tabs.get("Submit") == "true", tabs
    assert {"Leaderboard", "Model", "Paper", "Compare", "Submit", "Queue"} <= set(tabs) <= {
        "Leaderboard", "Model", "Paper", "Compare", "Submit", "Queue", "Submissions", "Downloads"}, tabs
    assert all(selected == "false" for name, selected in tabs.items() if name != "Submit"), tabs
    for tag in dom(["script", "style"]):
        tag.decompose()
    text = dom.get_text(" ", strip=True)
    for label in ("Model name", "OpenAI-compatible base URL", "Training-data cutoff (YYYY-MM-DD)", "API key"):
        assert label in text
    assert dom.select('input[type="password"]'), "the API key field must be a password input"
    assert console_errors(result.stderr) == []
    png = tmp_path / "app-submit.png"
    shot = chromium(url, f"--screenshot={png}", "--window-size=1280,1600", profile=tmp_path / "profile")
    assert shot.returncode == 0 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
    keep_artifact(png)


def _page_load(demo: Any) -> Any:
    """The page-load handler (what a browser runs on opening the app), called as Gradio calls it."""
    return next(f.fn for f in demo.fns.values() if f.name == "load_board")()


def test_loads_reuse_the_cached_export_and_pick_up_a_new_one(tmp_path: Path) -> None:
    from gradio_client import Client

    from grebench.site._app import reader

    settings = load_settings(None, env={**FAST_ENV, "GREBENCH_DATA_DIR": str(tmp_path / "data"),
                                        "GREBENCH_APP_PORT": str(free_port()), "GREBENCH_BOOTSTRAP_SAMPLES": "300"})
    store = open_store(settings.db_path)
    fill_store(store)
    export = settings.data_path / "export"
    store.export_parquet(export)
    demo = create_app(settings, resolver=RESOLVER)
    url = launch_app(demo, settings)
    try:
        cache = reader(settings)
        client = Client(url, verbose=False)
        first = _page_load(demo)
        board = {row[1]: row for row in first[3]}
        model = client.predict("good-llm", api_name="/model")[0]["data"]
        assert cache.builds == 1
        computed = cache.view_computes
        # a second page load and a second model query: same data, nothing rebuilt or recomputed
        assert _page_load(demo)[3] == first[3]
        assert client.predict("good-llm", api_name="/model")[0]["data"] == model
        # a re-export of unchanged rows rewrites the files (new inode and mtime) with the same bytes
        store.export_parquet(export)
        assert _page_load(demo)[3] == first[3]
        assert (cache.builds, cache.view_computes) == (1, computed)

        # the Model tab quotes the Leaderboard tab's numbers (same bootstrap_samples and seed)
        # (the page opens on the headline board: the latest venue-year, ICLR 2024)
        row_2020 = next(r for r in model if r[0] == "ICLR 2024")
        assert row_2020[4] == board["good-llm"][3]
        low, high = (float(x) for x in board["good-llm"][4].strip("[]").split(", "))  # "[2.32, 2.52]"
        assert (low, high) == (pytest.approx(row_2020[5], abs=0.006), pytest.approx(row_2020[6], abs=0.006))

        # new scores (and the boards the scoring stage computes from them) exported: the next load shows them
        store.con.execute("UPDATE scores SET pmi = pmi + 5 WHERE candidate = 'good-llm'")
        compute_boards(store, settings)
        store.export_parquet(export)
        fresh = {row[1]: row for row in _page_load(demo)[3]}
        assert cache.builds == 2
        assert fresh["good-llm"][3] == pytest.approx(board["good-llm"][3] + 5, abs=1e-3)
        assert fresh["good-llm"][0] == "1" and board["good-llm"][0] != "1"  # now ranked first
        model_now = client.predict("good-llm", api_name="/model")[0]["data"]
        assert next(r for r in model_now if r[0] == row_2020[0])[4] == pytest.approx(row_2020[4] + 5, abs=1e-3)
    finally:
        demo.close()
        store.close()


def test_launch_computes_the_first_load_before_it_listens(tmp_path: Path) -> None:
    """Issue 50: the first visitor after a start waited for the reader's cache (3.4 s against 0.8 s for the next).
    ``launch`` computes the page load's work first: the first load then computes nothing and builds no reader."""
    from grebench.site._app import launch, reader

    settings = exported_app_settings(tmp_path / "data")
    demo = create_app(settings, resolver=RESOLVER)
    cache = reader(settings)
    assert (cache.builds, cache.view_computes) == (0, 0)  # creating the app reads nothing
    launch(demo, settings, prevent_thread_lock=True, quiet=True)
    try:
        warmed = (cache.builds, cache.view_computes)
        assert warmed[0] == 1 and warmed[1] > 0
        board = _page_load(demo)[3]
        assert board and (cache.builds, cache.view_computes) == warmed  # the first visitor's load: all cached
    finally:
        demo.close()


def test_session_state_is_capped(tmp_path: Path) -> None:
    """Issue 19: memory grew with sessions (Gradio keeps state for 10,000); the app keeps app_session_capacity."""
    import uuid

    from gradio_client import Client

    settings = load_settings(env={"GREBENCH_DATA_DIR": str(tmp_path / "data"), "GREBENCH_APP_PORT": str(free_port()),
                                  "GREBENCH_APP_SESSION_CAPACITY": "5"})
    store = open_store(settings.db_path)
    fill_store(store)
    store.export_parquet(settings.data_path / "export")
    store.close()
    demo = create_app(settings, resolver=RESOLVER)
    assert demo.state_session_capacity == 5 and launch_kwargs(settings)["state_session_capacity"] == 5
    url = launch_app(demo, settings)
    try:
        client = Client(url, verbose=False)
        seen = 0
        for _ in range(12):  # twelve visitors, each its own session
            client.session_hash = uuid.uuid4().hex
            client.predict(api_name="/queue")
            seen = max(seen, len(demo.state_holder.session_data))
        assert 0 < seen <= 5 and len(demo.state_holder.session_data) <= 5
    finally:
        demo.close()


def test_a_warm_up_that_fails_does_not_keep_the_app_from_starting(tmp_path: Path,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    from grebench.site._app import launch

    settings = load_settings(None, env={**FAST_ENV, "GREBENCH_DATA_DIR": str(tmp_path / "data"),
                                        "GREBENCH_APP_PORT": str(free_port())})
    demo = create_app(settings, resolver=RESOLVER)

    def broken() -> None:
        raise OSError("the export is unreadable")

    demo.grebench_warm_up = broken
    launch(demo, settings, prevent_thread_lock=True, quiet=True)
    try:
        with socket.create_connection(("127.0.0.1", settings.app.app_port), timeout=10):
            pass  # listening
        assert "could not be computed ahead (OSError: the export is unreadable)" in caplog.text
    finally:
        demo.close()

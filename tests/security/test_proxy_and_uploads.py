"""The client address comes only from ``app_trusted_proxies`` (uvicorn's proxy-header handling follows it), and
Gradio's own upload route is rate-limited per address (refused requests count), capped in count and bytes, and
uploaded copies are removed after use — all through real HTTP requests to a launched Gradio app."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from grebench.settings import Settings, load_settings
from grebench.site import launch
from grebench.site._app import client_address, trusted_proxies
from grebench.site._uploads import discard_upload
from tests.security.conftest import free_port

FORGED = "203.0.113.9"


def _settings(tmp_path: Path, **values: Any) -> Settings:
    config = tmp_path / f"grebench-{free_port()}.toml"
    lines = ['app_host = "127.0.0.1"', f"app_port = {free_port()}"]
    lines += [f"{k} = {v!r}" if isinstance(v, str) else f"{k} = {v}" for k, v in values.items()]
    config.write_text("\n".join(lines).replace("'", '"') + "\n")
    return load_settings(config, env={"GREBENCH_DATA_DIR": str(tmp_path / "data")})


def _launch(settings: Settings) -> tuple[Any, str]:
    import gradio as gr

    proxies = trusted_proxies(settings.app.app_trusted_proxies)

    def who(text: str, request: gr.Request) -> str:
        return client_address(request, proxies) or ""

    who.__annotations__["request"] = gr.Request  # how Gradio knows to pass the request (annotations are strings)

    with gr.Blocks() as demo:
        box, out = gr.Textbox(), gr.Textbox()
        box.submit(who, box, out, api_name="who")
    _, url, _ = launch(demo, settings, prevent_thread_lock=True, quiet=True)  # as the product launches it
    return demo, url.rstrip("/")


def _who(url: str) -> str:
    from gradio_client import Client

    return str(Client(url, verbose=False, headers={"X-Forwarded-For": FORGED}).predict("x", api_name="/who"))


@pytest.mark.parametrize(("trusted", "seen"), [("", "127.0.0.1"), ("127.0.0.0/8", FORGED)])
def test_forwarded_for_is_believed_only_from_app_trusted_proxies(tmp_path: Path, trusted: str, seen: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FORWARDED_ALLOW_IPS", raising=False)
    demo, url = _launch(_settings(tmp_path, app_trusted_proxies=trusted))
    try:
        assert _who(url) == seen  # a real request from 127.0.0.1 carrying X-Forwarded-For: 203.0.113.9
    finally:
        demo.close()


@pytest.fixture
def upload_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Path]]:
    folder = tmp_path / "gradio-uploads"
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(folder))
    demo, url = _launch(_settings(tmp_path, app_uploads_per_address_per_hour=5, app_upload_max_files=3))
    try:
        yield url, folder
    finally:
        demo.close()


def test_upload_route_is_capped_rate_limited_and_refusals_count(upload_app: tuple[str, Path]) -> None:
    url, folder = upload_app
    statuses = []
    with httpx.Client(timeout=30) as http:
        for i in range(3):
            answer = http.post(f"{url}/gradio_api/upload", files={"files": (f"r{i}.jsonl", b"{}\n")})
            statuses.append(answer.status_code)
        full = http.post(f"{url}/gradio_api/upload", files={"files": ("r3.jsonl", b"{}\n")})
        big = http.post(f"{url}/gradio_api/upload", content=b"x" * (16 * 1024 * 1024 + 128 * 1024),
                        headers={"Content-Type": "multipart/form-data; boundary=x"})
        limited = http.post(f"{url}/gradio_api/upload", files={"files": ("r5.jsonl", b"{}\n")})
    assert statuses == [200, 200, 200]
    assert full.status_code == 503 and "upload space is full" in full.text
    assert big.status_code == 413
    assert limited.status_code == 429 and "uploads per hour" in limited.text  # the 6th: the refusals counted
    stored = [p for p in folder.rglob("*") if p.is_file()]
    assert len(stored) == 3
    assert discard_upload(stored[0]) and not stored[0].exists()


def test_discard_upload_removes_only_files_in_the_upload_folder(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "up"
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(folder))
    inside = folder / "abc" / "r.jsonl"
    inside.parent.mkdir(parents=True)
    inside.write_text("{}")
    outside = tmp_path / "store.duckdb"
    outside.write_text("keep")
    assert not discard_upload(outside) and outside.exists()
    assert not discard_upload(folder / ".." / "store.duckdb") and outside.exists()
    assert discard_upload(inside) and not inside.exists() and not inside.parent.exists()


def test_files_left_past_every_apps_cache_age_do_not_fill_the_upload_space(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Gradio's upload folder (/tmp/gradio unless GRADIO_TEMP_DIR) outlives an app: files of a process that ended
    before its ``delete_cache`` ran stay there.  Before, they counted against the space, so after enough ended app
    processes every upload was refused "the upload space is full" (found when a test run on a machine with earlier
    runs' downloads left behind failed).  Files older than ``app_upload_ttl_s`` are past every app's cleanup age."""
    import os
    import time

    from grebench.site._uploads import UploadQuota

    folder = tmp_path / "gradio"
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(folder))
    for i in range(5):  # another app's leftovers, two hours old
        path = folder / f"old{i}" / "manifest.json"
        path.parent.mkdir(parents=True)
        path.write_bytes(b"{}")
        os.utime(path, (time.time() - 7200, time.time() - 7200))
    quota = UploadQuota(per_hour=100, files_per_hour=100, bytes_per_hour=1 << 30, max_files=3, max_bytes=1 << 30,
                        max_age_s=3600)
    assert quota.before("127.0.0.1", 10) is None
    for i in range(3):  # this hour's files do count
        (folder / f"new{i}").write_bytes(b"x")
    refused = quota.before("127.0.0.1", 10)
    assert refused is not None and refused[0] == 503

"""Issue 31 §5: the app's own limits, through real HTTP to a launched Gradio app on 127.0.0.1 (clients on 127.0.0.x).

* Every route has a body cap, enforced before the body is read: a declared Content-Length over it is refused at once,
  and a chunked body (no Content-Length) is counted and refused after at most the cap was kept (413, JSON).
* Every route has a request-rate cap per client address (429, JSON); another address is not affected.
* One request carries at most ``app_upload_files_per_request`` files: a multipart POST of 900 files stores none.
* Each address has its own share of the upload space: one address using its share leaves room for the others.
* The app's memory stays flat under repeated big requests (a separate process, its peak RSS read from /proc).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from grebench.site import _limits
from grebench.site._limits import OBSERVED
from tests.security._http import post_streamed
from tests.security.test_proxy_and_uploads import _launch, _settings

CAP = 256 * 1024  # app_max_body_bytes in these tests


def _client(source: str) -> httpx.Client:
    return httpx.Client(timeout=30, transport=httpx.HTTPTransport(local_address=source))


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Path]]:
    folder = tmp_path / "gradio-uploads"
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(folder))
    monkeypatch.setattr(_limits, "_clock", lambda: 1000.0)  # the rate buckets never refill during a test
    demo, url = _launch(_settings(tmp_path, app_max_body_bytes=CAP, app_requests_per_address_per_min=20,
                                  app_upload_files_per_address_per_hour=2, app_upload_max_files=50))
    try:
        yield url, folder
    finally:
        demo.close()


def _stored(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()] if folder.exists() else []


def test_every_route_caps_the_body_before_reading_it(app: tuple[str, Path]) -> None:
    url, _ = app
    OBSERVED.max_read_refused = OBSERVED.max_received_refused = 0
    # 300 MB declared: refused from the header, whatever follows
    declared = post_streamed(url, "/gradio_api/call/who", 16 * CAP, declare=300_000_000, source="127.0.0.2")
    assert declared.status == 413 and declared.json()["read"] == 0, declared
    # chunked, no Content-Length: counted in the middleware, refused after at most the cap was kept
    for path in ("/gradio_api/call/who", "/gradio_api/component_server", "/gradio_api/queue/join"):
        chunked = post_streamed(url, path, 64 * CAP, prefix=b'{"data": ["', source="127.0.0.2")
        assert chunked.status == 413, (path, chunked)
        answer = chunked.json()
        assert answer["limit"] == CAP and answer["read"] <= CAP and "larger than" in answer["error"], answer
    assert 0 < OBSERVED.max_read_refused <= CAP, OBSERVED  # kept; received is one server message more, which
    # uvicorn bounds: it pauses reading past 64 KiB buffered, after one socket read of at most 256 KiB
    assert OBSERVED.max_received_refused <= CAP + 64 * 1024 + 256 * 1024, OBSERVED
    # an ordinary call still goes through
    with _client("127.0.0.2") as http:
        ok = http.post(f"{url}/gradio_api/call/who", json={"data": ["x"]})
    assert ok.status_code == 200 and "event_id" in ok.json()


def test_every_route_caps_the_request_rate_per_address(app: tuple[str, Path]) -> None:
    url, _ = app
    with _client("127.0.0.3") as http:
        statuses = [http.get(f"{url}/gradio_api/info").status_code for _ in range(21)]
        refused = http.get(f"{url}/config")
    assert statuses[:20] == [200] * 20 and statuses[20] == 429
    assert refused.status_code == 429 and "too many requests" in refused.json()["error"]
    with _client("127.0.0.4") as other:
        assert other.get(f"{url}/gradio_api/info").status_code == 200  # another address keeps its own allowance


def test_one_request_cannot_carry_many_files(app: tuple[str, Path]) -> None:
    url, folder = app
    with _client("127.0.0.5") as http:
        many = http.post(f"{url}/gradio_api/upload", files=[("files", (f"r{i}.jsonl", b"{}\n")) for i in range(900)])
        two = http.post(f"{url}/gradio_api/upload", files=[("files", (f"{n}.jsonl", b"{}\n")) for n in "ab"])
        one = http.post(f"{url}/gradio_api/upload", files={"files": ("c.jsonl", b"{}\n")})
    assert many.status_code == 413 and "file(s) per request" in many.json()["error"], many.text
    assert two.status_code == 413
    assert one.status_code == 200
    assert len(_stored(folder)) == 1  # none of the 900 (or of the two) was stored


def test_each_address_has_its_own_share_of_the_upload_space(app: tuple[str, Path]) -> None:
    url, folder = app
    with _client("127.0.0.6") as greedy:
        mine = [greedy.post(f"{url}/gradio_api/upload", files={"files": (f"g{i}.jsonl", b"{}\n")}).status_code
                for i in range(3)]
        over = greedy.post(f"{url}/gradio_api/upload", files={"files": ("g.jsonl", b"{}\n")})
    assert mine == [200, 200, 429] and over.status_code == 429 and "share" in over.json()["error"]
    with _client("127.0.0.7") as someone_else:
        assert someone_else.post(f"{url}/gradio_api/upload", files={"files": ("s.jsonl", b"{}\n")}).status_code == 200
    assert len(_stored(folder)) == 3


_SERVE = """
import sys
from pathlib import Path
import gradio as gr
from grebench.settings import load_settings
from grebench.site._app import launch_kwargs

settings = load_settings(Path(sys.argv[1]), env={"GREBENCH_DATA_DIR": sys.argv[2]})
with gr.Blocks() as demo:
    box, out = gr.Textbox(), gr.Textbox()
    box.submit(lambda text: text, box, out, api_name="who")
kwargs = launch_kwargs(settings)
kwargs.update(prevent_thread_lock=True, quiet=True)
_, url, _ = demo.launch(**kwargs)
print(url, flush=True)
sys.stdin.read()  # serve until the test closes stdin
demo.close()
"""


def _peak_kib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+)", status).group(1))  # type: ignore[union-attr]


def test_the_apps_memory_stays_flat_under_big_requests(tmp_path: Path) -> None:
    config = tmp_path / "grebench.toml"
    from tests.security.conftest import free_port

    config.write_text(f'app_host = "127.0.0.1"\napp_port = {free_port()}\n')
    child = subprocess.Popen([sys.executable, "-c", _SERVE, str(config), str(tmp_path / "data")],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             cwd=Path(__file__).resolve().parents[2], env={**_env(), "GRADIO_TEMP_DIR":
                                                                            str(tmp_path / "up")})
    try:
        assert child.stdout is not None
        url = child.stdout.readline().strip().rstrip("/")
        with httpx.Client(timeout=30) as http:  # warm the routes up: their first use allocates for good
            http.post(f"{url}/gradio_api/call/who", json={"data": ["x"]})
        post_streamed(url, "/gradio_api/call/who", 4 * 1024 ** 2, prefix=b'{"data": ["')
        before = _peak_kib(child.pid)
        answers = []
        for _ in range(8):  # 8 × 64 MiB chunked JSON and 8 × 300 MB declared: 2.9 GB offered in all
            answers.append(post_streamed(url, "/gradio_api/call/who", 64 * 1024 ** 2, prefix=b'{"data": ["'))
            answers.append(post_streamed(url, "/gradio_api/component_server", 64 * 1024 ** 2,
                                         declare=300_000_000))
        after = _peak_kib(child.pid)
    finally:
        child.stdin.close()  # type: ignore[union-attr]
        child.wait(timeout=60)
    assert all(a.status in (413, None) for a in answers), [a.status for a in answers]
    assert any(a.status == 413 for a in answers)
    grew = (after - before) * 1024
    print(json.dumps({"peak_rss_kib": [before, after]}))
    assert grew < 32 * 1024 ** 2, (before, after)  # not the 64 MiB one body would take


def _env() -> dict[str, Any]:
    import os

    return {**os.environ, "GRADIO_ANALYTICS_ENABLED": "False"}


@pytest.mark.parametrize("step", [1, 7, 70, 4096])
def test_parts_are_counted_across_message_edges(step: int) -> None:
    request = httpx.Request("POST", "http://x/upload", files=[("files", (f"r{i}.jsonl", b"--{}\n")) for i in range(5)])
    body, kind = request.read(), request.headers["content-type"]
    boundary = kind.split("boundary=")[1].encode()
    counter = _limits.PartCounter(boundary)
    for at in range(0, len(body), step):  # a delimiter split over two messages is still counted once
        counter.feed(body[at:at + step], final=at + step >= len(body))
    assert counter.parts == 5

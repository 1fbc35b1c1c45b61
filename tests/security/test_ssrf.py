"""SSRF battery through the Python API and the CLI, and the pinned, redirect-free call path of the LLM client.

Every bad URL is refused with its own reason while ``socket.connect`` and DNS lookups fail the test if tried.
The same list goes through the app's API in ``test_app_battery.py``.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from click.testing import CliRunner

from grebench.cli._main import main
from grebench.endpoints import KeyVault, PinnedEndpoint, check_submitted_url
from grebench.llm import ChatRequest, LLMClient, pinned_endpoints
from grebench.settings import Settings, load_settings
from grebench.submissions import SubmissionForm, SubmissionQueue
from tests.conftest import FAST_ENV
from tests.fakes.openai_server import FakeOpenAIServer
from tests.security.conftest import CANARY, RESOLVER, OutboundGuard

EVAL_LM = "http://eval.example:8000"
#: (submitted URL, the reason the refusal must give) — http is allowlisted for these hosts, so that the address
#: rule (not merely "use https") is what refuses them.
SSRF = [
    ("http://169.254.169.254/", "link-local"),
    ("http://[::ffff:127.0.0.1]/", "IPv4-mapped"),
    ("http://2130706433/", "numerically encoded"),
    ("http://0177.0.0.1/", "numerically encoded"),
    ("https://127.0.0.1:22/", "port 22"),
    (EVAL_LM + "/v1", "own services"),
    ("http://10.0.0.5/", "private"),
    ("file:///etc/passwd", "scheme 'file'"),
    ("http://sneaky.example/v1", "resolves to 10.9.8.7, which is a private address"),
    ("http://127.0.0.5:7860/", "loopback"),
    ("http://[::1]:7860/", "loopback"),
]
HTTP_OK = ("169.254.169.254,::ffff:127.0.0.1,2130706433,0177.0.0.1,eval.example,10.0.0.5,sneaky.example,127.0.0.5,"
           "::1")


def battery_settings(tmp_path: Path, **values: Any) -> Settings:
    """Settings of the SSRF battery: an evaluation-LM server of our own, http allowed for the hostile hosts."""
    env = {"GREBENCH_DATA_DIR": str(tmp_path / "data"), "GREBENCH_ESTIMATOR": "vllm:" + EVAL_LM,
           "GREBENCH_SUBMISSION_HTTP_ALLOWLIST": HTTP_OK}
    return load_settings(env=env).replace(**values) if values else load_settings(env=env)


def _form(url: str, name: str = "Evil") -> SubmissionForm:
    return SubmissionForm(model_name=name, base_url=url, released="2025-03-01", cutoff="2024-12-01",
                          contact="mallory@example.org", api_key=CANARY)


@pytest.mark.parametrize(("url", "reason"), SSRF)
def test_python_api_refuses_the_ssrf_list(url: str, reason: str, tmp_path: Path, guard: OutboundGuard) -> None:
    queue = SubmissionQueue(None)
    result = queue.submit(_form(url), battery_settings(tmp_path), KeyVault(env={}), RESOLVER)
    assert not result["ok"] and result["message"].startswith("Rejected: base URL rejected"), result
    assert reason in result["message"] and CANARY not in result["message"]
    assert queue.public_rows() == []
    assert guard.refused == [] and guard.lookups == []


def test_ssrf_list_is_refused_with_default_settings_too(tmp_path: Path, guard: OutboundGuard) -> None:
    settings = load_settings(env={**FAST_ENV, "GREBENCH_DATA_DIR": str(tmp_path),
                                  "GREBENCH_ESTIMATOR": "vllm:" + EVAL_LM})
    for url, _ in SSRF:
        result = SubmissionQueue(None).submit(_form(url), settings, KeyVault(env={}), RESOLVER)
        assert not result["ok"], url
    assert guard.refused == []


def test_private_allowlist_never_opens_own_services_or_metadata(tmp_path: Path, guard: OutboundGuard) -> None:
    """The dangerous operator allowlist lets listed private networks through, nothing else."""
    settings = battery_settings(tmp_path, submission_private_allowlist="10.0.0.0/8,127.0.0.0/8,169.254.0.0/16",
                                app_host="127.0.0.1")
    assert check_submitted_url("http://10.0.0.5/v1", settings, RESOLVER).ip == "10.0.0.5"
    refused = {"http://169.254.169.254/": "link-local", "https://127.0.0.1:9999/": "own services",
               EVAL_LM + "/v1": "own services", "http://[::ffff:127.0.0.1]/": "IPv4-mapped"}
    for url, reason in refused.items():
        result = SubmissionQueue(None).submit(_form(url), settings, KeyVault(env={}), RESOLVER)
        assert not result["ok"] and reason in result["message"], (url, result)
    with pytest.raises(ValueError, match="not a network"):
        check_submitted_url("http://10.0.0.5/", settings.replace(submission_private_allowlist="ten"), RESOLVER)


def test_cli_submit_refuses_the_ssrf_list(tmp_path: Path, guard: OutboundGuard, monkeypatch: pytest.MonkeyPatch,
                                          ) -> None:
    # the CLI resolves through socket.getaddrinfo: answer from the table, never from DNS
    def table_gai(host: str, port: Any, *args: Any, **kwargs: Any) -> list[Any]:
        if host not in RESOLVER:
            raise socket.gaierror(f"{host} does not resolve")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port)) for ip in RESOLVER[host]]

    monkeypatch.setattr("grebench.endpoints._urlcheck.socket.getaddrinfo", table_gai)
    env = {"GREBENCH_DATA_DIR": str(tmp_path / "data"), "GREBENCH_ESTIMATOR": "vllm:" + EVAL_LM,
           "GREBENCH_SUBMISSION_HTTP_ALLOWLIST": HTTP_OK, "SUBMIT_KEY": CANARY}
    runner = CliRunner()
    for url, reason in SSRF:
        result = runner.invoke(main, ["submit", "--name", "Evil", "--base-url", url, "--cutoff", "2024-12-01",
                                      "--contact", "mallory@example.org", "--json"], env=env)
        assert result.exit_code == 1, (url, result.output)
        out = json.loads(result.stdout)
        assert not out["ok"] and reason in out["message"], (url, out)
    keyed = runner.invoke(main, ["submit", "--name", "Good", "--base-url", "https://api.model.example/v1",
                                 "--cutoff", "2024-12-01", "--contact", "a@example.org", "--api-key-env",
                                 "SUBMIT_KEY"], env=env)
    assert keyed.exit_code != 0 and "GREBENCH_SECRET_KEY" in keyed.output and CANARY not in keyed.output
    ok = runner.invoke(main, ["submit", "--name", "Good", "--base-url", "https://api.model.example/v1",
                              "--cutoff", "2024-12-01", "--contact", "a@example.org", "--json"], env=env)
    assert ok.exit_code == 0 and json.loads(ok.stdout)["ok"], ok.output
    assert guard.refused == []


class _Redirect(BaseHTTPRequestHandler):
    """A 'public' endpoint that answers every request with a redirect to a loopback service."""

    target = ""
    hits: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        _Redirect.hits.append(self.headers.get("Host", ""))
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(302)
        self.send_header("Location", self.target)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def redirector() -> Iterator[tuple[int, FakeOpenAIServer]]:
    """(port of the redirecting endpoint, the loopback service it points at)."""
    with FakeOpenAIServer() as inner:
        _Redirect.target = f"http://127.0.0.1:{inner.port}/v1/chat/completions"
        _Redirect.hits = []
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Redirect)
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        yield int(server.server_address[1]), inner
        server.shutdown()
        server.server_close()


def test_llm_client_does_not_follow_a_redirect_to_loopback(redirector: tuple[int, FakeOpenAIServer],
                                                          settings: Settings, guard: OutboundGuard) -> None:
    port, inner = redirector
    guard.allow("127.0.0.1", port)  # only the pinned address: the redirect target would be refused even if tried
    url = f"http://redirect.example.test:{port}/v1"
    endpoint = PinnedEndpoint(url, "redirect.example.test", "127.0.0.1", port)
    fast = settings.replace(llm_timeout_s=20, llm_max_retries=0)
    with pinned_endpoints([endpoint]):
        result = LLMClient(fast).complete(ChatRequest("openai/fake-model", (("user", "review"),), "review", "sec",
                                                      api_base=url))
    assert result.status == "failed" and "302" in (result.error or ""), result.error
    assert _Redirect.hits == [f"redirect.example.test:{port}"]
    assert inner.requests == [] and guard.refused == []
    assert guard.lookups == []  # the host name was never resolved at call time


def test_pinned_call_goes_to_the_pinned_address_only(settings: Settings, guard: OutboundGuard) -> None:
    with FakeOpenAIServer() as server:
        guard.allow("127.0.0.1", server.port)
        url = f"http://models.example.test:{server.port}/v1"
        endpoint = PinnedEndpoint(url, "models.example.test", "127.0.0.1", server.port)
        fast = settings.replace(llm_timeout_s=20, llm_max_retries=0)
        request = ChatRequest("openai/fake-model", (("user", "review"),), "review", "sec", api_base=url)
        unpinned = LLMClient(fast).complete(request)  # the raw api_base needs DNS: refused by the guard
        assert unpinned.status == "failed" and server.requests == []
        assert "models.example.test" in guard.lookups
        guard.lookups.clear()
        with pinned_endpoints([endpoint]):
            pinned = LLMClient(fast).complete(request)
            other = LLMClient(fast).complete(ChatRequest("anthropic/x", (("user", "r"),), "review", "sec",
                                                         api_base=url))
        assert pinned.status == "ok" and pinned.text
        assert [r["headers"]["Host"] for r in server.requests] == [f"models.example.test:{server.port}"]
        assert guard.lookups == []
        assert other.status == "failed" and "openai/<model id>" in (other.error or "")

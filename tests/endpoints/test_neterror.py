"""Network failures are told apart: DNS, refused, closed, TLS and timeout each get their own words (issue 26)."""

from __future__ import annotations

import socket
import ssl
from pathlib import Path

import httpx
import pytest
import requests
import urllib3.exceptions as u3

from grebench.endpoints import CAUSE_TEXT, describe_network_error, network_cause
from grebench.ingest._openreview_http import WaitBudget, describe_error


def _requests_error(reason: BaseException, kind: type[requests.RequestException] = requests.ConnectionError
                    ) -> requests.RequestException:
    """What requests raises: its error around urllib3's MaxRetryError around the cause (as the adapter builds it)."""
    wrapped = u3.MaxRetryError(None, "/notes", reason)  # type: ignore[arg-type]
    err = kind(wrapped, request=requests.Request("GET", "https://api.nosuch.invalid/notes?x=1").prepare())
    return err


def test_dns_failure_is_named_as_dns() -> None:
    gai = socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    reason = u3.NameResolutionError("api.nosuch.invalid", None, gai)  # type: ignore[arg-type]
    exc = _requests_error(reason)
    assert network_cause(exc) == "dns"
    text = describe_error(exc, WaitBudget(60.0), "listing")
    assert "(DNS)" in text and "refused" not in text and "at api.nosuch.invalid" in text
    assert "x=1" not in text  # the query of the URL is never shown


def test_refused_on_a_closed_loopback_port_is_named_as_refused() -> None:
    with socket.socket() as probe:  # a port nothing listens on: bound, then closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(requests.ConnectionError) as err:
        requests.get(f"http://127.0.0.1:{port}/", timeout=5)
    assert network_cause(err.value) == "refused"
    assert CAUSE_TEXT["refused"] in describe_error(err.value, WaitBudget(60.0), "listing")
    with pytest.raises(httpx.ConnectError) as herr:
        httpx.get(f"http://127.0.0.1:{port}/", timeout=5)
    assert network_cause(herr.value) == "refused"


def test_tls_and_timeout_and_closed_are_told_apart() -> None:
    tls = _requests_error(ssl.SSLCertVerificationError(1, "certificate verify failed: self-signed certificate"),
                          requests.exceptions.SSLError)
    assert network_cause(tls) == "tls"
    assert "TLS" in describe_error(tls, WaitBudget(60.0), "listing")
    assert network_cause(httpx.ReadTimeout("timed out")) == "timeout"
    closed = _requests_error(u3.ProtocolError("Connection aborted.", ConnectionResetError(104, "reset by peer")))
    assert network_cause(closed) == "closed"
    assert describe_network_error(ValueError("not a network error")) is None
    assert len(set(CAUSE_TEXT.values())) == len(CAUSE_TEXT)


def test_an_llm_call_to_a_closed_port_says_connection_refused(tmp_path: Path) -> None:
    from grebench.llm import ChatRequest, LLMClient
    from grebench.settings import load_settings
    from tests.conftest import FAST_ENV

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings = load_settings(env={**FAST_ENV, "GREBENCH_LLM_MAX_RETRIES": "0", "GREBENCH_DATA_DIR": str(tmp_path)})
    result = LLMClient(settings).complete(ChatRequest(model="openai/x", messages=(("user", "hi"),), purpose="review",
                                                      prompt_version="v", api_base=f"http://127.0.0.1:{port}/v1"))
    assert result.status == "failed" and CAUSE_TEXT["refused"] in (result.error or ""), result.error

"""vllm-local: the spec checks, the server's command line, and the whole start/score/stop path on a fake vLLM.

The fake is the vLLM protocol (tests/fakes/vllm_server.py) behind a fake ``vllm`` package run by an interpreter
wrapper, so everything grebench does (its own interpreter setting, ``-m vllm.entrypoints.openai.api_server``, the
launcher's parent watch, readiness on ``/health``, the log file, the stop) runs as with the real server; the real
vLLM is tests/models/test_vllm_real.py.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from grebench.pipeline import RunOptions, SetupError, check_setup
from grebench.runtime import LocalServerError, VLLMServer, vllm_interpreter
from grebench.scoring.estimators import close_estimator, estimator_info, resolve_estimator
from grebench.scoring.estimators._server import _core_shares
from grebench.settings import Settings
from tests.runtime.served import port_free, wait_gone
from tests.scoring.tiny_llama import sample_requests, tiny_llama_dir  # noqa: F401

pytest.importorskip("torch")
REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("arg, reason", [
    ("", "must be vllm:URL"), ("localhost:8000", "must start with http"), ("http://", "with a host"),
    ("http://127.0.0.1:99999", "not a URL"), ("http://127.0.0.1:8000,", "empty URL"),
    ("ftp://h/x", "must start with http")])
def test_vllm_urls_are_checked(arg: str, reason: str) -> None:
    check = estimator_info("vllm").check_arg
    assert check is not None
    with pytest.raises(ValueError, match=reason):
        check(arg)


def test_good_vllm_urls_and_models_pass(tiny_llama_dir: Path) -> None:  # noqa: F811
    estimator_info("vllm").check_arg("http://127.0.0.1:8000, https://gpu-2.example:8001/")  # type: ignore[misc]
    estimator_info("vllm-local").check_arg("smollm2-135m")  # type: ignore[misc]
    estimator_info("vllm-local").check_arg(str(tiny_llama_dir))  # type: ignore[misc]


@pytest.mark.parametrize("spec, reason", [
    ("vllm-local:", "must be vllm-local:NAME"), ("vllm-local:no-such-model", "not a built-in model"),
    ("vllm:localhost:8000", "must start with http"), ("sglang:", "must be sglang:URL")])
def test_the_setup_check_refuses_bad_server_specs(spec: str, reason: str, settings: Settings) -> None:
    with pytest.raises(SetupError, match=reason):
        check_setup(settings, RunOptions(estimator=spec))


def test_the_interpreter_setting_says_how_to_install_vllm(settings: Settings, tmp_path: Path) -> None:
    with pytest.raises(LocalServerError, match=r"scripts/install-vllm\.sh"):
        vllm_interpreter(settings.scoring)
    with pytest.raises(LocalServerError, match="not an executable interpreter"):
        vllm_interpreter(settings.replace(vllm_python=str(tmp_path / "nope" / "python")).scoring)
    assert vllm_interpreter(settings.replace(vllm_python=sys.executable).scoring) == Path(sys.executable)


def test_the_server_command_binds_loopback_sizes_its_cache_and_drops_our_path(settings: Settings) -> None:
    server = VLLMServer("/models/m", settings, python=Path("/venv/bin/python"), dtype="bfloat16", threads="0-3",
                        kv_cache_gib=1.5)
    cmd = server.command(8123)
    assert cmd[:3] == ["/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server"]
    assert cmd[cmd.index("--host") + 1] == "127.0.0.1" and cmd[cmd.index("--dtype") + 1] == "bfloat16"
    assert cmd[cmd.index("--kv-cache-memory-bytes") + 1] == str(3 * 2**29)
    os.environ["PYTHONPATH"] = os.environ.get("PYTHONPATH", "") or "/somewhere"
    env = server.environment()
    assert "PYTHONPATH" not in env and env["VLLM_CPU_OMP_THREADS_BIND"] == "0-3" and env["HF_HUB_OFFLINE"] == "1"
    plain = VLLMServer("/m", settings, python=Path("/p")).command(1)
    assert "--kv-cache-memory-bytes" not in plain and "--enforce-eager" not in plain
    assert "--enforce-eager" in VLLMServer("/m", settings, python=Path("/p"), compile=False).command(1)


def test_cores_are_shared_out_contiguously(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1, 2, 3, 4})
    assert _core_shares(1) == ["0,1,2,3,4"]
    assert _core_shares(2) == ["0,1,2", "3,4"]
    with pytest.raises(ValueError, match="needs at least 6 CPU cores"):
        _core_shares(6)


@pytest.fixture
def fake_vllm_python(tmp_path: Path) -> Path:
    """An interpreter wrapper whose ``vllm.entrypoints.openai.api_server`` is the fake vLLM server."""
    pkg = tmp_path / "fake-vllm" / "vllm" / "entrypoints" / "openai"
    pkg.mkdir(parents=True)
    for d in (pkg, pkg.parent, pkg.parent.parent):
        (d / "__init__.py").write_text("")
    (pkg / "api_server.py").write_text("from tests.fakes.vllm_server import main\nmain()\n")
    wrapper = tmp_path / "python"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH="{tmp_path / "fake-vllm"}:{REPO}" exec "{sys.executable}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return wrapper


def test_vllm_local_starts_two_servers_spreads_scores_like_hf_and_stops_them(
        tiny_llama_dir: Path, settings: Settings, fake_vllm_python: Path,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    # two top log-probs: the verbs missing from them are asked for on their own, and the numbers stay hf's
    monkeypatch.setattr("grebench.scoring.estimators._server.TOP_LOGPROBS", 2)
    s = settings.replace(vllm_python=str(fake_vllm_python), vllm_servers=2, hf_dtype="float32", hf_device="cpu",
                         estimator_concurrency=4)
    est = resolve_estimator(f"vllm-local:{tiny_llama_dir}", s)
    try:
        servers = list(est.servers)  # type: ignore[attr-defined]
        assert len(servers) == 2 and len({srv.port for srv in servers}) == 2
        assert est.urls == [srv.base_url for srv in servers]  # type: ignore[attr-defined]
        assert est.id.startswith(f"vllm:{tiny_llama_dir}@") and ":dtype=float32:chat=" in est.id
        logs = sorted(p.name for p in s.local_servers_path.glob("vllm-*.log"))
        assert len(logs) == 2 and all("fake vLLM serving" in srv.log_path.read_text() for srv in servers)
        reqs = sample_requests(n_papers=2, n_candidates=1)
        hf = resolve_estimator(f"hf:{tiny_llama_dir}", s.replace(hf_prefix_reuse="off"))
        for a, b in zip(hf.logprobs(reqs), est.logprobs(reqs), strict=True):
            assert a.n_tokens == b.n_tokens and abs(a.logprob - b.logprob) <= 1e-4 * max(1, a.n_tokens / 100)
        pids, ports = [srv.pid for srv in servers], [srv.port for srv in servers]
    finally:
        close_estimator(est)
    assert all(wait_gone(pid) for pid in pids) and all(port_free(p) for p in ports)
    assert all(srv.pid is None for srv in servers) and est.servers == []  # type: ignore[attr-defined]


def test_requests_are_spread_over_all_urls(tiny_llama_dir: Path, settings: Settings,  # noqa: F811
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.fakes._lm_server import serve
    from tests.fakes.vllm_server import vllm_handler

    # the whole 400-token vocabulary listed: no verb is asked for on its own, one call per request
    monkeypatch.setattr("grebench.scoring.estimators._server.TOP_LOGPROBS", 400)

    reqs = sample_requests(n_papers=2, n_candidates=1)
    answers = {}
    for batch in (1, 2):
        one, two = vllm_handler(tiny_llama_dir), vllm_handler(tiny_llama_dir)
        with serve(one) as url1, serve(two) as url2:
            est = resolve_estimator(f"vllm:{url1},{url2}", settings.replace(estimator_concurrency=2,
                                                                               estimator_batch=batch))
            answers[batch] = est.logprobs(reqs)
        calls = one.state["calls"], two.state["calls"]  # type: ignore[attr-defined]
        prompts = one.state["prompts"], two.state["prompts"]  # type: ignore[attr-defined]
        # each paper's requests on one server, in calls of ``batch`` prompts
        assert sum(prompts) == len(reqs) and sum(calls) == len(reqs) // batch and min(prompts) > 0
    assert answers[1] == answers[2]  # one prompt a call or two: the same numbers


def test_a_server_that_fails_to_start_is_reported_and_nothing_is_left(
        tiny_llama_dir: Path, settings: Settings, tmp_path: Path) -> None:  # noqa: F811
    broken = tmp_path / "broken-python"
    broken.write_text("#!/bin/sh\necho 'ImportError: no vllm here' >&2\nexit 3\n")
    broken.chmod(broken.stat().st_mode | stat.S_IXUSR)
    with pytest.raises(LocalServerError, match=r"vLLM for .* exited \(status 3\)[\s\S]*no vllm here"):
        resolve_estimator(f"vllm-local:{tiny_llama_dir}", settings.replace(vllm_python=str(broken)))

"""The public face end to end: a submission made through the app's API is accepted, evaluated through the pinned
transport against a local fake endpoint, finished, and its API key never shows up anywhere; the SSRF list is
refused through the API; Gradio's file routes serve none of our files.

The fake endpoint listens on 127.0.0.1, which the URL check refuses by policy, so this app's operator opts in
with the (documented as dangerous) ``submission_private_allowlist = "127.0.0.1/32"`` and the app itself binds
127.0.0.2 — its own address stays refused.  The submitted host name resolves only through the test's table.
"""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from cryptography.fernet import Fernet

from grebench.bench import run_bench
from grebench.cli._main import main
from grebench.endpoints import KeyVault
from grebench.scheduler import SchedulerService
from grebench.settings import Settings, load_settings
from grebench.site import build_site
from grebench.site._app import create_app, launch_kwargs, queue_path
from grebench.store import Store, open_store
from grebench.submissions import SubmissionQueue
from tests.bench.conftest import tiny_papers
from tests.conftest import NO_LOCAL_MODELS
from tests.fakes.openai_server import FakeOpenAIServer
from tests.security.conftest import CANARY, RESOLVER, OutboundGuard, free_port, leaks
from tests.security.test_ssrf import EVAL_LM, HTTP_OK, SSRF

APP_HOST = "127.0.0.2"


@pytest.fixture(scope="module")
def fake_llm() -> Iterator[FakeOpenAIServer]:
    """The submitted model's endpoint."""
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, fake_llm: FakeOpenAIServer) -> Iterator[dict[str, Any]]:
    """Store with four benched papers, exported; the app on 127.0.0.2 with an encrypting vault; a gradio client."""
    root = tmp_path_factory.mktemp("secapp")
    config = root / "grebench.toml"
    config.write_text(f'app_host = "{APP_HOST}"\napp_port = {free_port()}\nestimator = "vllm:{EVAL_LM}"\n'
                      f'submission_http_allowlist = "models.example.test,redirect.example.test,{HTTP_OK}"\n'
                      'submission_private_allowlist = "127.0.0.1/32"\nllm_max_retries = 0\nllm_timeout_s = 30\n'
                      # every test here submits from 127.0.0.1, refusals included (they count toward the limit)
                      'submissions_per_address_per_week = 1000\n'
                      'bootstrap_samples = 20\n')
    # no built-in local model: the battery is about the app's gates and the submitted endpoint, and generating the
    # local SmolLM2's reviews of four papers on the CPU took 280 s of this fixture (over the 300 s limit on a slower
    # machine)
    settings = load_settings(config, env={"GREBENCH_DATA_DIR": str(root / "data"), **NO_LOCAL_MODELS})
    store = open_store(settings.db_path)
    with store.transaction():
        for paper in tiny_papers():
            store.upsert_paper(paper)
    run_bench(store, settings, store.start_run("bench", {}))
    store.export_parquet(settings.data_path / "export")
    vault = KeyVault(env={"GREBENCH_SECRET_KEY": Fernet.generate_key().decode()})
    queue = SubmissionQueue(queue_path(settings))
    demo = create_app(settings, resolver=RESOLVER, vault=vault, queue=queue)
    kwargs = launch_kwargs(settings)
    kwargs.update(prevent_thread_lock=True, quiet=True)
    _, url, _ = demo.launch(**kwargs)
    from gradio_client import Client

    client = Client(url, verbose=False)
    yield {"settings": settings, "store": store, "vault": vault, "queue": queue, "client": client,
           "url": url.rstrip("/"), "config": config, "port": settings.app.app_port}
    demo.close()
    store.close()


def _submit(client: Any, **fields: str) -> str:
    base = {"model_name": "", "model_string": "", "base_url": "", "released": "2019-09-01", "cutoff": "2019-06-01",
            "contact": "owner@example.org", "api_key": "", "params": ""}
    base.update(fields)
    return str(client.predict(*base.values(), api_name="/submit"))


@pytest.mark.parametrize(("url", "reason"), SSRF)
def test_api_refuses_the_ssrf_list(world: dict[str, Any], url: str, reason: str, guard: OutboundGuard) -> None:
    guard.allow(APP_HOST, world["port"])
    message = _submit(world["client"], model_name="Evil", base_url=url, api_key=CANARY)
    assert message.startswith("Rejected: base URL rejected") and reason in message, message
    assert CANARY not in message
    assert guard.refused == [] and guard.lookups == []


def test_submission_is_evaluated_through_the_pinned_endpoint_and_the_key_disappears(
        world: dict[str, Any], fake_llm: FakeOpenAIServer, guard: OutboundGuard,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    guard.allow(APP_HOST, world["port"])
    guard.allow("127.0.0.1", fake_llm.port)
    settings: Settings = world["settings"]
    store: Store = world["store"]
    url = f"http://models.example.test:{fake_llm.port}/v1"
    message = _submit(world["client"], model_name="Acme-Pinned", base_url=url, api_key=CANARY,
                      params='{"temperature": 0.2}')
    assert message.startswith("Queued as"), message
    sub_id = message.split()[2].rstrip(":")
    assert world["queue"].rows("SELECT key_ciphertext FROM submissions WHERE id = ?", [sub_id])[0]["key_ciphertext"]

    service = SchedulerService(settings, store, vault=world["vault"], queue=world["queue"], kinds=["queue"],
                               resolver=RESOLVER)
    summary = service.run_job("queue")["summary"]
    assert summary["accepted"] == ["Acme-Pinned"], summary
    assert [(e["id"], e["ok"], e["calls_made"]) for e in summary["evaluated"]] == [(sub_id, True, 4)], summary

    cand = store.rows("SELECT kind, cutoff, api_base, api_key_env FROM candidates WHERE name = 'Acme-Pinned'")[0]
    assert (cand["kind"], cand["cutoff"], cand["api_base"], cand["api_key_env"]) == ("submitted", None, url, None)
    gens = store.rows("SELECT paper_id, status FROM generations WHERE candidate = 'Acme-Pinned' ORDER BY paper_id")
    assert [(g["paper_id"], g["status"]) for g in gens] == [(f"paper{i}", "ok") for i in range(4)]  # paper4: no split
    chats = fake_llm.chat_requests
    assert len(chats) == 4
    assert {c["headers"]["Host"] for c in chats} == {f"models.example.test:{fake_llm.port}"}
    assert {c["headers"]["Authorization"] for c in chats} == {f"Bearer {CANARY}"}  # the key went only here
    assert {c["body"]["temperature"] for c in chats} == {0.2}
    assert guard.refused == [] and guard.lookups == []  # no DNS at call time, nothing else reached

    assert world["queue"].rows("SELECT status, key_ciphertext FROM submissions WHERE id = ?", [sub_id]) == [
        {"status": "finished", "key_ciphertext": None}]
    assert store.scalar("SELECT status FROM submissions WHERE id = ?", [sub_id]) == "finished"
    assert world["vault"].open(sub_id, None) is None
    service.run_job("queue")  # a second pass makes no call and changes nothing
    assert len(fake_llm.chat_requests) == 4

    # the canary is nowhere: logs, every VARCHAR of every table, data-dir files, exports, the site, HTTP answers
    build_site(store, settings, settings.site_path)
    store.export_parquet(settings.data_path / "export")
    store.checkpoint()
    hay: list[tuple[str, bytes | str]] = [("logs", caplog.text)]
    for t in store.rows("SELECT table_name, column_name FROM information_schema.columns WHERE data_type = 'VARCHAR' "
                        "AND table_schema = 'main'"):
        values = store.con.execute(f'SELECT "{t["column_name"]}" FROM "{t["table_name"]}"').fetchall()
        hay.append((f"{t['table_name']}.{t['column_name']}", "\n".join(str(v[0]) for v in values)))
    hay += [(str(p), p.read_bytes()) for p in settings.data_path.rglob("*") if p.is_file()]
    hay += [(str(p), p.read_bytes()) for p in Path(settings.site_path).rglob("*") if p.is_file()]
    client = world["client"]
    answers = [client.predict(api_name="/queue"), client.predict("Acme-Pinned", api_name="/model"),
               client.predict("paper0", api_name="/paper")]
    hay += [("api", repr(a)) for a in answers]
    with httpx.Client(timeout=10) as http:
        for path in ("/", "/config", "/gradio_api/info", "/?tab=queue"):
            hay.append((path, http.get(world["url"] + path).content))
    assert len(hay) > 50
    assert leaks(hay) == []
    assert "Acme-Pinned" in repr(answers[0])  # the haystack does hold the submission itself
    assert not any(CANARY in v for v in __import__("os").environ.values())


def test_redirecting_or_rebound_endpoint_fails_without_reaching_anything(
        world: dict[str, Any], guard: OutboundGuard, fake_llm: FakeOpenAIServer) -> None:
    guard.allow(APP_HOST, world["port"])
    store: Store = world["store"]
    before = len(fake_llm.chat_requests)
    url = f"http://redirect.example.test:{fake_llm.port}/v1"
    message = _submit(world["client"], model_name="Rebinder", base_url=url, api_key=CANARY)
    assert message.startswith("Queued as"), message
    # by evaluation time the name points somewhere private: the fresh check refuses it before any call
    rebound = {**RESOLVER, "redirect.example.test": ["10.1.2.3"]}
    service = SchedulerService(world["settings"], store, vault=world["vault"], queue=world["queue"], kinds=["queue"],
                               resolver=rebound)
    summary = service.run_job("queue")["summary"]
    assert summary["accepted"] == [], summary
    row = world["queue"].rows("SELECT status, reason, key_ciphertext FROM submissions WHERE model_name = 'Rebinder'")
    assert row[0]["status"] == "failed" and "10.1.2.3" in row[0]["reason"] and row[0]["key_ciphertext"] is None
    assert len(fake_llm.chat_requests) == before and guard.refused == []


def test_file_routes_cannot_read_the_store_the_queue_or_secrets(world: dict[str, Any], guard: OutboundGuard) -> None:
    guard.allow(APP_HOST, world["port"])
    settings: Settings = world["settings"]
    targets = [settings.db_path, queue_path(settings), settings.data_path / "export" / "candidates.parquet",
               world["config"], Path("/etc/passwd"), Path("/proc/self/environ")]
    paths = []
    for target in targets:
        text = str(target.resolve())
        paths += [text, f"{settings.data_path}/export/../{target.name}", f"{Path.cwd()}/../../../..{text}",
                  f"..%2F..%2F..%2F..{text}", text.replace("/", "%2F"), f"%2e%2e/%2e%2e/%2e%2e{text}"]
    with httpx.Client(timeout=10) as http:
        for path in paths:
            for prefix in ("/gradio_api/file=", "/file=", "/gradio_api/file/", "/gradio_api/static/"):
                response = http.get(world["url"] + prefix + path)
                assert response.status_code in (400, 403, 404, 405), (prefix, path, response.status_code)
                for marker in (b"DUCK", b"PAR1", b"root:", b"estimator", b"GREBENCH", b"PATH="):
                    assert marker not in response.content, (prefix, path, marker)


def _copier(messages: list[dict[str, Any]]) -> str:
    """The bought-rank endpoint: answers each review prompt with that paper's first public human review."""
    prompt = json.dumps(messages)
    for paper in tiny_papers():
        if f"{paper.title}\\n" in prompt or f"{paper.title}<" in prompt or f"{paper.title}\"" in prompt:
            return paper.reviews[0].text
    return "Summary: nothing to copy."


def test_an_endpoint_serving_the_public_reviews_is_refused_from_the_app_and_the_cli(
        world: dict[str, Any], guard: OutboundGuard, monkeypatch: pytest.MonkeyPatch) -> None:
    """The reproduction of issue 27: a fake endpoint that copies each paper's first human review, declared cutoff
    2000-01-01, submitted through the app's API and through `grebench submit` (the same queue), ends refused."""
    guard.allow(APP_HOST, world["port"])
    store: Store = world["store"]
    with FakeOpenAIServer(reply=_copier) as copier:
        guard.allow("127.0.0.1", copier.port)
        url = f"http://models.example.test:{copier.port}/v1"
        message = _submit(world["client"], model_name="Copycat-App", base_url=url, cutoff="2000-01-01",
                          released="2019-01-01")
        assert message.startswith("Queued as") and "not trusted" in message, message

        guarded = socket.getaddrinfo  # the guard's: numbers pass, names are refused and recorded

        def table_gai(host: str, port: Any, *args: Any, **kwargs: Any) -> list[Any]:  # the CLI's resolver
            if host not in RESOLVER:
                return guarded(host, port, *args, **kwargs)  # type: ignore[no-any-return]
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port)) for ip in RESOLVER[host]]

        monkeypatch.setattr("grebench.endpoints._urlcheck.socket.getaddrinfo", table_gai)
        cli = CliRunner().invoke(main, ["submit", "--config", str(world["config"]), "--name", "Copycat-CLI",
                                        "--base-url", url, "--cutoff", "2000-01-01", "--contact", "m@example.org",
                                        "--json"], env={"GREBENCH_DATA_DIR": str(world["settings"].data_path)})
        assert cli.exit_code == 0 and json.loads(cli.stdout)["ok"], cli.output
        service = SchedulerService(world["settings"], store, vault=world["vault"], queue=world["queue"],
                                   kinds=["queue"], resolver=RESOLVER)
        summary = service.run_job("queue")["summary"]
        assert sorted(summary["accepted"]) == ["Copycat-App", "Copycat-CLI"], summary
        assert len(copier.chat_requests) == 8  # both were called on the four papers their declared cutoff allows
    for name in ("Copycat-App", "Copycat-CLI"):
        row = world["queue"].rows("SELECT status, reason FROM submissions WHERE model_name = ?", [name])[0]
        assert row["status"] == "failed" and "4 of 4 reviews copy their paper's public reviews" in row["reason"], row
        assert store.scalar("SELECT count(*) FROM generations WHERE candidate = ? AND status = 'ok'", [name]) == 0
        assert store.scalar("SELECT count(*) FROM generations WHERE candidate = ?", [name]) == 4
        assert store.rows("SELECT kind, cutoff FROM candidates WHERE name = ?", [name]) == [
            {"kind": "submitted", "cutoff": None}]  # the declared cutoff bought nothing either

"""``executor = ray`` (issue 61): scoring on a local Ray cluster of two CPUs gives the in-process numbers, a Ray worker
killed in the middle of a shard costs nothing (Ray restarts it and retries the shard), and a stop then a rerun
recomputes nothing that was cached.  Every test waits on observed progress (answers handed over, actors
restarted), never on a fixed sleep."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from grebench import stop
from grebench.cli import main
from grebench.scoring import request_key, resolve_preprocessor, run_scoring
from grebench.scoring._request import LogprobRequest, LogprobResult
from grebench.scoring.estimators import EstimatorHandle
from grebench.settings import Settings, load_settings
from grebench.store import Store, open_store
from tests.conftest import FAST_ENV
from tests.pipeline._numbers import published_numbers

ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install -e '.[hf,ray]')")

pytestmark = pytest.mark.slow

#: The settings of every run here: the offline estimator on the headline (GEM-S, core controls), nothing else.
ENV = {**FAST_ENV, "GREBENCH_VALIDATION": "core", "GREBENCH_ATTRIBUTION": "off", "GREBENCH_PROXY_ESTIMATOR": ""}
SCORES = """SELECT metric, estimator, preprocessor, candidate, paper_id, reference_review_id, generation_id,
                   conditional, marginal, pmi, n_tokens FROM scores ORDER BY ALL"""


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[float]:
    """A local Ray of two CPUs for the module; yields its start-up time in seconds."""
    started = time.monotonic()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield time.monotonic() - started
    ray.shutdown()


def _invoke(env: dict[str, str], *args: str) -> dict[str, Any]:
    result = CliRunner().invoke(main, [*args, "--json"], env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.stdout))


@pytest.fixture(scope="module")
def benched(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory with the bundled ICLR 2026 sample (300 papers) ingested and benched (human baseline, core
    controls), nothing scored: copy before writing."""
    data = tmp_path_factory.mktemp("ray-benched") / "data"
    env = {**ENV, "GREBENCH_DATA_DIR": str(data)}
    _invoke(env, "ingest", "--source", "bundled")
    _invoke(env, "bench")
    return data


def _copy(data: Path, to: Path) -> Path:
    shutil.copytree(data, to)
    return to


def _rows(store: Store, sql: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in store.con.execute(sql).fetchall()]


class _Watched:
    """The estimator a :class:`_Handle` gives: the real one, with every request it is asked recorded and
    ``on_answer`` called on the caller's thread as each answer arrives."""

    def __init__(self, inner: Any, handle: _Handle) -> None:
        self.inner, self.handle, self.id = inner, handle, inner.id

    def stream(self, requests: Sequence[LogprobRequest],
               on_result: Callable[[int, LogprobResult], None] | None = None) -> list[LogprobResult]:
        self.handle.asked.extend(requests)

        def relay(i: int, answer: LogprobResult) -> None:
            if on_result is not None:
                on_result(i, answer)
            self.handle.answers += 1
            if self.handle.on_answer is not None:
                self.handle.on_answer(self.inner)

        return list(self.inner.stream(requests, relay))


class _Handle(EstimatorHandle):
    """A job's estimator handle whose estimators are :class:`_Watched`."""

    def __init__(self, spec: str, settings: Settings, executor: str,
                 on_answer: Callable[[Any], None] | None = None) -> None:
        super().__init__(spec, settings, executor=executor)
        self.asked: list[LogprobRequest] = []
        self.answers = 0
        self.on_answer = on_answer

    def get(self, corpus: Mapping[str, Sequence[str]] | None = None, progress: Any = None) -> Any:
        return _Watched(super().get(corpus, progress), self)


def _score(data: Path, handle: EstimatorHandle, papers: int | None = None) -> dict[str, Any]:
    """GEM-S of the stored generations of the first ``papers`` papers (None: all) with ``handle``'s estimator."""
    settings = load_settings(env={**ENV, "GREBENCH_DATA_DIR": str(data)})
    store = open_store(settings.db_path)
    try:
        ids = [r["paper_id"] for r in store.rows("SELECT paper_id FROM baseline_splits ORDER BY paper_id")]
        return run_scoring(store, settings, None, ["gem-s"], handle=handle, paper_ids=ids[:papers] if papers else None,
                           preprocessor=resolve_preprocessor(settings.scoring.preprocessor, settings, store))
    finally:
        store.close()


def test_the_bundled_papers_through_the_ray_executor_give_the_in_process_boards(
        ray_cluster: float, benched: Path, tmp_path: Path) -> None:
    """`grebench score --executor ray` on all 300 bundled papers (offline estimator, GEM-S with the core controls):
    the boards and every score row equal the in-process run's, value for value."""
    local, on_ray = _copy(benched, tmp_path / "local"), _copy(benched, tmp_path / "ray")
    started = time.monotonic()
    in_process = _invoke({**ENV, "GREBENCH_DATA_DIR": str(local)}, "score")
    local_s = time.monotonic() - started
    started = time.monotonic()
    distributed = _invoke({**ENV, "GREBENCH_DATA_DIR": str(on_ray)}, "score", "--executor", "ray")
    ray_s = time.monotonic() - started
    print(f"ray start-up {ray_cluster:.1f} s; 300 papers scored in-process {local_s:.1f} s, on Ray {ray_s:.1f} s")
    assert distributed["estimator_calls"] == in_process["estimator_calls"] > 1000
    assert distributed["estimator"] == in_process["estimator"]
    stores = [open_store(d / "grebench.duckdb", read_only=True) for d in (local, on_ray)]
    try:
        numbers = [published_numbers(s) for s in stores]
        assert numbers[0]["boards"] and numbers[0]["boards"] == numbers[1]["boards"]
        assert stores[0].scalar("SELECT count(DISTINCT paper_id) FROM scores") == 300
        assert _rows(stores[0], SCORES) == _rows(stores[1], SCORES)
    finally:
        for s in stores:
            s.close()


def test_run_with_the_ray_executor_publishes_the_numbers_of_the_local_run(ray_cluster: float, tmp_path: Path) -> None:
    """`grebench run --executor ray` (8 papers, the offline estimator: every stage, the gem judge's exam scored
    through the same handle) publishes the boards, validation, exam and panel of the run without it."""
    numbers = []
    for name, extra in (("local", []), ("ray", ["--executor", "ray"])):
        env = {**FAST_ENV, "GREBENCH_DATA_DIR": str(tmp_path / name), "GREBENCH_PAPERS": "8"}
        _invoke(env, "run", *extra)
        store = open_store(tmp_path / name / "grebench.duckdb", read_only=True)
        try:
            numbers.append(published_numbers(store))
        finally:
            store.close()
    assert numbers[0]["boards"] and numbers[0]["exam"] and numbers[0]["validation"]
    assert numbers[0] == numbers[1]


def test_a_ray_worker_killed_in_the_middle_of_a_shard_leaves_no_duplicate_and_no_missing_score(
        ray_cluster: float, benched: Path, tmp_path: Path) -> None:
    """At the first answer, the first actor's process is killed while it holds a shard: Ray restarts it (a new
    process), the shard runs again there, and the scores equal the in-process run's row for row."""
    local, on_ray = _copy(benched, tmp_path / "local"), _copy(benched, tmp_path / "ray")
    settings = load_settings(env={**ENV, "GREBENCH_DATA_DIR": str(on_ray)})
    killed: list[int] = []

    def kill_once(est: Any) -> None:
        if killed:
            return
        assert est.shards_held[0] >= 1, "the first actor holds no shard to lose"
        victim = est.pool.pids[0]
        os.kill(victim, signal.SIGKILL)
        killed.append(victim)

    handle = _Handle("offline", settings, "ray", on_answer=kill_once)
    try:
        summary = _score(on_ray, handle, papers=60)
        pool = handle.ray_pool
        assert pool is not None and killed
        assert pool.current_pids()[0] != killed[0], "the killed actor was not restarted in a new process"
    finally:
        handle.close()
    reference = _score(local, EstimatorHandle("offline", load_settings(env={**ENV, "GREBENCH_DATA_DIR": str(local)}),
                                              executor="local"), papers=60)
    assert summary["pairs_scored"] == reference["pairs_scored"] > 100
    assert handle.answers == summary["estimator_calls"]  # every request answered once on the driver
    stores = [open_store(d / "grebench.duckdb", read_only=True) for d in (local, on_ray)]
    try:
        rows = [_rows(s, SCORES) for s in stores]
        assert rows[0] == rows[1]
        keys = "SELECT candidate, paper_id, reference_review_id, metric, estimator, preprocessor FROM scores"
        assert len(rows[1]) == len(set(_rows(stores[1], keys)))  # no pair twice
        cache = "SELECT request_key, logprob, n_tokens FROM logprob_cache ORDER BY request_key"
        assert _rows(stores[0], cache) == _rows(stores[1], cache)
    finally:
        for s in stores:
            s.close()


def test_a_stop_in_the_middle_then_a_rerun_computes_no_cached_request_again(
        ray_cluster: float, benched: Path, tmp_path: Path) -> None:
    """A stop (what the CLI's SIGTERM handler requests) at the first answer ends the run with what arrived cached;
    the rerun asks the actors only for the requests not in ``logprob_cache``."""
    data = _copy(benched, tmp_path / "data")
    settings = load_settings(env={**ENV, "GREBENCH_DATA_DIR": str(data)})
    first = _Handle("offline", settings, "ray", on_answer=lambda _est: stop.request_stop())
    try:
        with pytest.raises(stop.Interrupted):
            _score(data, first, papers=60)
    finally:
        stop.reset()
        first.close()
    store = open_store(settings.db_path, read_only=True)
    try:
        cached = {r["request_key"] for r in store.rows("SELECT request_key FROM logprob_cache")}
    finally:
        store.close()
    assert 0 < len(cached) < len(first.asked), "the stop did not fall in the middle of the run"
    second = _Handle("offline", settings, "ray")
    try:
        summary = _score(data, second, papers=60)
    finally:
        second.close()
    est_id = summary["estimator"]
    asked_again = {request_key(est_id, r) for r in second.asked}
    assert not asked_again & cached, f"{len(asked_again & cached)} cached requests were computed again"
    assert summary["cache_hits"] == len(cached)
    assert len(asked_again) == len(second.asked) == summary["estimator_calls"]
    assert len(asked_again) + len(cached) == len({request_key(est_id, r) for r in first.asked})


def test_smollm2_on_ray_actors_gives_the_in_process_scores(ray_cluster: float, real_models_dir: Path,
                                                          tmp_path: Path) -> None:
    """4 papers (every text of the abstracts and reviews cut to 30 words, so that the real LM takes a minute here)
    scored with hf:smollm2-135m in float32, in-process and on two Ray actors: the same id and scores within 1e-5
    nats.

    Ray gives each actor one CPU, so its torch computes on one thread (OMP_NUM_THREADS=1); the in-process run does
    too here.  A float32 sum depends on the kernels' reduction order, which depends on the thread count: on two
    threads the same requests differ by up to 4.3e-5 nats (measured here; within the 1e-4 that ``dtype_tolerance``
    promises for float32), on the same count they are bit-identical."""
    import torch

    from grebench.ingest._archive import bundled_path

    with bundled_path("iclr2026").open(encoding="utf-8") as src:
        records = [json.loads(next(src)) for _ in range(4)]

    def short(value: Any) -> Any:  # every text cut to its first 30 words (dates and ids are shorter)
        if isinstance(value, str) and len(value.split()) > 30:
            return " ".join(value.split()[:30])
        if isinstance(value, list):
            return [short(v) for v in value]
        if isinstance(value, dict):
            return {k: short(v) for k, v in value.items()}
        return value

    archive = tmp_path / "short.jsonl"
    archive.write_text("".join(json.dumps({**r, "abstract": short(r["abstract"]), "reviews": short(r["reviews"])})
                               + "\n" for r in records), encoding="utf-8")
    env = {**ENV, "GREBENCH_DATA_DIR": str(tmp_path / "local"), "GREBENCH_ESTIMATOR": "hf:smollm2-135m",
           "GREBENCH_MODELS_DIR": str(real_models_dir), "GREBENCH_HF_DTYPE": "float32", "GREBENCH_HF_DEVICE": "cpu",
           "GREBENCH_HF_PREFIX_REUSE": "on"}
    _invoke(env, "ingest", "--source", f"archive:{archive}")
    _invoke(env, "bench")
    on_ray = _copy(tmp_path / "local", tmp_path / "ray")
    numbers: list[list[tuple[Any, ...]]] = []
    threads = torch.get_num_threads()
    for data, executor in ((tmp_path / "local", "local"), (on_ray, "ray")):
        torch.set_num_threads(1 if executor == "local" else threads)
        settings = load_settings(env={**env, "GREBENCH_DATA_DIR": str(data)})
        handle = EstimatorHandle("hf:smollm2-135m", settings, executor=executor)
        store = open_store(settings.db_path)
        try:
            started = time.monotonic()
            summary = run_scoring(store, settings, None, ["gem-s"], handle=handle,
                                  preprocessor=resolve_preprocessor(settings.scoring.preprocessor, settings, store))
            print(f"{executor}: {summary['estimator_calls']} requests in {time.monotonic() - started:.1f} s")
            numbers.append(_rows(store, SCORES))
        finally:
            torch.set_num_threads(threads)
            handle.close()
            store.close()
    local_rows, ray_rows = numbers
    assert len(local_rows) == len(ray_rows) >= 8
    assert {r[4] for r in local_rows} == {r[4] for r in ray_rows} and len({r[4] for r in local_rows}) == 4
    for a, b in zip(local_rows, ray_rows, strict=True):
        assert a[:7] == b[:7]  # the same pair, estimator id included
        assert abs(a[7] - b[7]) < 1e-5 and abs(a[8] - b[8]) < 1e-5 and abs(a[9] - b[9]) < 1e-5, (a, b)

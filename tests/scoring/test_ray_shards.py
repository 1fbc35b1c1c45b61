"""The Ray executor's parts that need no Ray: shards of whole papers, and which kinds it runs (issue 61)."""

from __future__ import annotations

import pytest

from grebench.scoring._request import LogprobRequest
from grebench.scoring.estimators import EstimatorContext, EstimatorHandle, estimator_info
from grebench.scoring.estimators._ray import EstimatorPart, RayPool, cut_shards
from grebench.settings import load_settings


def _requests(sizes: dict[str, int]) -> list[LogprobRequest]:
    return [LogprobRequest(pid, "s", None, f"t{i}") for pid, n in sizes.items() for i in range(n)]


def test_shards_hold_whole_papers_within_the_bounds() -> None:
    reqs = _requests({"a": 3, "b": 4, "c": 2, "d": 9, "e": 1})
    shards = cut_shards(reqs, max_requests=6, max_papers=2)
    assert sorted(i for s in shards for i in s) == list(range(len(reqs)))  # each request once
    for shard in shards:
        papers = {reqs[i].paper_id for i in shard}
        assert len(papers) <= 2
        assert len(shard) <= 6 or len(papers) == 1  # only a paper larger than the bound goes over it, alone
        for pid in papers:  # whole papers: every request of a paper in its one shard
            assert sum(r.paper_id == pid for r in reqs) == sum(reqs[i].paper_id == pid for i in shard)
    assert [sorted({reqs[i].paper_id for i in s}) for s in shards] == [["a"], ["b", "c"], ["d"], ["e"]]


def test_requests_of_a_paper_apart_in_the_list_share_its_shard() -> None:
    reqs = _requests({"a": 2, "b": 2}) + _requests({"a": 1})
    assert cut_shards(reqs, max_requests=256, max_papers=1) == [[0, 1, 4], [2, 3]]


def test_only_in_process_kinds_run_on_ray_and_a_server_kind_is_refused_with_why() -> None:
    assert estimator_info("offline").in_process and estimator_info("hf:smollm2-135m").in_process
    assert not any(estimator_info(s).in_process for s in ("vllm:http://h:8000", "sglang:http://h:30000",
                                                           "vllm-local:smollm2-135m"))
    settings = load_settings(env={})
    with pytest.raises(ValueError, match="already streams its requests"):
        RayPool(EstimatorPart("vllm:http://127.0.0.1:9", EstimatorContext(settings)))


def test_a_handle_stays_local_unless_told_and_refuses_an_unknown_executor() -> None:
    settings = load_settings(env={"GREBENCH_EXECUTOR": "ray"})
    assert EstimatorHandle("offline", settings).executor == "local"  # the job decides: resolve_run hands it in
    assert EstimatorHandle("offline", settings, "ray").executor == "ray"
    with pytest.raises(ValueError, match="unknown executor"):
        EstimatorHandle("offline", settings, "dask")

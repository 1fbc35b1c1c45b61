"""Concurrency to a local model server is what the machine can take (issues 26, 33): derived from the tokens per
second measured on this machine, so that every prompt in flight is read well before a call counts as silent."""

from __future__ import annotations

import pytest

from grebench.runtime import _concurrency, server_concurrency
from grebench.settings import Settings


@pytest.mark.parametrize(("tok_s", "idle_s", "expected"), [
    (141.3, 600.0, 4),    # a busy Xeon in float32: four 8192-token prompts read in 232 s, under 0.4 x 600 s
    (1412.2, 600.0, 16),  # the same in bfloat16: the cap (continuous batching shares the decoding steps)
    (300.0, 600.0, 8),    # a slow AVX2-only CPU in float32
    (20.0, 600.0, 1),     # slower than one prompt per window: still one
    (1412.2, 60.0, 4),    # a short idle limit leaves less time to read the prompts in flight
])
def test_a_cpu_server_gets_as_many_calls_as_it_reads_in_time(monkeypatch: pytest.MonkeyPatch, settings: Settings,
                                                             tok_s: float, idle_s: float, expected: int) -> None:
    monkeypatch.setattr(_concurrency, "usable_cores", lambda: 2)
    n, why = server_concurrency(settings.replace(bench_concurrency=4, llm_idle_timeout_s=idle_s), "cpu", "bfloat16",
                                {"bfloat16_tok_s": tok_s}, 8192)
    assert n == expected and f"{tok_s:.0f} tokens/s measured in bfloat16" in why


def test_local_streams_sets_it_on_a_cpu_only(settings: Settings) -> None:
    s = settings.replace(local_streams=3, bench_concurrency=4)
    assert server_concurrency(s, "cpu", "bfloat16", {"bfloat16_tok_s": 1412.2}, 8192) == (3, "local_streams = 3")
    assert server_concurrency(s, "cuda", "bfloat16", None, 8192)[0] == 4


def test_without_a_measurement_half_the_cores_and_on_a_gpu_bench_concurrency(monkeypatch: pytest.MonkeyPatch,
                                                                            settings: Settings) -> None:
    monkeypatch.setattr(_concurrency, "usable_cores", lambda: 2)
    s = settings.replace(bench_concurrency=4)
    assert server_concurrency(s, "cpu", "float32", {"dtype": "float32", "source": "setting"}, 8192)[0] == 1
    assert server_concurrency(s, "cuda", "bfloat16", None, 8192)[0] == 4

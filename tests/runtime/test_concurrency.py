"""Concurrency to a local model server is what the machine can take (issue 26): derived from the tokens per second
measured on this machine and its cores."""

from __future__ import annotations

import pytest

from grebench.runtime import _concurrency, server_concurrency
from grebench.settings import Settings


@pytest.mark.parametrize(("cores", "tok_s", "expected"), [
    (2, 141.3, 1),     # this project's busy Xeon in float32: one 8192-token prompt takes ~58 s to read
    (2, 1412.2, 2),    # the same in bfloat16 (measured by the dtype probe): the cores bound it
    (16, 1412.2, 4),   # more cores: bench_concurrency bounds it
    (16, 300.0, 2),    # a slow CPU with many cores: the measured speed bounds it
])
def test_a_cpu_server_gets_what_the_measured_speed_and_the_cores_allow(monkeypatch: pytest.MonkeyPatch,
                                                                       settings: Settings, cores: int,
                                                                       tok_s: float, expected: int) -> None:
    monkeypatch.setattr(_concurrency, "usable_cores", lambda: cores)
    n, why = server_concurrency(settings.replace(bench_concurrency=4), "cpu", "bfloat16",
                                {"bfloat16_tok_s": tok_s}, 8192)
    assert n == expected and f"{tok_s:.0f} tokens/s measured in bfloat16" in why


def test_without_a_measurement_half_the_cores_and_on_a_gpu_bench_concurrency(monkeypatch: pytest.MonkeyPatch,
                                                                            settings: Settings) -> None:
    monkeypatch.setattr(_concurrency, "usable_cores", lambda: 2)
    s = settings.replace(bench_concurrency=4)
    assert server_concurrency(s, "cpu", "float32", {"dtype": "float32", "source": "setting"}, 8192)[0] == 1
    assert server_concurrency(s, "cuda", "bfloat16", None, 8192)[0] == 4

"""The run's plan gives a range measured on this machine, not a constant (issue 22)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grebench.pipeline import expected_minutes, measured_seconds_per_request
from grebench.settings import load_settings
from tests.conftest import FAST_ENV


def test_expected_minutes_scale_with_the_measured_throughput() -> None:
    # the default run measured here: probe 0.25 s per request, 3 papers, 6.4 minutes in all
    low, high = expected_minutes(0.25, 3)
    assert (round(low, 1), round(high, 1)) == (4.3, 6.4) and low <= 6.4 <= high + 0.1
    assert expected_minutes(0.5, 3) == (2 * low, 2 * high)


def test_the_plan_reads_this_machines_probe_and_only_it(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from grebench.runtime import machine_key

    settings = load_settings(env={**FAST_ENV, "GREBENCH_DATA_DIR": str(tmp_path),
                                  "GREBENCH_MODELS_DIR": str(tmp_path / "m")})
    assert measured_seconds_per_request(settings, "hf:smollm2-135m") is None  # nothing measured: no promise
    folder = tmp_path / "m" / ".reuse-probes"
    folder.mkdir(parents=True)
    here = {**machine_key(), "device": "cpu", "batch_tokens": 16384, "estimator": "hf:smollm2-135m@a672150f:dtype=x"}
    other = {**here, "cpu": "another CPU"}
    for name, key, reuse_s in (("a", here, 4.8), ("b", other, 0.1)):
        (folder / f"{name}.json").write_text(json.dumps({"key": json.dumps(here if name == "a" else key),
                                                         "reuse": True, "reuse_s": reuse_s, "plain_s": 9.0,
                                                         "requests": 12}))
    assert measured_seconds_per_request(settings, "hf:smollm2-135m") == pytest.approx(0.4)
    assert measured_seconds_per_request(settings, "hf:other-model") is None
    assert measured_seconds_per_request(settings, "offline") is None


@pytest.mark.parametrize(("flags", "cores", "dtype", "size", "words"), [
    (["avx2", "avx512_bf16", "amx_bf16"], 2, "auto", 12, "an AMX CPU"),                 # the README Xeon
    (["avx2", "avx512f", "avx512_bf16"], 2, "auto", 7, "an AVX-512-BF16 CPU"),          # the EPYC: 23.5 min for 12
    (["avx2", "fma"], 2, "auto", 4, "runs only float32"),                               # an AVX2-only EPYC
    (["avx2", "fma"], 8, "auto", 12, "runs only float32"),                              # more cores, more papers
    (["avx2", "avx512_bf16", "amx_bf16"], 2, "float32", 4, "runs only float32"),       # float32 chosen by hand
])
def test_auto_sizes_the_sample_to_the_machine_at_hand(monkeypatch: pytest.MonkeyPatch, flags: list[str],
                                                      cores: int, dtype: str, size: int, words: str) -> None:
    from grebench.pipeline import papers_size
    from grebench.pipeline._sample import AUTO_CPU_MINUTES
    from grebench.runtime import _dtype

    monkeypatch.setattr(_dtype, "_cpu", lambda: ("a CPU", flags))
    monkeypatch.setattr("grebench.runtime.usable_cores", lambda: cores)
    monkeypatch.setattr("grebench.runtime.default_device", lambda _device: "cpu")
    settings = load_settings(env={**FAST_ENV, "GREBENCH_HF_DTYPE": dtype})
    got, why = papers_size("auto", settings, "hf:smollm2-135m")
    assert got == size and words in why, why
    minutes = float(why.split("about ")[1].split(" minutes")[0])
    assert minutes <= AUTO_CPU_MINUTES  # within the default run's aim on every class of machine
    assert papers_size("auto", settings, "offline")[0] is None  # no local model at all: every paper
    with_candidate = settings.replace(local_candidates="smollm2-135m")
    assert papers_size("auto", with_candidate, "offline")[0] == 12  # a fast estimator: the fixed size
    assert papers_size("5", settings, "hf:smollm2-135m") == (5, "as set")


def test_auto_says_up_front_when_even_the_smallest_sample_is_slow(monkeypatch: pytest.MonkeyPatch) -> None:
    from grebench.pipeline import papers_size
    from grebench.pipeline._sample import AUTO_MIN_PAPERS, CLASS_MINUTES
    from grebench.runtime import _dtype

    monkeypatch.setattr(_dtype, "_cpu", lambda: ("a CPU", ["avx2"]))
    monkeypatch.setattr("grebench.runtime.usable_cores", lambda: 1)
    monkeypatch.setattr("grebench.runtime.default_device", lambda _device: "cpu")
    monkeypatch.setitem(CLASS_MINUTES, "float32", 90.0)
    got, why = papers_size("auto", load_settings(env=dict(FAST_ENV)), "hf:smollm2-135m")
    assert got == AUTO_MIN_PAPERS and "longer than the 15 aimed at" in why and "about 22 minutes here" in why, why


@pytest.mark.parametrize("load, busy", [(0.2, False), (1.4, False), (1.6, True), (4.0, True)])
def test_the_plan_says_when_other_work_keeps_the_cores_busy(monkeypatch: pytest.MonkeyPatch, load: float,
                                                            busy: bool) -> None:
    """The sample does not follow the load (the same machine draws the same sample), but the plan says that its
    times assume idle cores when other work already holds three quarters of them."""
    from grebench.cli._plan import plan_text
    from grebench.pipeline import RunOptions, resolve_setup

    monkeypatch.setattr("os.getloadavg", lambda: (load, load, load))
    monkeypatch.setattr("grebench.runtime.usable_cores", lambda: 2)
    settings = load_settings(env={**FAST_ENV, "GREBENCH_ESTIMATOR": "hf:smollm2-135m"})
    text = plan_text(settings, resolve_setup(settings, RunOptions()))
    assert ("the machine is busy now" in text) is busy, text
    if busy:
        assert f"load average {load:.1f} on 2 usable cores" in text
    fast = load_settings(env={**FAST_ENV, "GREBENCH_ESTIMATOR": "offline", "GREBENCH_LOCAL_CANDIDATES": "",
                              "GREBENCH_LOCAL_JUDGES": ""})
    offline = plan_text(fast, resolve_setup(fast, RunOptions()))
    assert "busy" not in offline  # no language model on this machine: the load does not change the plan


def test_the_plan_states_the_scoring_path_and_its_evidence(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from grebench.cli._plan import plan_text
    from grebench.pipeline import RunOptions, resolve_setup
    from grebench.runtime import machine_key

    settings = load_settings(env={**FAST_ENV, "GREBENCH_DATA_DIR": str(tmp_path), "GREBENCH_ESTIMATOR":
                                  "hf:smollm2-135m", "GREBENCH_MODELS_DIR": str(tmp_path / "m")})
    setup = resolve_setup(settings, RunOptions(papers="3"))
    assert "probed on first use" in plan_text(settings, setup)
    folder = tmp_path / "m" / ".reuse-probes"
    folder.mkdir(parents=True)
    key = {**machine_key(), "device": "cpu", "batch_tokens": 16384, "estimator": "hf:smollm2-135m@a672150f:dtype=x"}
    (folder / "a.json").write_text(json.dumps({
        "key": json.dumps(key), "reuse": True, "basis": "timings", "reuse_s": 2.0, "plain_s": 4.2, "requests": 12,
        "why": "reuse 2.10x plain (median of 5 interleaved rounds, 1.90-2.30); 5/5 rounds >= 1.1x; drift ...",
        "created_at": "2026-11-26T17:00:00+00:00", "load_before": 1.2, "cores": 2, "busy": False}))
    text = plan_text(settings, setup)
    assert "scoring path prefix reuse (timings: reuse 2.10x plain (median of 5 interleaved rounds" in text
    assert "load 1.2 on 2 cores" in text and "drift" not in text

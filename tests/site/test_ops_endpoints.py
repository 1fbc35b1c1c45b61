"""``/healthz`` and ``/metrics`` of the app (issue 64), through the app as `grebench app` and `serve` launch it."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from grebench import metrics
from grebench.settings import load_settings
from grebench.site import create_app
from grebench.site._ops import health
from tests.conftest import FAST_ENV
from tests.site.conftest import exported_app_settings, launch_app


def test_healthz_and_metrics_answer_before_the_app(tmp_path: Path) -> None:
    metrics.reset()
    settings = exported_app_settings(tmp_path / "data")
    demo = create_app(settings)
    try:
        url = launch_app(demo, settings).rstrip("/")
        metrics.job_finished("site", "ok", 2.5, 1_796_000_000.0)
        metrics.job_finished("poll", "failed", 0.4, 1_796_000_001.0)
        with httpx.Client(timeout=30) as http:
            ok = http.get(f"{url}/healthz")
            scraped = http.get(f"{url}/metrics")
            refused = http.post(f"{url}/healthz")
    finally:
        demo.close()
    assert ok.status_code == 200 and ok.headers["content-type"] == "application/json", ok.text
    body = ok.json()
    assert body["status"] == "ok" and body["store"] == "ok"
    assert body["board"] is None or body["board"]["age_s"] >= 0
    assert refused.status_code == 405
    assert scraped.status_code == 200 and scraped.headers["content-type"].startswith("text/plain"), scraped.text
    text = scraped.text
    for line in ('grebench_jobs_total{job="site",outcome="ok"} 1.0',
                 'grebench_jobs_total{job="poll",outcome="failed"} 1.0',
                 'grebench_job_failures_total{job="poll"} 1.0',
                 'grebench_job_duration_seconds_count{job="site"} 1.0',
                 "grebench_submission_queue_length 0.0"):
        assert line in text, text
    assert "grebench_board_age_seconds" in text


def test_healthz_is_503_when_the_export_cannot_be_read(tmp_path: Path) -> None:
    settings = load_settings(env={**FAST_ENV, "GREBENCH_DATA_DIR": str(tmp_path / "data")})

    def unreadable() -> object:
        raise FileNotFoundError("no papers.parquet")

    status, body = health(settings.db_path, settings.service_status_path, unreadable)
    assert status == 503 and body["status"] == "unavailable" and "no papers.parquet" in body.get("error", "")
    json.dumps(body)

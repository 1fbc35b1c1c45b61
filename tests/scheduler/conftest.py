"""Scheduler fixtures: a fake OpenReview venue that gains papers then reviews, and an LLM candidate on a fake server."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Iterator

import pytest

from grebench.settings import Settings, load_settings
from grebench.store import utcnow
from tests.conftest import FAST_ENV, subject
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.openreview_server import FakeOpenReview

VENUE = "Fake.cc/2020/Conference"
CANDIDATE = "fakellm"


def config_text(data_dir: Path, openreview_url: str, llm_url: str, **values: object) -> str:
    """A TOML config: the fake venue, one LLM candidate with a cutoff before the papers, small bootstrap."""
    base = {"data_dir": str(data_dir), "openreview_baseurl_v1": openreview_url, "openreview_baseurl_v2": openreview_url,
            "fetch_pdfs": False, "venues": VENUE, "bootstrap_samples": 50, "exam_pairs": 10,
            "llm_max_retries": 0, "llm_timeout_s": 30.0, **values}
    lines = [f"{k} = {str(v).lower() if isinstance(v, bool) else repr(v) if isinstance(v, str) else v}"
             for k, v in base.items()]
    lines += ["", "[[candidates]]", f'name = "{CANDIDATE}"', 'model = "openai/fake-model"', f'api_base = "{llm_url}"',
              'cutoff = "2019-06-01"']
    return "\n".join(lines).replace("'", '"') + "\n"


def make_settings(tmp_path: Path, openreview: FakeOpenReview, llm: FakeOpenAIServer, **values: object) -> Settings:
    """Settings loaded from :func:`config_text` written to ``tmp_path/grebench.toml``."""
    cfg = tmp_path / "grebench.toml"
    cfg.write_text(config_text(tmp_path / "data", openreview.url, llm.url, **values), encoding="utf-8")
    return load_settings(cfg, env=dict(FAST_ENV))


def add_papers(fake: FakeOpenReview, n: int) -> list[str]:
    """Papers without reviews (reviews hidden until :func:`add_reviews`)."""
    return [fake.add_paper(VENUE, title=f"Paper {i} on {subject(i)}", abstract=f"We study {subject(i)} and find "
                           f"that method {i} improves accuracy on benchmark {i}.") for i in range(n)]


def add_reviews(fake: FakeOpenReview, paper_ids: list[str], per_paper: int = 3) -> None:
    """Reviews that become public now (after any generation made so far)."""
    created = utcnow() + timedelta(seconds=1)
    for n, pid in enumerate(paper_ids):
        for i in range(per_paper):
            fake.add_review(pid, f"Summary: the paper {pid} proposes method {i} for {subject(n)}.\n\nStrengths: "
                            f"clear writing, good results on benchmark {i}.\n\nWeaknesses: small experiments; "
                            f"missing {subject(n)} baseline {i}. The novelty is limited.", created=created)


@pytest.fixture
def openreview() -> Iterator[FakeOpenReview]:
    """A running fake OpenReview (API v1)."""
    with FakeOpenReview("v1") as fake:
        yield fake


@pytest.fixture
def llm() -> Iterator[FakeOpenAIServer]:
    """A running fake OpenAI-compatible server."""
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """LLM retries do not sleep."""
    monkeypatch.setattr("grebench.llm._client._sleep", lambda _s: None)


__all__ = ["CANDIDATE", "VENUE", "add_papers", "add_reviews", "datetime", "make_settings"]

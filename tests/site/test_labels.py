"""Board names in words on the pages and in the app, with the exact ids still there.

The words come from the registrations (an estimator's ``label``, a metric's ``label``, a preprocessor's ``label``),
are stored with the boards (``labels``), and the site reads them from there (:class:`grebench.site.Labels`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from grebench.scoring import compute_boards, metric
from grebench.scoring._labels import label_rows, preprocessor_label
from grebench.scoring.estimators import estimator_label
from grebench.settings import Settings, load_settings
from grebench.site import Labels, build_site
from grebench.site._app import _board_choices
from grebench.store import Store
from tests.conftest import FAST_ENV

OFFLINE_ID = ("offline:wb-bigram+content-copy:lam=0.08:beta=0.4:eps=0.001:minpapers=2:copy=tokens:fn=3820d16a"
              ":lower-words:corpus=ac12c4a0d31d")
HF_ID = "hf:/root/.cache/grebench/models/SmolLM2-135M@1a2b3c4d:dtype=float32:chat=9f8e7d6c:target=judgment-v1"


@pytest.mark.parametrize(("estimator", "label"), [
    (OFFLINE_ID, "offline word model (fast proxy)"),
    ("offline", "offline word model (fast proxy)"),
    (HF_ID, "SmolLM2-135M (hf, float32)"),
    ("hf:smollm2-135m@77aa11bb:dtype=bfloat16:chat=00ff00ff:target=judgment-v1",
     "SmolLM2-135M-Instruct (hf, bfloat16)"),  # its title
    # an id from before the target rule: its scores are not comparable, and the words say so
    ("hf:smollm2-135m@77aa11bb:dtype=bfloat16:chat=00ff00ff",
     "SmolLM2-135M-Instruct (hf, bfloat16, every token scored)"),
    ("hf:/home/u/.cache/huggingface/hub/models--HuggingFaceTB--SmolLM2-360M/snapshots/0123abcd@5e6f7a8b"
     ":dtype=float32:chat=1:target=judgment-v1", "SmolLM2-360M (hf, float32)"),
    ("hf:/ckpt/my@model@5e6f7a8b:dtype=float16:chat=1:target=judgment-v1", "my@model (hf, float16)"),
    ("vllm:meta-llama/Llama-3.1-8B-Instruct@ab12cd34:target=judgment-v1", "Llama-3.1-8B-Instruct (vLLM)"),
    ("vllm:/models/Qwen2.5-7B@ab12cd34:target=judgment-v1", "Qwen2.5-7B (vLLM)"),
    ("sglang:/srv/models/gemma-2-9b@0011aabb:target=judgment-v1", "gemma-2-9b (SGLang)"),
    ("toy:some-plugin-estimator:with=options:that-go-on-and-on-for-quite-a-while@abc",
     "estimator toy:some-plugin-estimator:with=options:that-go-…"),  # an unregistered kind's id, shortened
])
def test_estimator_ids_of_every_kind_in_words(estimator: str, label: str) -> None:
    assert estimator_label(estimator) == label


@pytest.mark.parametrize(("name", "label"), [
    ("gem", "GEM"), ("gem-s", "GEM-S (abstract)"), ("gem-s-assw", "GEM-S (claimed strengths & weaknesses)"),
    ("gem-raw", "GEM (raw review text)"), ("gem-x", "gem-x")])
def test_metrics_in_words(name: str, label: str) -> None:
    assert Labels({("metric", m): {"label": metric(m).label} for m in ("gem", "gem-s", "gem-s-assw", "gem-raw")}
                  ).metric(name) == label


@pytest.mark.parametrize(("preprocessor", "label"), [
    ("rules-v3", "rules preprocessor"), ("rules", "rules preprocessor"),
    ("litellm:openai/gpt-4o-mini@preprocess-v1", "LLM preprocessor (gpt-4o-mini)"),
    ("imported:iclr-lines", "imported judgment lines (iclr-lines)"), ("none", "no preprocessor (raw text)"),
    ("mystery-v9", "mystery-v9 preprocessor")])
def test_preprocessors_in_words(preprocessor: str, label: str) -> None:
    assert preprocessor_label(preprocessor) == label


def test_board_titles_read_as_sentences(small_store: Store) -> None:
    small_store.con.execute("INSERT INTO scores SELECT * REPLACE (? AS estimator) FROM scores", [HF_ID])
    small_store.con.execute("INSERT INTO scores SELECT DISTINCT ON (candidate, paper_id, reference_review_id) * "
                            "REPLACE ('vllm:m@1:target=judgment-v1' AS estimator, 'none' AS preprocessor) FROM scores")
    rows = {(what, key): {"label": label, "role": role} for what, key, label, role, _ in label_rows(small_store)}
    labels = Labels(rows)
    assert labels.board_title({"metric": "gem-s", "estimator": HF_ID, "preprocessor": "rules-v3"}) == \
        "GEM-S (abstract) · scored by SmolLM2-135M (hf, float32) · rules-v3 preprocessor"  # no such id stored
    assert labels.setup("vllm:m@1:target=judgment-v1", "none") == "scored by m (vLLM) · no preprocessor (raw text)"
    assert Labels().board_title({"metric": "gem", "estimator": OFFLINE_ID, "preprocessor": "rules-v3"}) == \
        "gem · estimator offline:wb-bigram+content-copy:lam=0.08:beta=0.… · rules-v3 preprocessor"  # no labels
    assert Labels().estimator("") == "unknown estimator"


def realistic_ids(store: Store) -> None:
    """Give the small store's boards the ids real estimators write: the full offline id, plus an hf board."""
    con = store.con
    con.execute("UPDATE scores SET estimator = ?, preprocessor = 'rules-v3'", [OFFLINE_ID])
    con.execute("UPDATE judgments SET preprocessor = 'rules-v3'")
    con.execute("INSERT INTO scores SELECT * REPLACE (? AS estimator, pmi * 2 AS pmi) FROM scores", [HF_ID])
    compute_boards(store, load_settings(env={**FAST_ENV, }))  # the scoring stage's last step: boards from the new ids


@pytest.fixture
def named_site(small_store: Store, settings: Settings, tmp_path: Path) -> Path:
    realistic_ids(small_store)
    return Path(build_site(small_store, settings, tmp_path / "site")["out"])


def _soup(path: Path) -> BeautifulSoup:
    return BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")


def test_board_pages_are_titled_in_words_and_keep_the_exact_ids(named_site: Path) -> None:
    pages = {}
    for path in (named_site / "boards").glob("*.html"):
        soup = _soup(path)
        pages[soup.title.get_text()] = soup
    hf_title = "ICLR 2020 · GEM-S (abstract) · scored by SmolLM2-135M (hf, float32) · rules preprocessor · GRE-bench"
    offline_title = "ICLR 2024 · GEM-S (abstract) · offline word model (fast proxy) · rules preprocessor · GRE-bench"
    assert hf_title in pages and offline_title in pages, sorted(pages)
    for title, estimator in ((hf_title, HF_ID), (offline_title, OFFLINE_ID)):
        soup = pages[title]
        headings = " ".join(h.get_text(" ", strip=True) for h in soup.select("h1, h2, h3, .board-name"))
        assert "GEM-S (abstract)" in headings and estimator not in headings  # no raw id where people read
        assert soup.select_one("p.board-name")["title"] == f"gem-s · {estimator} · rules-v3"
        ids = [c.get_text() for c in soup.select("details.ids code")]
        assert ids == ["gem-s", estimator, "rules-v3"]  # the exact ids, one click away


def test_index_lists_boards_in_words_with_their_ids(named_site: Path) -> None:
    soup = _soup(named_site / "index.html")
    links = soup.select("ul.boards a")
    assert len(links) == 4
    assert {a.get_text() for a in links} == {
        "GEM-S (abstract) · scored by SmolLM2-135M (hf, float32) · rules preprocessor",
        "GEM-S (abstract) · offline word model (fast proxy) · rules preprocessor"}
    assert {a["title"] for a in links} == {f"gem-s · {HF_ID} · rules-v3", f"gem-s · {OFFLINE_ID} · rules-v3"}
    headline = soup.select_one("h3.board-name")
    assert headline.get_text(" ", strip=True).startswith("GEM-S (abstract) · ")
    assert headline["title"].startswith("gem-s · ")


def test_leaderboard_json_keeps_the_ids_unchanged(named_site: Path) -> None:
    boards = json.loads((named_site / "leaderboard.json").read_text())["boards"]
    assert {(b["metric"], b["estimator"], b["preprocessor"]) for b in boards} == {
        ("gem-s", HF_ID, "rules-v3"), ("gem-s", OFFLINE_ID, "rules-v3")}


def test_model_paper_and_methodology_pages_name_setups_in_words(named_site: Path) -> None:
    model = _soup(next((named_site / "models").glob("good-llm-*.html")))
    setups = {td.get_text(strip=True): td["title"] for td in model.select("table tbody td[title]")
              if "·" in td["title"]}
    assert setups["scored by SmolLM2-135M (hf, float32) · rules preprocessor"] == f"{HF_ID} · rules-v3"
    paper = _soup(next((named_site / "papers").glob("p2020_0-*.html")))
    assert "offline word model (fast proxy) · rules preprocessor" in paper.get_text()
    method = _soup(named_site / "methodology.html")
    assert HF_ID in method.get_text() and "scored by SmolLM2-135M (hf, float32)" in method.get_text()


def test_app_board_selector_shows_words_and_keeps_ids_as_values(small_store: Store) -> None:
    realistic_ids(small_store)
    _venues, metrics, setups, _models, _papers = _board_choices(small_store)
    assert metrics == [("GEM-S (abstract)", "gem-s")]
    # headline order: the language model's setup first, the fast proxy after it (labelled so)
    assert setups == [("scored by SmolLM2-135M (hf, float32) · rules preprocessor", f"{HF_ID} / rules-v3"),
                      ("offline word model (fast proxy) · rules preprocessor", f"{OFFLINE_ID} / rules-v3")]

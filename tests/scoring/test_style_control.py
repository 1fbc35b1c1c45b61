"""The style-controlled view beside the headline (issue 63 §3): padding buys nothing there, a style twin of the human
baseline keeps its raw difference, and the stored boards carry the view.

Stores are built directly (papers, generations and scores rows, as tests/scoring/test_coverage.py builds them), so
the texts' style and the scores are chosen here: in this synthetic world the metric *does* reward length (every
contestant scores higher on the papers where it writes longer), which is what the controlled view must see through.
"""

from __future__ import annotations

import math
from datetime import datetime

import numpy as np
import pytest

from grebench.bench._generations import make_row, write_rows
from grebench.scoring import compute_boards, ranked_board, stored_boards, style_features
from grebench.settings import load_settings
from grebench.store import PaperRecord, ReviewRecord, Store
from tests.conftest import FAST_ENV

PUBLIC = datetime(2019, 11, 8)
PAPERS = 30
#: nats of score per 100 words of length over the human review's: the bias the synthetic metric has
PER_100_WORDS = 0.8
PAD = "This section restates the points above in further words for completeness."  # 12 words, nothing new


def _text(words: int, items: int, headings: int, pad_items: int = 0) -> str:
    """A review of ``words`` body words, ``items`` list items and ``headings`` headings, plus ``pad_items`` list items
    of padding (12 words each)."""
    body = " ".join(["word"] * words)
    lines = [f"## Section {h}" for h in range(headings)] + [body] + [f"- point {i}" for i in range(items)]
    return "\n".join(lines + [f"- {PAD}" for _ in range(pad_items)])


def _candidate(store: Store, name: str, kind: str) -> None:
    store.con.execute("INSERT INTO candidates (name, kind, cutoff, params_json, updated_at) VALUES (?, ?, NULL, '{}', "
                      "?)", [name, kind, datetime(2020, 1, 1)])


def _reviews(store: Store, name: str, texts: dict[str, str], scores: dict[str, float]) -> None:
    """One generation per paper with its text, scored ``scores[paper]`` (GEM-S, one reference, sealed)."""
    rows = [make_row(candidate=name, paper_id=p, prompt_version="v", params={}, source_review_id=None, status="ok",
                     text=text, sections=None, parse_ok=True, flags={}, error=None, attempts=1,
                     generated_at=datetime(2019, 10, 1), reviews_public_at=PUBLIC) for p, text in texts.items()]
    write_rows(store, rows)
    for row in rows:
        pmi = scores[row["paper_id"]]
        store.con.execute("INSERT INTO scores VALUES ('gem-s', 'offline', 'rules', 'gem-v1', ?, ?, ?, ?, ?, 0.0, ?, 5, "
                          "?)", [name, row["paper_id"], f"{row['paper_id']}-r0", row["generation_id"], pmi, pmi,
                                 datetime(2020, 1, 1)])


def _board(store: Store) -> Store:
    """A board where GEM-S rises with length for every contestant: ``human``, ``terse`` (the human baseline's
    level, its own lengths), ``padded`` (terse's texts and scores plus padding list items, scored higher for their
    length), ``twin`` (the human baseline's style on every paper, 0.5 nats above it) and a control."""
    rng = np.random.default_rng(7)
    with store.transaction():
        for n in range(PAPERS):
            review = ReviewRecord(review_id=f"p{n}-r0", paper_id=f"p{n}", kind="official_review", text="A review.",
                                  sections=[("Review", "A review.")], content={"review": "A review."})
            store.upsert_paper(PaperRecord(paper_id=f"p{n}", venue_id="V", title=f"T{n}", source="test",
                                           abstract="A.", reviews_public_at=PUBLIC, reviews=[review]))
    papers = [f"p{n}" for n in range(PAPERS)]
    level = dict(zip(papers, rng.normal(2.0, 1.0, PAPERS), strict=True))  # how much there is to say of the paper
    human_words = dict(zip(papers, rng.integers(200, 400, PAPERS), strict=True))
    terse_words = dict(zip(papers, rng.integers(120, 480, PAPERS), strict=True))
    items = dict(zip(papers, rng.integers(0, 8, PAPERS), strict=True))
    heads = dict(zip(papers, rng.integers(0, 4, PAPERS), strict=True))
    noise = dict(zip(papers, rng.normal(0.0, 0.1, PAPERS), strict=True))
    for name, kind in (("human", "human"), ("terse", "llm"), ("padded", "llm"), ("twin", "llm"),
                       ("empty", "control")):
        _candidate(store, name, kind)
    human = {p: _text(int(human_words[p]), 2, 1) for p in papers}
    terse = {p: _text(int(terse_words[p]), int(items[p]), int(heads[p])) for p in papers}
    padded = {p: _text(int(terse_words[p]), int(items[p]), int(heads[p]), pad_items=10) for p in papers}

    def gem_s(texts: dict[str, str], extra: float = 0.0) -> dict[str, float]:
        return {p: level[p] + extra + noise[p] + PER_100_WORDS * (len(t.split()) - len(human[p].split())) / 100
                for p, t in texts.items()}

    _reviews(store, "human", human, {p: level[p] for p in papers})
    _reviews(store, "terse", terse, gem_s(terse))
    _reviews(store, "padded", padded, gem_s(padded))
    _reviews(store, "twin", human, {p: level[p] + 0.5 + noise[p] for p in papers})
    _reviews(store, "empty", {p: "" for p in papers}, {p: -1.0 for p in papers})
    return store


def test_style_features_count_words_list_items_headings_and_markup() -> None:
    text = "## Summary\n**Strengths:**\n- one *good* idea\n2. a `table` | here\nPlain words end it."
    words, list_items, headings, density = style_features(text)
    assert words == len(text.split()) and list_items == 2 and headings == 2
    assert density == pytest.approx(100 * sum(text.count(c) for c in "*_#`|~") / len(text))
    assert style_features("") == (0.0, 0.0, 0.0, 0.0) and style_features(None) == (0.0, 0.0, 0.0, 0.0)


def test_padding_gains_nothing_in_the_style_controlled_view(store: Store) -> None:
    board = ranked_board(_board(store), "gem-s", "offline", "rules", samples=300, seed=11)
    rows = {r["candidate"]: r for r in board["rows"]}
    terse, padded = rows["terse"], rows["padded"]
    # the raw board rewards the padding: 10 list items of 12 words each, +0.96 nats on every paper
    assert padded["score"] > terse["ci95_high"]
    assert padded["style_score"] is not None and terse["style_score"] is not None
    assert terse["style_ci95_high"] is not None
    assert padded["style_score"] <= terse["style_ci95_high"]
    assert padded["diff_vs_human"] is not None and padded["style_score"] < padded["diff_vs_human"] - 0.7
    # the fit found the length bias (per SD of the length difference: 0.8 nats per 100 words), and says so
    style = board["style_control"]
    assert style is not None
    length = style["coefficients"]["length_words"]
    expected = PER_100_WORDS * style["feature_sds"]["length_words"] / 100
    assert length["coefficient"] == pytest.approx(expected, rel=0.1)
    assert length["ci_low"] is not None and length["ci_low"] > 0
    assert style["n_rows"] == 3 * PAPERS and style["contestants"] == 3 and style["n_papers"] == PAPERS
    assert style["features"] == ["length_words", "list_items", "headings", "markdown_density"]


def test_a_style_twin_of_the_human_baseline_keeps_its_raw_difference(store: Store) -> None:
    rows = {r["candidate"]: r for r in ranked_board(_board(store), "gem-s", "offline", "rules", samples=300,
                                                    seed=11)["rows"]}
    twin = rows["twin"]
    assert twin["diff_vs_human"] == pytest.approx(0.5, abs=0.1)
    low, high = twin["style_ci95_low"], twin["style_ci95_high"]
    assert low is not None and high is not None and twin["diff_vs_human"] is not None
    assert low <= twin["diff_vs_human"] <= high
    # and the view is the contestants' only: the human baseline and the controls have none
    assert rows["human"]["style_score"] is None and rows["empty"]["style_score"] is None


def test_the_stored_board_carries_the_view(store: Store) -> None:
    settings = load_settings(env=FAST_ENV)
    compute_boards(_board(store), settings)
    [board] = stored_boards(store)
    style = board["style_control"]
    assert set(style) >= {"features", "coefficients", "feature_means", "feature_sds", "n_rows", "method"}
    assert set(style["coefficients"]["list_items"]) == {"coefficient", "ci_low", "ci_high"}
    assert style["bootstrap_samples"] == settings.scoring.bootstrap_samples and style["seed"] == settings.seed
    rows = {r["candidate"]: r for r in board["rows"]}
    padded = rows["padded"]["style_controlled"]
    assert set(padded) == {"score", "ci_low", "ci_high"} and padded["ci_low"] <= padded["score"] <= padded["ci_high"]
    assert rows["human"]["style_controlled"] is None and rows["empty"]["style_controlled"] is None
    # the headline is untouched: ranked by raw score, the padded variant first
    assert next(r["candidate"] for r in board["rows"] if r["rank"] is not None) == "padded"
    assert all(math.isfinite(v) for v in style["feature_sds"].values())

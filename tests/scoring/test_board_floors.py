"""A board that says what it can tell (issue 63 §5): the human baseline is a reference line, not a ranked contestant;
every contestant is tested against the floor controls (`other-paper`, `generic`) by the board's paired test, and the
board says in words when a model cannot be told apart from a review of another paper, or a control sits above the
human baseline.  Two contestants side by side (§4): :func:`compare_pair` on the board's per-paper values.

The store is built directly (papers, generations and scores rows, as tests/scoring/test_style_control.py builds it), so
the scores are chosen here: ``strong`` sits well above every floor, ``lost`` is the `other-paper` control's scores
plus a zero-mean wobble (nothing tells them apart), and `elongation` sits just above the human baseline.
"""

from __future__ import annotations

import math
from datetime import datetime

import pytest

from grebench.bench import floor_controls
from grebench.bench._generations import make_row, write_rows
from grebench.scoring import (
    board_findings,
    board_paper_scores,
    compare_pair,
    compute_boards,
    paired_difference,
    rank_word,
    ranked_board,
    stored_boards,
)
from grebench.settings import load_settings
from grebench.store import PaperRecord, ReviewRecord, Store
from tests.conftest import FAST_ENV

PUBLIC = datetime(2019, 11, 8)
PAPERS = 20


def _candidate(store: Store, name: str, kind: str) -> None:
    store.con.execute("INSERT INTO candidates (name, kind, cutoff, params_json, updated_at) VALUES (?, ?, NULL, '{}', "
                      "?)", [name, kind, datetime(2020, 1, 1)])


def _reviews(store: Store, name: str, scores: dict[str, float]) -> None:
    rows = [make_row(candidate=name, paper_id=p, prompt_version="v", params={}, source_review_id=None, status="ok",
                     text=f"{name} on {p}", sections=None, parse_ok=True, flags={}, error=None, attempts=1,
                     generated_at=datetime(2019, 10, 1), reviews_public_at=PUBLIC) for p in scores]
    write_rows(store, rows)
    for row in rows:
        pmi = scores[row["paper_id"]]
        store.con.execute("INSERT INTO scores VALUES ('gem-s', 'offline', 'rules', 'gem-v1', ?, ?, ?, ?, ?, 0.0, ?, 5, "
                          "?)", [name, row["paper_id"], f"{row['paper_id']}-r0", row["generation_id"], pmi, pmi,
                                 datetime(2020, 1, 1)])


def _board(store: Store) -> Store:
    with store.transaction():
        for n in range(PAPERS):
            review = ReviewRecord(review_id=f"p{n}-r0", paper_id=f"p{n}", kind="official_review", text="A review.",
                                  sections=[("Review", "A review.")], content={"review": "A review."})
            store.upsert_paper(PaperRecord(paper_id=f"p{n}", venue_id="V", title=f"T{n}", source="test",
                                           abstract="A.", reviews_public_at=PUBLIC, reviews=[review]))
    papers = [f"p{n}" for n in range(PAPERS)]
    level = {p: 5.0 + (n % 7) * 0.9 for n, p in enumerate(papers)}
    wobble = {p: (0.6 if n % 2 else -0.6) + 0.01 * (n % 3) for n, p in enumerate(papers)}  # mean ~0, both signs
    other = {p: level[p] - 3.0 + 0.2 * (n % 5) for n, p in enumerate(papers)}
    for name, kind in (("human", "human"), ("strong", "llm"), ("lost", "llm"), ("other-paper", "control"),
                       ("generic", "control"), ("elongation", "control")):
        _candidate(store, name, kind)
    _reviews(store, "human", level)
    _reviews(store, "strong", {p: level[p] + 1.0 + 0.1 * (n % 4) for n, p in enumerate(papers)})
    _reviews(store, "lost", {p: other[p] + wobble[p] for p in papers})
    _reviews(store, "other-paper", other)
    _reviews(store, "generic", {p: level[p] - 6.0 for p in papers})
    _reviews(store, "elongation", {p: level[p] + wobble[p] for p in papers})
    return store


def test_the_floor_controls_come_from_their_registration() -> None:
    assert set(floor_controls()) == {"other-paper", "generic"}
    assert floor_controls()["other-paper"] == "a review of another paper"


def test_the_human_baseline_is_a_reference_line_and_the_next_contestant_is_rank_1(store: Store) -> None:
    rows = ranked_board(_board(store), "gem-s", "offline", "rules", samples=200, seed=3)["rows"]
    by = {r["candidate"]: r for r in rows}
    assert by["human"]["rank"] is None and by["human"]["rank_low"] is None
    assert rank_word(by["human"]) == "reference"
    assert by["strong"]["rank"] == 1 and by["lost"]["rank"] == 2
    assert by["strong"]["rank_low"] == by["strong"]["rank_high"] == 1.0  # ranks count the contestants only
    # the reference line sits at its score among the ranked rows: strong, human, lost, then the controls
    assert [r["candidate"] for r in rows][:3] == ["strong", "human", "lost"]
    assert all(r["role"] == "reference" for r in rows[3:])
    # the baseline is still the zero point of every row's paired difference
    assert by["strong"]["diff_vs_human"] == pytest.approx(1.15)


def test_each_row_is_tested_against_the_floors_with_the_board_s_test(store: Store) -> None:
    rows = {r["candidate"]: r for r in ranked_board(_board(store), "gem-s", "offline", "rules", samples=200,
                                                    seed=3)["rows"]}
    lost = rows["lost"]["vs_floor"]
    assert lost is not None and set(lost) == {"other-paper", "generic"}
    assert lost["other-paper"]["distinguishable"] is False and lost["other-paper"]["p"] > 0.5
    assert lost["other-paper"]["papers"] == PAPERS
    assert lost["generic"]["distinguishable"] is True and lost["generic"]["diff"] > 0
    strong = rows["strong"]["vs_floor"]
    assert strong is not None and all(t["distinguishable"] and t["diff"] > 0 for t in strong.values())
    human = rows["human"]["vs_floor"]
    assert human is not None and human["other-paper"]["distinguishable"]
    assert rows["other-paper"]["vs_floor"] is None and rows["elongation"]["vs_floor"] is None  # controls: none
    # the same test as diff_vs_human: paired_difference over the common papers
    data = board_paper_scores(store, {"metric": "gem-s", "estimator": "offline", "preprocessor": "rules",
                                      "venue_id": "V", "rows": [{"candidate": "lost"}, {"candidate": "other-paper"}]})
    again = paired_difference(data["lost"], data["other-paper"], samples=200, seed=3)
    assert lost["other-paper"]["p"] == again["p"] and lost["other-paper"]["diff"] == pytest.approx(again["diff"])


def test_the_board_says_what_it_cannot_tell(store: Store) -> None:
    rows = ranked_board(_board(store), "gem-s", "offline", "rules", samples=200, seed=3)["rows"]
    findings = board_findings(rows)
    lost = [f for f in findings if f.startswith("lost ")]
    assert len(lost) == 1 and "cannot be told apart from a review of another paper (`other-paper`)" in lost[0]
    assert not any(f.startswith("strong ") for f in findings)  # told apart from both floors: nothing to say
    above = [f for f in findings if "`elongation`" in f]
    assert len(above) == 1 and "scores above the human baseline" in above[0] and "not significant" in above[0]
    assert not any("`generic`" in f and "above the human" in f for f in findings)  # below the baseline: silent


def test_stored_boards_carry_the_floor_tests_and_the_reference_status(store: Store) -> None:
    compute_boards(_board(store), load_settings(env=FAST_ENV))
    [board] = stored_boards(store)
    rows = {r["candidate"]: r for r in board["rows"]}
    assert rows["human"]["status"] == "reference" and rows["human"]["rank"] is None
    assert rows["strong"]["status"] == "ranked" and rows["strong"]["rank"] == 1
    assert [r["candidate"] for r in board["rows"]][:3] == ["strong", "human", "lost"]
    assert rows["lost"]["vs_floor"]["other-paper"]["distinguishable"] is False
    assert set(rows["lost"]["vs_floor"]["other-paper"]) == {"diff", "p", "papers", "distinguishable"}
    assert rows["generic"]["vs_floor"] is None
    assert any(f.startswith("lost ") for f in board_findings(board["rows"]))
    # the per-paper values the compare pages read are the ones the stored scores are the means of
    scores = board_paper_scores(store, board)
    for r in board["rows"]:
        assert sum(scores[r["candidate"]].values()) / len(scores[r["candidate"]]) == pytest.approx(r["score"])


def test_compare_pair_lists_the_papers_where_two_differ_most(store: Store) -> None:
    compute_boards(_board(store), load_settings(env=FAST_ENV))
    [board] = stored_boards(store)
    scores = board_paper_scores(store, board)
    c = compare_pair("strong", "lost", scores, top=3)
    assert c["papers"] == PAPERS and c["distinguishable"] and c["diff"] > 0 and c["a_higher"] == PAPERS
    assert c["p"] == paired_difference(scores["strong"], scores["lost"])["p"]
    assert len(c["top"]) == 3
    gaps = [abs(t["diff"]) for t in c["top"]]
    rest = [abs(scores["strong"][p] - scores["lost"][p]) for p in scores["strong"]
            if p not in {t["paper_id"] for t in c["top"]}]
    assert gaps == sorted(gaps, reverse=True) and min(gaps) >= max(rest)
    same = compare_pair("lost", "other-paper", scores)
    assert not same["distinguishable"] and "sign-flip" in same["method"]
    assert math.isnan(compare_pair("lost", "nobody", scores)["diff"])

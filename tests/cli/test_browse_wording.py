"""Issue 27, the Browse list's wording: each table says what is true."""

from __future__ import annotations

import pytest

from grebench.cli.bench import _cutoff_words
from grebench.cli.judge import print_panel
from grebench.cli.validate import print_report
from grebench.pipeline import PanelSummary


def test_an_untrusted_import_says_why_its_reviews_count_or_not() -> None:
    untrusted = {"cutoff": None, "declared": {"cutoff": "2024-01-01"}, "cutoff_trusted": False}
    words = _cutoff_words(untrusted)
    assert "none" not in words and "2024-01-01 not trusted" in words
    assert "received before the paper's human reviews were public" in words
    assert _cutoff_words({"cutoff": "2024-01-01", "declared": {}, "cutoff_trusted": True}) == \
        "cutoff 2024-01-01 (trusted)"
    assert _cutoff_words({"cutoff": None, "declared": {}}).startswith("no cutoff: ")


def _panel(rows: list[dict], unjudged: list[dict]) -> PanelSummary:
    return PanelSummary.from_json({
            "venues": ["V"], "qualified": [{"venue_id": "V", "qualified": ["j1"], "examined": 2}],
            "gem_metric": "gem-s", "agreement": [], "unjudged": unjudged,
            "rankings": [{"venue_id": "V", "ci95_low": None, "ci95_high": None, "rank_low": None, "rank_high": None,
                          "gem_score": None, **r} for r in rows]})


def test_the_panel_table_lists_the_empty_control_and_says_reference_rows_are_not_ranked(
        capsys: pytest.CaptureFixture[str]) -> None:
    print_panel(_panel([{"candidate": "human", "strength": 0.1, "rank": 1},
                        {"candidate": "repetition", "strength": 0.9, "rank": None}],
                       [{"venue_id": "V", "candidate": "empty",
                         "reason": "every review is empty: nothing for a judge to compare"}]))
    out = capsys.readouterr().out.splitlines()
    empty = next(line for line in out if " empty " in line)
    assert "not judged: every review is empty" in empty
    assert next(line for line in out if " repetition " in line).lstrip().startswith("ref ")
    assert any(line.startswith("ref: a control") and "never ranked among them" in line for line in out)


def test_validate_says_penalised_not_significant(capsys: pytest.CaptureFixture[str]) -> None:
    row = {"metric": "gem-s", "transformation": "sentence-shuffle", "kind": "degradation", "d": -0.1,
           "ci_low": -0.4, "ci_high": 0.2, "p": 0.4, "n_papers": 12, "verdict": "penalised, not significant",
           "expected": "penalised", "as_expected": False}
    print_report([row], "e", "p")
    line = next(line for line in capsys.readouterr().out.splitlines() if "sentence-shuffle" in line)
    assert "penalised, not significant" in line and "not rewarded" not in line and "NOT AS EXPECTED" in line


def test_the_panel_names_candidates_no_verdict_covers() -> None:
    from datetime import datetime

    from grebench.panel._run import _unjudged
    from grebench.store import open_store
    from tests.site.conftest import fill_store

    store = open_store(None)
    fill_store(store)
    now = datetime(2026, 1, 1)
    store.con.execute("INSERT INTO candidates (name, kind, params_json, updated_at) "
                      "VALUES ('empty', 'control', '{}', ?)", [now])
    for i in range(3):
        store.con.execute("INSERT INTO generations (generation_id, candidate, paper_id, prompt_version, params_json, "
                          "status, text, generated_at, sealed) VALUES (?, 'empty', ?, 'v1', '{}', 'ok', '', ?, false)",
                          [f"g_empty_{i}", f"p2020_{i}", now])
    judged = {"human", "good-llm", "late-llm", "generic"}
    assert _unjudged(store, "ICLR.cc/2020/Conference", judged) == [
        {"venue_id": "ICLR.cc/2020/Conference", "candidate": "empty",
         "reason": "every review is empty: nothing for a judge to compare"}]
    assert [u["candidate"] for u in _unjudged(store, "ICLR.cc/2020/Conference", judged - {"generic"})] == \
        ["empty", "generic"]
    store.close()

"""The headline figure keeps the contestants' scale (a control far outside it is drawn at the edge with its score),
keeps controls out of the contestants' rows, and its alt text gives the ranking in words."""

from __future__ import annotations

from grebench.site._board_plot import board_alt, board_svg

#: The roles the boards stage stores with each row (annotated board rows carry them).
ROLES = {"human": "baseline", "control": "reference"}


def _row(name: str, kind: str, score: float, rank: int | None = None) -> dict:
    return {"candidate": name, "kind": kind, "role": ROLES.get(kind, "contestant"),
            "score": score, "rank": rank, "ci95_low": score - 5,
            "ci95_high": score + 5, "ci90_low": score - 3, "ci90_high": score + 3}


ROWS = [_row("human", "human", 27.0, None), _row("smollm2-135m", "llm", 4.4, 1), _row("generic", "control", 15.0),
        _row("reference-copy", "control", 433.1)]


def test_a_far_control_is_drawn_off_scale_at_the_edge() -> None:
    for layout in ("wide", "narrow"):
        svg = board_svg({"metric": "gem-s", "rows": ROWS, "human_band": {"low": 12.8, "high": 34.7}}, layout)
        assert "reference-copy (433) →" in svg and "generic" in svg
        assert "generic (" not in svg  # a control inside the scale keeps its plain label
    near = board_svg({"metric": "gem-s", "rows": ROWS[:3], "human_band": {"low": 12.8, "high": 34.7}})
    assert "→" not in near


def test_controls_are_ticks_below_not_rows_among_the_contestants() -> None:
    svg = board_svg({"metric": "gem-s", "rows": ROWS, "human_band": None})
    assert "human (reference)" in svg and "1. smollm2-135m" in svg  # the contestants' rows, ranked; the baseline
    assert "controls" in svg and "generic (reference" not in svg


def test_the_alt_text_gives_the_ranking_in_words() -> None:
    board = {"metric": "gem-s", "metric_label": "GEM-S (abstract)", "rows": ROWS}
    assert board_alt(board) == (
        "Ranking by GEM-S (abstract), mean PMI per paper in nats, higher is better: (reference) human (human baseline) "
        "27.00 (95% CI 22.00 to 32.00); 1. smollm2-135m 4.40 (95% CI -0.60 to 9.40). Controls, not ranked: "
        "generic 15.00; reference-copy 433.10.")

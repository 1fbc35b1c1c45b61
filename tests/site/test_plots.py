"""Board plots keep the contestants' scale: a control far outside it is drawn at the edge with its score."""

from __future__ import annotations

from grebench.site._plots import board_svg

#: The roles the boards stage stores with each row (annotated board rows carry them).
ROLES = {"human": "baseline", "control": "reference"}


def _row(name: str, kind: str, score: float, rank: int | None = None) -> dict:
    return {"candidate": name, "kind": kind, "role": ROLES.get(kind, "contestant"),
            "score": score, "rank": rank, "ci95_low": score - 5,
            "ci95_high": score + 5, "ci90_low": score - 3, "ci90_high": score + 3}


def test_a_far_control_is_drawn_off_scale_at_the_edge() -> None:
    rows = [_row("human", "human", 27.0, 1), _row("smollm2-135m", "llm", 4.4, 2), _row("generic", "control", 15.0),
            _row("reference-copy", "control", 433.1)]
    svg = board_svg({"metric": "gem-s", "rows": rows, "human_band": {"low": 12.8, "high": 34.7}})
    assert "reference-copy (433, off scale)" in svg and "generic" in svg
    assert "generic (" not in svg  # a control inside the scale keeps its plain label
    near = board_svg({"metric": "gem-s", "rows": rows[:3], "human_band": {"low": 12.8, "high": 34.7}})
    assert "off scale" not in near

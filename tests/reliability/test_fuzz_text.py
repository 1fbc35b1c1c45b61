"""Property-based fuzzing of the text parsers: archive records and lines, review sections, judgment lines.

Contract checked: no exception except the documented one (``parse_record``: ``ValueError`` with a message;
``ArchiveSource.fetch``: a ``SourceFailure`` per bad line, never an exception), outputs of the documented types,
and determinism (same input, same output). CI: the ``ci`` Hypothesis profile; more: ``--hypothesis-profile=long``.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grebench.bench import parse_review, split_sections
from grebench.ingest._archive import ArchiveSource, bundled_path, parse_record
from grebench.ingest._source import SourceFailure
from grebench.scoring import parse_judgment_output, rules_judgment_lines

pytestmark = pytest.mark.fuzz

with bundled_path().open(encoding="utf-8") as _f:
    REAL_LINES = [next(_f) for _ in range(5)]
REAL_RECORDS = [json.loads(line) for line in REAL_LINES]

json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True),
                      st.text(max_size=40))
json_value = st.recursive(json_leaf, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                               st.dictionaries(st.text(max_size=12), inner,
                                                                               max_size=4)), max_leaves=20)
FIELDS = ["id", "venue_id", "venue", "title", "abstract", "decision", "reviews", "reviews_public_at", "submitted_at",
          "withdrawn", "judgments_preprocessor", "miniconf", "papercopilot", "_meta"]
REVIEW_FIELDS = ["id", "content", "judgments", "kind", "signature", "visible_at", "modified_at",
                 "judgments_preprocessor"]


@st.composite
def mutated_record(draw: st.DrawFn) -> Any:
    """A real bundled record with fields dropped, retyped or replaced (often still almost valid)."""
    record = json.loads(json.dumps(draw(st.sampled_from(REAL_RECORDS))))
    for _ in range(draw(st.integers(0, 4))):
        key = draw(st.sampled_from(FIELDS))
        action = draw(st.sampled_from(["drop", "value", "review"]))
        if action == "drop":
            record.pop(key, None)
        elif action == "value":
            record[key] = draw(json_value)
        elif isinstance(record.get("reviews"), list) and record["reviews"]:
            review = record["reviews"][draw(st.integers(0, len(record["reviews"]) - 1))]
            if isinstance(review, dict):
                rkey = draw(st.sampled_from(REVIEW_FIELDS))
                review[rkey] = draw(st.one_of(json_value, st.dictionaries(
                    st.sampled_from(["review", "summary", "title", "rating", "strengths", "weaknesses"]),
                    st.one_of(st.text(max_size=60), st.dictionaries(st.just("value"), json_value)), max_size=4)))
    return record


@given(st.one_of(mutated_record(), json_value), st.dictionaries(st.sampled_from(
    ["venue_id", "venue", "reviews_public_at", "judgments_preprocessor"]), json_value, max_size=3))
def test_parse_record_accepts_or_explains(record: Any, meta: dict[str, Any]) -> None:
    try:
        paper = parse_record(record, meta, "archive:fuzz")
    except ValueError as exc:
        assert str(exc).strip()
        return
    assert isinstance(paper.paper_id, str) and isinstance(paper.title, str)
    assert all(isinstance(r.text, str) and r.text.strip() for r in paper.reviews)


@given(st.lists(st.one_of(
    st.binary(max_size=200),
    st.sampled_from([line.encode() for line in REAL_LINES]),
    mutated_record().map(lambda r: json.dumps(r).encode()),
    st.sampled_from(REAL_LINES).flatmap(lambda line: st.integers(0, len(line)).map(lambda n: line[:n].encode())),
), max_size=6))
def test_archive_fetch_never_raises_on_bytes(lines: list[bytes]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fuzz.jsonl"
        path.write_bytes(b"\n".join(line.replace(b"\n", b" ") for line in lines) + b"\n")
        items = list(ArchiveSource(path).fetch())
    for item in items:
        if isinstance(item, SourceFailure):
            assert item.item.startswith("fuzz.jsonl:") and item.reason.strip()
        else:
            assert item.paper_id and item.reviews is not None
    assert len(items) <= len(lines)


review_text = st.one_of(
    st.text(max_size=400),
    st.lists(st.one_of(st.sampled_from(["<summary>", "</summary>", "<strengths>", "</strengths>", "<weaknesses>",
                                        "</weaknesses>", "<questions>", "</questions>", "Summary:", "## Strengths",
                                        "**Weaknesses**", "\n", "1. ", "- ", "The reviewer appreciates "]),
                       st.text(max_size=30)), max_size=30).map("".join),
)


@given(review_text)
def test_split_sections_and_parse_review_total(text: str) -> None:
    sections = split_sections(text)
    assert isinstance(sections, list) and all(isinstance(h, str) and isinstance(b, str) for h, b in sections)
    assert split_sections(text) == sections
    parsed = parse_review(text)
    assert parsed.method in ("tags", "headings", "none")
    assert parsed.parse_ok == (not parsed.missing)


judgment_text = st.one_of(
    st.text(max_size=300),
    st.lists(st.one_of(st.sampled_from(["The reviewer appreciates", "the reviewer criticises", "The reviewer "
                                        "questions", "- ", "1. ", "**", "; and the reviewer suggests", "\n",
                                        "Here are the judgment lines:", "```"]),
                       st.text(max_size=25)), max_size=25).map("".join),
)


@given(judgment_text)
def test_judgment_validator_total(text: str) -> None:
    parsed = parse_judgment_output(text)
    assert parsed.ok == (parsed.error is None)
    assert all(isinstance(line, str) and line.lower().startswith("the reviewer ") for line in parsed.lines)
    lines = rules_judgment_lines(text)
    assert isinstance(lines, list) and lines == rules_judgment_lines(text)
    assert all(isinstance(line, str) and line.strip() for line in lines)


@pytest.mark.parametrize(("record_change", "meta", "message"), [
    ({"reviews_public_at": 1e30}, {}, "not a usable epoch timestamp"),        # was OverflowError/OSError
    ({"submitted_at": float("nan")}, {}, "not a usable epoch timestamp"),
    ({"reviews_public_at": "9999-12-31T23:59:59-01:00"}, {}, "not an ISO date"),  # was OverflowError
    ({"venue_id": None}, {"venue_id": 1}, "_meta venue_id must be a string"),  # was TypeError
])
def test_findings_are_clear_errors(record_change: dict[str, Any], meta: dict[str, Any], message: str) -> None:
    """Regression tests for what the long fuzz run found: these crashed the whole ingest before the fix."""
    record = {**json.loads(json.dumps(REAL_RECORDS[0])), **record_change}
    if record.get("venue_id") is None:
        record.pop("venue_id")
    with pytest.raises(ValueError, match=message):
        parse_record(record, meta, "archive:fuzz")

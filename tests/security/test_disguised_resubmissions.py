"""Issue 62 §3: a disguised resubmission (title and abstract rewritten strongly) must not open the sealed path.

The store holds ``rklp93EtwH`` (bundled ICLR 2020, reviews public 2019-11-08) with an extracted text, and a disguised
resubmission of it at an ICLR 2026-style venue (reviews not public, announced for 2099): a new title, an abstract
written anew, and the earlier text's body, captions and references, lightly edited (``tests.fakes.paper_texts``).
Before issue 62 title and abstract decided: "0 new links", so the resubmission's imported reviews were sealed and a
copy of the first round's reviews passed.  Everything goes through the real CLI (`grebench ingest`, `grebench
links`, `grebench bench import`).
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from click.testing import CliRunner, Result

from grebench.cli._main import main
from grebench.ingest import bundled_path
from grebench.settings import Settings
from grebench.store import open_store, public_since
from tests.fakes.openai_server import DEFAULT_REVIEW
from tests.fakes.paper_texts import disguised, paper_text

EARLIER, RESUB = "rklp93EtwH", "DisguisedARML26"
EARLIER_PUBLIC = datetime(2019, 11, 8)
NEW_TITLE = "Graph-Structured Priors Over Episodes for Few-Shot Adaptation"
NEW_ABSTRACT = ("Few-shot problems drawn from different domains call for different inductive biases. We keep a "
                "library of prototypes summarising earlier episodes, connect them by learned affinities, and let each "
                "incoming episode query this library to condition its initial parameters. Experiments on image "
                "classification suites show consistent gains and an interpretable picture of which episodes help.")


def _cli(settings: Settings, *args: str) -> Result:
    return CliRunner().invoke(main, list(args), env={"GREBENCH_DATA_DIR": str(settings.data_path)},
                              catch_exceptions=False)


def _earlier_reviews() -> list[str]:
    record = json.loads(bundled_path("iclr2020").read_text(encoding="utf-8").split("\n")[0])
    return [r["content"]["review"] for r in record["reviews"]]


def _store_texts(settings: Settings, texts: dict[str, str]) -> None:
    store = open_store(settings.db_path)
    try:
        for pid, text in texts.items():
            store.con.execute("INSERT OR REPLACE INTO paper_texts (paper_id, pdf_ref, text, status, extracted_at) "
                              "VALUES (?, ?, ?, 'ok', ?)", [pid, f"test:{pid}", text, datetime(2026, 1, 1)])
    finally:
        store.close()


def _setup(settings: Settings, tmp_path: Path, resubmission_text: str) -> Result:
    """Both papers ingested, their texts extracted, the links recomputed; the `grebench links` result."""
    assert _cli(settings, "ingest", "--source", "bundled:iclr2020", "--limit", "1").exit_code == 0
    archive = tmp_path / "disguised.jsonl"
    archive.write_text(json.dumps({"id": RESUB, "venue": "ICLR 2026", "venue_id": "ICLR.cc/2026/Conference",
                                   "title": NEW_TITLE, "abstract": NEW_ABSTRACT, "reviews_public_at": "2099-11-12",
                                   "reviews": []}) + "\n", encoding="utf-8")
    ingested = _cli(settings, "ingest", "--source", f"archive:{archive}", "--json")
    assert ingested.exit_code == 0, ingested.output
    assert json.loads(ingested.stdout)["links"]["by_method"] == {}  # title and abstract alone: not linked
    _store_texts(settings, {EARLIER: paper_text(1), RESUB: resubmission_text})
    linked = _cli(settings, "links", "--json")
    assert linked.exit_code == 0, linked.output
    return linked


def _import(settings: Settings, tmp_path: Path, name: str, lines: list[dict[str, str]], *extra: str) -> Result:
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return _cli(settings, "bench", "import", "--candidate", name, str(path), "--json", *extra)


def _sealed(settings: Settings, name: str) -> list[bool]:
    store = open_store(settings.db_path)
    try:
        return [r["sealed"] for r in store.rows("SELECT sealed FROM generations WHERE candidate = ?", [name])]
    finally:
        store.close()


HONEST = [{"paper_id": RESUB, "review": DEFAULT_REVIEW, "generated_at": "2025-10-01T00:00:00Z"}]


def test_a_disguised_resubmission_is_linked_by_its_text_and_its_earlier_reviews_are_not_sealed(
        settings: Settings, tmp_path: Path) -> None:
    """Title, abstract and introduction rewritten, the rest of the body kept (a fifth of the paragraphs dropped,
    lines wrapped anew): the first pages no longer match (issue 48's rule: cosine 0.37 < 0.75), the body's
    fingerprint does.  Linked, dated by the earlier version, a copy of the first round's review refused, an honest
    review made after 2019-11-08 not sealed."""
    linked = _setup(settings, tmp_path, disguised(paper_text(1), seed=3, new_opening=True))
    result = json.loads(linked.stdout)
    [link] = result["list"]
    assert {link["paper_id"], link["linked_id"]} == {EARLIER, RESUB} and link["method"] == "text:body"
    store = open_store(settings.db_path)
    try:
        assert public_since(store)[RESUB] == EARLIER_PUBLIC
    finally:
        store.close()
    copied = _import(settings, tmp_path, "Copier", [{"paper_id": RESUB, "review": _earlier_reviews()[0]}])
    assert copied.exit_code == 1 and "copies its public reviews" in copied.output, copied.output
    honest = _import(settings, tmp_path, "Honest", HONEST, "--trust-cutoff")
    assert honest.exit_code == 0, honest.output
    assert json.loads(honest.stdout)["sealed"] == 0 and _sealed(settings, "Honest") == [False]


def test_a_possible_resubmission_is_flagged_not_sealed_until_decided_and_the_operator_sees_why(
        settings: Settings, tmp_path: Path) -> None:
    """A new body with 45 % of the earlier reference list: not enough to link, enough to flag.  Until the operator
    decides, the flag counts as a link: not sealed, the copy check reads the earlier reviews, and the import, the
    flag list and the paper page say why.  Decided distinct, the honest review is sealed again."""
    refs = paper_text(1).split("REFERENCES\n\n")[1].split("\n\n")[0].split("\n")
    body = paper_text(7).split("REFERENCES")[0]
    linked = _setup(settings, tmp_path, body + "REFERENCES\n\n" + "\n".join(r for i, r in enumerate(refs)
                                                                             if i % 20 < 9))
    result = json.loads(linked.stdout)
    assert result["list"] == [] and result["flagged"] == 1 and result["flagged_undecided"] == 1, result
    [flag] = result["flags"]
    assert {flag["paper_id"], flag["linked_id"]} == {EARLIER, RESUB} and flag["decision"] is None
    assert flag["reason"].startswith("references text Jaccard 0.")
    listed = _cli(settings, "links", "--flags")
    assert "UNDECIDED: not sealed" in listed.output and "references text Jaccard" in listed.output, listed.output

    copied = _import(settings, tmp_path, "Copier", [{"paper_id": RESUB, "review": _earlier_reviews()[0]}])
    assert copied.exit_code == 1 and "copies its public reviews" in copied.output, copied.output
    honest = _import(settings, tmp_path, "Honest", HONEST, "--trust-cutoff")
    assert honest.exit_code == 0, honest.output
    summary = json.loads(honest.stdout)
    assert summary["sealed"] == 0 and _sealed(settings, "Honest") == [False]
    [reason] = summary["held_unsealed"][RESUB]
    assert reason.startswith(f"possible other version {EARLIER} (ICLR 2020), undecided: references text Jaccard")
    assert any("not sealed until the operator decides" in w for w in summary["warnings"])

    from grebench.site._data import paper_pages, version_line

    store = open_store(settings.db_path)
    try:
        [version] = paper_pages(store, [RESUB])[RESUB]["versions"]
    finally:
        store.close()
    assert version_line(version).startswith("possible earlier version: ICLR 2020 Automated Relational")
    assert "not counted as sealed: references text Jaccard" in version_line(version)

    decided = _cli(settings, "links", "--decide", RESUB, EARLIER, "distinct", "--note", "different works")
    assert decided.exit_code == 0 and "distinct" in decided.output, decided.output
    assert _sealed(settings, "Honest") == [True]  # sealed again: its paper's reviews were not public in 2025
    again = _cli(settings, "links", "--json")  # a recomputation keeps the decision
    assert json.loads(again.stdout)["flagged_undecided"] == 0 and _sealed(settings, "Honest") == [True]

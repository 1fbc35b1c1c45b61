"""Versions of the same work: the similarity rule, explicit links from archives and OpenReview, transitivity,
recomputation (`grebench links`), and reruns that write nothing."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from click.testing import CliRunner

from grebench.cli._main import main
from grebench.ingest._openreview_notes import previous_versions
from grebench.ingest._similarity import KeywordRarity, PaperText, match
from grebench.settings import Settings
from grebench.store import open_store, public_since

ABSTRACT = ("We study sparse attention for long documents and show that a learned routing of tokens to a few "
            "memory slots keeps accuracy while cutting the cost of attention from quadratic to linear in the "
            "length of the input, on summarisation and question answering benchmarks.")


def test_the_rule_links_revised_versions_and_not_neighbours() -> None:
    a = PaperText("a", "Routing Tokens to Memory Slots for Long Documents", ABSTRACT)
    retitled = PaperText("b", "Linear-Cost Attention by Learned Routing", ABSTRACT + " Code is released.")
    edited = PaperText("c", "Routing Tokens to Memory Slots for Long Document Modelling",
                       ABSTRACT.replace("we study", "this work studies") + " We add an analysis of slot usage.")
    same_title = PaperText("d", "routing tokens to memory slots, for long documents!", None)
    neighbour = PaperText("e", "Routing Tokens to Experts for Long Videos",
                          "We route video frames to experts in a mixture and show faster training on action "
                          "recognition, with a load-balancing loss and a study of expert specialisation.")
    assert match(a, retitled) is not None and match(a, retitled).method == "abstract"  # type: ignore[union-attr]
    assert match(a, edited) is not None
    assert match(a, same_title) is not None and match(a, same_title).method == "title"  # type: ignore[union-attr]
    assert match(a, neighbour) is None


REWRITTEN = ("Attention over long inputs costs time quadratic in their length. We send each token to one of a few "
             "learned memory slots, so the cost grows linearly, and accuracy holds on document summarisation and "
             "on question answering.")
BODY = ("1 Introduction. Transformers read long documents slowly because every token attends to every other. "
        "We propose slot routing: a small router assigns each token to a memory slot, and attention runs within "
        "slots and between slot summaries. Our contributions are a differentiable router with a balance loss, an "
        "analysis of slot usage, and experiments on arXiv summarisation and NarrativeQA.")


def test_a_retitled_paper_with_a_rewritten_abstract_is_linked_by_its_text_authors_or_rare_keywords() -> None:
    """Issue 48: a new title and a rewritten abstract (half the content words kept) are one work when the first
    pages, two authors or rare keywords say so; the same abstract similarity alone, or common keywords, is not."""
    a = PaperText("a", "Routing Tokens to Memory Slots for Long Documents", ABSTRACT, "Ada Lovelace|Alan Turing",
                  "sparse attention; memory slots; routing", BODY)
    rarity = KeywordRarity(400, {"sparse": 3, "attention": 30, "memory": 9, "slot": 1, "routing": 2, "learning": 199,
                                 "deep": 60, "transformer": 40})
    plain = PaperText("b", "Linear Attention by Learned Slot Assignment", REWRITTEN)
    assert match(a, plain, rarity) is None  # title and abstract alone do not decide
    half = BODY.split(". ")
    rewritten_body = f"{half[1]}. A balance loss keeps the router fair, and experiments use NarrativeQA"  # cos 0.56
    for kwargs, method in [({"body": rewritten_body}, "abstract+text"),
                           ({"authors": "Alan Turing | Ada  Lovelace|Grace Hopper"}, "abstract+authors"),
                           ({"keywords": "memory slots, token routing, sparse attention"}, "abstract+keywords")]:
        found = match(a, PaperText("b", plain.title, REWRITTEN, **kwargs), rarity)  # type: ignore[arg-type]
        assert found is not None and found.method == method, (kwargs, found)
    common = PaperText("b", plain.title, REWRITTEN, keywords="deep learning; transformer; attention")
    assert match(a, common, rarity) is None  # common keyword words do not vouch
    one_author = PaperText("b", plain.title, REWRITTEN, authors="Alan Turing")
    assert match(a, one_author, rarity) is None
    body_only = PaperText("b", "Something Else Entirely", "A different abstract about other things.", body=BODY)
    found = match(a, body_only, rarity)
    assert found is not None and found.method == "text"


def test_openreview_previous_submission_fields_give_explicit_links() -> None:
    content = {"title": {"value": "T"}, "previous_TMLR_submission_url": {
        "value": "https://openreview.net/forum?id=Abc123_-x&noteId=zzz"}, "changes_since_last_submission": "x"}
    assert previous_versions(content, "self") == ("Abc123_-x",)
    assert previous_versions({"title": "T", "abstract": "forum?id=notalink"}, "self") == ()


def _archive(tmp_path: Path, records: list[dict[str, object]]) -> Path:
    path = tmp_path / "a.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _paper(pid: str, title: str, public: str | None, **extra: object) -> dict[str, object]:
    review = {"id": f"{pid}-r1", "content": {"review": f"A review of {title}."}}
    return {"id": pid, "venue_id": f"Venue.cc/{pid}/Conference", "title": title, "abstract": None,
            "reviews_public_at": public, "reviews": [review] if public else [], **extra}


def test_archive_previous_versions_link_transitively_and_a_rerun_writes_nothing(settings: Settings,
                                                                                 tmp_path: Path) -> None:
    env = {"GREBENCH_DATA_DIR": str(settings.data_path)}
    records = [_paper("v2019", "First title", "2019-05-01"),
               _paper("v2021", "A second title", "2021-05-01", previous_versions=["v2019"]),
               _paper("v2023", "Third, unrelated-looking title", None, previous_versions=["v2021", "v2023"])]
    path = _archive(tmp_path, records)
    first = CliRunner().invoke(main, ["ingest", "--source", f"archive:{path}", "--json"], env=env)
    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout)["links"]["by_method"] == {"explicit": 2}
    again = CliRunner().invoke(main, ["ingest", "--source", f"archive:{path}", "--json"], env=env)
    assert json.loads(again.stdout)["links"]["links"] == 0
    relinked = CliRunner().invoke(main, ["links", "--json"], env=env)  # recomputation keeps explicit links
    assert relinked.exit_code == 0 and json.loads(relinked.stdout)["links_total"] == 2, relinked.output
    store = open_store(settings.db_path)
    try:
        assert public_since(store) == {"v2019": datetime(2019, 5, 1), "v2021": datetime(2019, 5, 1),
                                       "v2023": datetime(2019, 5, 1)}
    finally:
        store.close()


def test_a_bad_previous_versions_field_refuses_the_line_with_its_reason(settings: Settings, tmp_path: Path) -> None:
    env = {"GREBENCH_DATA_DIR": str(settings.data_path)}
    path = _archive(tmp_path, [_paper("bad", "T", None, previous_versions="v2019"),
                               _paper("good", "U", None, previous_versions=["x"])])
    result = CliRunner().invoke(main, ["ingest", "--source", f"archive:{path}", "--json"], env=env)
    assert result.exit_code == 1
    out = json.loads(result.stdout)
    assert out["papers_added"] == 1 and "previous_versions" in out["failures"][0]["reason"], out
    unknown = CliRunner().invoke(main, ["links", "--paper", "nope"], env=env)
    assert unknown.exit_code == 2 and "unknown paper id" in unknown.output


def test_papers_left_unlinked_by_a_stopped_run_are_linked_by_the_next_ingest(settings: Settings,
                                                                              tmp_path: Path) -> None:
    env = {"GREBENCH_DATA_DIR": str(settings.data_path)}
    path = _archive(tmp_path, [_paper("old", "Sparse Routing of Tokens to Memory Slots", "2019-05-01"),
                               _paper("new", "Sparse routing of tokens to memory slots", None)])
    assert CliRunner().invoke(main, ["ingest", "--source", f"archive:{path}"], env=env).exit_code == 0
    store = open_store(settings.db_path)
    try:  # what a run killed after writing its papers and before linking them leaves
        store.con.execute("DELETE FROM paper_links")
        store.con.execute("DELETE FROM paper_link_checks")
    finally:
        store.close()
    again = CliRunner().invoke(main, ["ingest", "--source", f"archive:{path}", "--json"], env=env)
    out = json.loads(again.stdout)
    assert out["papers_added"] == 0 and out["links"]["by_method"] == {"title": 1}, out

"""Issue 62 §3, second bullet: possible links by the evaluation LM's view of the abstracts, with a bar calibrated on
distinct papers of one venue.

A resubmission of ``rklp93EtwH`` (bundled ICLR 2020, reviews public 2019-11-08) whose title and abstract a person
rewrote (a new title; synonyms, sentences merged, dropped and reordered, the method's terms kept: content-word cosine
0.65, under the 0.75 a new title needs; no PDF, no authors, no keywords) is linked by nothing else; the offline
evaluation LM reads it as the same work, above what any pair of distinct ICLR 2020 or ICLR 2026 papers the candidate
index proposes reaches, so it is flagged: its reviews are not sealed until the operator decides.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from grebench.cli._main import main
from grebench.ingest import PaperText, resolve_source, run_ingest
from grebench.ingest._abstract_view import BAR_MARGIN, MIN_CALIBRATION_PAIRS, abstract_flags, venue_bar
from grebench.ingest._evidence import Evidence
from grebench.ingest._links import link_papers
from grebench.ingest._similarity import ABSTRACT_ALONE, _cosine, content_words, title_similarity
from grebench.scoring import EstimatorHandle, LMAbstractReader
from grebench.settings import Settings
from grebench.store import Store, public_since

EARLIER, RESUB = "rklp93EtwH", "RewrittenARML26"
TITLE = "Graphs of Prior Experience for Adapting to Dissimilar Problems"
ABSTRACT = ("Tasks met by a meta-learner are heterogeneous, and neither one globally shared initialisation nor "
            "hand-crafted task-specific structure captures how they relate. Inspired by knowledge bases, we introduce "
            "automated relational meta-learning (ARML): it derives cross-task relations without supervision and "
            "builds a meta-knowledge graph, from which an incoming task retrieves the most pertinent structure to "
            "adapt the meta-learner. Evaluations on 2D toy regression and few-shot image classification confirm that "
            "ARML beats prior competitors.")


class _Fixed:
    """A reader whose statistics are given: the rule around the LM, not the LM."""

    label = "fixed"

    def __init__(self, values: Sequence[float]) -> None:
        self.values = list(values)

    def information(self, pairs: Sequence[tuple[PaperText, PaperText]]) -> list[float]:
        assert len(pairs) == len(self.values)
        return self.values


def test_the_bar_is_a_conformal_quantile_of_distinct_pairs_with_a_margin_and_needs_a_calibrated_venue() -> None:
    assert venue_bar("V", [0.1] * (MIN_CALIBRATION_PAIRS - 1)) is None
    small = venue_bar("V", [i / 1000 for i in range(200)])  # under 999 pairs: the largest
    assert small is not None and small.bar == pytest.approx(0.199 * BAR_MARGIN) and small.pairs == 200
    many = venue_bar("V", [i / 10000 for i in range(5000)])  # the ceil(5001 * 0.999) = 4996th of 5000
    assert many is not None and many.bar == pytest.approx(0.4995 * BAR_MARGIN) and many.highest == 0.4999
    paper = {x: PaperText(x, x, "words") for x in ("a", "b", "c", "d")}
    calibration = {"V": [(paper["a"], paper["b"])] * 200}
    e = Evidence(0.1, 0.2)
    pending = [(paper["a"], paper["c"], e), (paper["b"], paper["c"], e), (paper["c"], paper["d"], e)]
    values = [i / 1000 for i in range(200)] + [0.3, 0.2, 0.9]
    flags, report = abstract_flags(_Fixed(values), pending, calibration, {"a": "V", "b": "V", "c": "W", "d": "W"})
    assert [(f.paper_id, f.linked_id) for f in flags] == [("a", "c")]  # 0.2 is under 0.219; W has no bar: unread
    assert "0.300" in flags[0].reason and "200 pairs of distinct V papers" in flags[0].reason
    assert flags[0].evidence["lm_abstracts"] == 0.3
    assert report["not_calibrated"] == 1 and report["pairs_read"] == 2 and report["flagged"] == 1


@pytest.fixture(scope="module")
def bundled_store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """Both bundled samples and the rewritten resubmission (no PDF, under review), linked without the LM view."""
    from grebench.settings import load_settings
    from grebench.store import open_store

    settings = load_settings(env={"GREBENCH_DATA_DIR": str(tmp_path_factory.mktemp("data"))})
    store = open_store(None)
    archive = tmp_path_factory.mktemp("archive") / "rewritten.jsonl"
    archive.write_text(json.dumps({"id": RESUB, "venue": "ICLR 2026", "venue_id": "ICLR.cc/2026/Conference",
                                   "title": TITLE, "abstract": ABSTRACT, "reviews": []}) + "\n", encoding="utf-8")
    for spec in ("bundled:iclr2020", "bundled:iclr2026", f"archive:{archive}"):
        run_ingest(resolve_source(spec, settings), store, settings, store.start_run("ingest", {}))
    return store


def test_a_rewritten_resubmission_without_a_pdf_is_flagged_by_the_lm_view_and_distinct_papers_are_not(
        bundled_store: Store, settings: Settings) -> None:
    store = bundled_store
    earlier = store.rows("SELECT title, abstract FROM papers WHERE paper_id = ?", [EARLIER])[0]
    # a disguise the word-level rule cannot see: a new title, an abstract under the bar of a retitled one
    assert title_similarity(earlier["title"], TITLE) < 0.5
    assert _cosine(Counter(content_words(earlier["abstract"])), Counter(content_words(ABSTRACT))) < ABSTRACT_ALONE
    without = link_papers(store, None)
    assert without["links_total"] == 0 and without["flagged"] == 0 and "abstracts" not in without
    assert public_since(store, [RESUB])[RESUB] is None  # before: its reviews would count as sealed

    counts = link_papers(store, None, abstracts=LMAbstractReader(store, EstimatorHandle("offline", settings)))
    flags = store.rows("SELECT paper_id, linked_id, reason, evidence_json FROM paper_link_flags")
    # the one true pair, and not one of the ~1,000 candidate pairs of distinct ICLR 2020 and ICLR 2026 papers
    assert [(f["paper_id"], f["linked_id"]) for f in flags] == [tuple(sorted((EARLIER, RESUB)))], flags
    assert counts["links_total"] == 0 and counts["flagged"] == 1
    report = counts["abstracts"]
    assert report["pairs_read"] > 500 and set(report["bars"]) == {"ICLR 2020", "ICLR 2026"}
    evidence = json.loads(flags[0]["evidence_json"])
    assert evidence["lm_abstracts"] > evidence["lm_bar"] >= report["bars"]["ICLR 2020"]["bar"]
    assert "evaluation LM (offline word model (fast proxy)) reads the abstracts as the same work" in flags[0]["reason"]
    assert public_since(store, [RESUB])[RESUB] == datetime(2019, 11, 8)  # held unsealed until decided


def test_grebench_links_reads_the_abstracts_with_the_link_estimator_setting(settings: Settings,
                                                                           tmp_path: Path) -> None:
    """Through the CLI: the default ``link_estimator`` (offline) flags the pair; set empty, nothing does."""
    from tests.fakes.abstracts import disguised

    def cli(*args: str, **env: str) -> dict[str, object]:
        result = CliRunner().invoke(main, [*args], env={"GREBENCH_DATA_DIR": str(settings.data_path), **env},
                                    catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout) if "--json" in args else {}

    records = [json.loads(line) for line in (Path(__file__).parents[2] / "grebench" / "ingest" / "data" /
                                              "iclr2020_reviews.jsonl").read_text(encoding="utf-8").split("\n")
               if line.strip()]
    _, abstract = disguised(records[0]["title"], records[0]["abstract"], random.Random(3))  # a thesaurus's words
    archive = tmp_path / "resubmission.jsonl"
    archive.write_text(json.dumps({"id": RESUB, "venue": "ICLR 2026", "venue_id": "ICLR.cc/2026/Conference",
                                   "title": TITLE, "abstract": abstract, "reviews": []}) + "\n", encoding="utf-8")
    cli("ingest", "--source", "bundled:iclr2020", GREBENCH_LINK_ESTIMATOR="")
    off = cli("ingest", "--source", f"archive:{archive}", "--json", GREBENCH_LINK_ESTIMATOR="")
    assert off["links"]["flagged"] == 0  # type: ignore[index]
    on = cli("links", "--paper", RESUB, "--json")
    assert on["flagged"] == 1 and on["abstracts"]["bars"]["ICLR 2020"]["pairs"] >= MIN_CALIBRATION_PAIRS, on
    assert [(f["paper_id"], f["linked_id"]) for f in on["flags"]] == [tuple(sorted((EARLIER, RESUB)))]  # type: ignore[union-attr]

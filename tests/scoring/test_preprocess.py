"""Preprocessing: the rules fallback on real bundled reviews, the line validator, caching, the LLM preprocessor."""

from __future__ import annotations

import re

import pytest

from grebench.scoring import (
    PHRASES,
    parse_judgment_output,
    preprocess_texts,
    resolve_preprocessor,
    rules_judgment_lines,
)
from grebench.scoring._rules import RULES_ID, classify_heading, is_meta
from grebench.settings import Settings
from grebench.store import Store


def _review_texts(store: Store) -> list[str]:
    return [r["text"] for r in store.rows("SELECT text FROM review_versions ORDER BY review_id, version")]


def _starts_ok(line: str) -> bool:
    return any(line.startswith(p + " ") for p in PHRASES)


def test_rules_on_bundled_reviews(bundled_store: Store) -> None:
    texts = _review_texts(bundled_store)
    outputs = [rules_judgment_lines(t) for t in texts[:300]]
    assert all(_starts_ok(line) for lines in outputs for line in lines)
    assert sum(1 for lines in outputs if lines) >= 295
    assert max(len(line.split()) for lines in outputs for line in lines) <= 36  # capped length
    joined = "\n".join(line for lines in outputs for line in lines)
    assert not re.search(r"\$|\\cite|https?://|\[\d+\]", joined)  # math, citations, URLs stripped
    assert outputs == [rules_judgment_lines(t) for t in texts[:300]]  # deterministic


def test_rules_follow_section_headings_in_real_reviews(bundled_store: Store) -> None:
    texts = [t for t in _review_texts(bundled_store)
             if re.search(r"^\s*(Strengths|Pros)\s*:?\s*$", t, re.M | re.I)
             and re.search(r"^\s*(Weaknesses|Cons)\s*:?\s*$", t, re.M | re.I)]
    assert len(texts) >= 10
    for text in texts[:10]:
        lines = rules_judgment_lines(text)
        verbs = {line.split()[2] for line in lines}
        assert {"appreciates", "criticizes"} <= verbs, text[:200]


def test_rules_on_constructed_review() -> None:
    review = ("Summary:\nThe paper proposes a new optimizer for transformers. The authors present experiments on "
              "three datasets.\n\nStrengths:\n1. The idea is simple (see Eq. 3) and effective.\n\nWeaknesses:\n"
              "- Results in Table 2 show only 0.3% gains [12].\n\nQuestions:\nHow sensitive is the method to the "
              "learning rate?\n\nMinor comments:\nThe related work section could be expanded.\n\n"
              "Additionally, I wonder whether the analysis extends to other architectures?")
    lines = rules_judgment_lines(review, drop_content_free=False)
    assert lines == [
        "The reviewer appreciates that the idea is simple and effective.",
        "The reviewer criticizes that results in Table show only gains.",
        "The reviewer questions how sensitive is the method to the learning rate.",
        "The reviewer suggests that the related work section could be expanded.",
        "The reviewer suggests that I wonder whether the analysis extends to other architectures.",
    ]
    assert not any("proposes a new optimizer" in x or "present experiments" in x for x in lines)  # summary dropped
    assert any(x.startswith("The reviewer questions how sensitive") for x in lines)
    assert any(x.startswith("The reviewer appreciates that the idea is simple") for x in lines)
    assert not any(re.search(r"\d|\[|\(", x) for x in lines)


def test_rules_cues_without_sections() -> None:
    lines = rules_judgment_lines("This work introduces a graph model. Why is the bound tight? The authors should "
                                 "add a baseline. The presentation is unclear in places. The method is novel.",
                                 drop_content_free=False)
    assert [line.split()[2] for line in lines] == ["questions", "suggests", "criticizes", "appreciates"]


def test_rules_keep_only_the_reviewers_judgments() -> None:
    """Reported speech, quotations of the authors, summary sections and meta-commentary carry no judgment."""
    review = ("Summary:\nThis paper proposes X. The results are strong. I recommend acceptance because the idea is "
              "neat.\n\nAccording to the paper, the method is faster than all baselines. The authors claim that the "
              "bound is tight, but the proof has a gap.\nThe authors' claims, as stated in the abstract, are: the "
              "model is fast. It is also small.\nBelow I list my main concerns.\nThe evaluation is weak: we show "
              "that our model beats everything.\nThe experiments are\nlimited to small datasets.\n\nStrengths:\n"
              "1. According to the paper: Our model is robust to noise.\n2. The writing is clear.")
    assert rules_judgment_lines(review, drop_content_free=False) == [
        "The reviewer appreciates that I recommend acceptance because the idea is neat.",  # reviewer's own voice
        "The reviewer criticizes that the proof has a gap.",  # what follows the contrast after reported speech
        "The reviewer criticizes that the evaluation is weak.",  # the quotation after the colon is cut
        "The reviewer criticizes that the experiments are limited to small datasets.",  # hard-wrapped line joined
        "The reviewer appreciates that the writing is clear.",
    ]


def test_meta_commentary() -> None:
    assert is_meta("In this part of the review I set out my assessment of the submission as I understood it.")
    assert is_meta("Below I list my main concerns.") and is_meta("My comments are as follows.")
    assert is_meta("To restate in one line: the points here are what I count in favour of the paper.")
    assert not is_meta("Below I list my concerns: the experiments are weak.")  # a cue outside the meta part
    assert not is_meta("The review of related work is incomplete.")
    assert not is_meta("The method is novel.")


def test_content_free_sentences_change_nothing_on_real_reviews(bundled_store: Store) -> None:
    """Prepending meta-commentary to every paragraph of a real review leaves its judgment lines unchanged."""
    texts = [t for t in _review_texts(bundled_store) if len(t) > 400][:80]
    intros = ["Below I set out my comments on this part of the submission.",
              "In this section of my review I summarise my assessment."]
    changed = 0
    for i, text in enumerate(texts):
        paragraphs = text.split("\n\n")
        padded = "\n\n".join(f"{intros[i % 2]}\n{p}" if p.strip() else p for p in paragraphs)
        changed += rules_judgment_lines(padded) != rules_judgment_lines(text)
    assert changed == 0


def test_classify_heading() -> None:
    assert classify_heading("Pros") == "appreciates"
    assert classify_heading("Weaknesses") == "criticizes"
    assert classify_heading("Questions for the authors") == "questions"
    assert classify_heading("Minor comments") == "suggests"
    assert classify_heading("Paper summary") == "describe"
    assert classify_heading("Experiments") is None


def test_validator_repairs_and_rejects() -> None:
    parsed = parse_judgment_output(
        "Here are the judgments:\n1. **The reviewer appreciates the clear writing.**\n"
        "- the reviewer criticises the weak baselines, and The reviewer suggests more ablations.\n"
        "\"The reviewer questions the choice of the loss.\"\n")
    assert parsed.ok and parsed.lines == [
        "The reviewer appreciates the clear writing.", "The reviewer criticizes the weak baselines",
        "The reviewer suggests more ablations.", "The reviewer questions the choice of the loss."]
    bad = parse_judgment_output("The reviewer appreciates the idea.\nThe paper is fine but the results are weak.")
    assert not bad.ok and "does not start with a judgment phrase" in (bad.error or "")
    assert parse_judgment_output("").error == "no judgment lines in the output"


def test_preprocess_cache_by_text_hash(store: Store, settings: Settings) -> None:
    rules = resolve_preprocessor("rules", settings, store)
    texts = ["The method is novel. Why this loss?", "The results are weak."]
    first = preprocess_texts(store, rules, texts)
    assert store.scalar("SELECT count(*) FROM judgments WHERE preprocessor = ?", [RULES_ID]) == 2
    store.con.execute("UPDATE judgments SET lines_json = '[\"The reviewer suggests cached.\"]'")
    counted: list[int] = []
    second = preprocess_texts(store, rules, texts, counted.append)
    assert all(j.lines == ("The reviewer suggests cached.",) for j in second.values())
    assert sum(counted) == len(texts)  # cached texts count as done: the progress line ends at 100 %
    assert all(j.status == "ok" for j in first.values())


def test_unknown_preprocessor_is_refused(store: Store, settings: Settings) -> None:
    with pytest.raises(ValueError, match="unknown preprocessor"):
        resolve_preprocessor("gpt", settings, store)
    with pytest.raises(ValueError, match="no review in the store has imported judgment lines"):
        resolve_preprocessor("imported", settings, store)


def test_llm_preprocessor_against_a_fake_openai_server(store: Store, settings: Settings,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.fakes.openai_server import FakeOpenAIServer

    monkeypatch.setattr("grebench.llm._client._sleep", lambda _s: None)

    def reply(messages: list[dict]) -> str:
        review = messages[-1]["content"]
        if "garbage" in review:
            return "I cannot do this task."
        return "Sure, here they are:\n- The reviewer appreciates the novelty.\n2) the reviewer questions the loss"

    with FakeOpenAIServer(reply=reply) as server:
        s = settings.replace(scoring_llm_api_base=server.url, llm_max_retries=0, llm_timeout_s=10)
        prep = resolve_preprocessor("litellm:openai/fake-model", s, store)
        assert prep.id == "litellm:openai/fake-model@preprocess-v2"
        out = preprocess_texts(store, prep, ["A good review.", "garbage review"])
        n_requests = len(server.requests)
        again = preprocess_texts(store, prep, ["A good review."])
    good, bad = out.values()
    assert good.status == "ok" and good.lines == ("The reviewer appreciates the novelty.",
                                                  "The reviewer questions the loss")
    assert bad.status == "rejected" and "does not start with a judgment phrase" in (bad.error or "")
    assert n_requests == 2 and next(iter(again.values())).lines == good.lines
    rows = store.rows("SELECT status, error FROM judgments ORDER BY status")
    assert [r["status"] for r in rows] == ["ok", "rejected"]


ICLR_2023_REVIEW = """Summary Of The Paper:
This paper proposes a graph network that learns message functions. The authors evaluate it on molecule datasets.

Strength And Weaknesses:
The idea is interesting and clearly motivated. However, the ablation on the message functions is missing.

Clarity, Quality, Novelty And Reproducibility:
The writing is mostly clear, but the code is not released, which hurts reproducibility.

Summary Of The Review:
A promising idea whose experiments are not convincing yet; I lean towards rejection.
"""


def test_review_form_headings_of_newer_venues_keep_the_paper_summary_out() -> None:
    """ICLR 2023 form: the paper summary gives no line; the judgment sections (no fixed polarity) all do."""
    from grebench.scoring._rules import classify_heading, rules_judgment_lines

    lines = rules_judgment_lines(ICLR_2023_REVIEW, drop_content_free=False)
    text = " ".join(lines).lower()
    assert "message functions. the authors" not in text and "proposes a graph network" not in text
    assert "evaluate it on molecule" not in text
    assert any("ablation" in line and "criticizes" in line for line in lines)
    assert any("idea is interesting" in line and "appreciates" in line for line in lines)
    assert any("code is not released" in line for line in lines)
    assert any("rejection" in line and "criticizes" in line for line in lines)
    for heading, kind in [("Summary Of The Paper", "describe"), ("Summary and contributions", "describe"),
                          ("Strengths And Weaknesses", "neutral"), ("Main Review", "neutral"),
                          ("Summary Of The Review", "neutral"), ("Requested changes", "suggests"),
                          ("Flag For Ethics Review", "skip"), ("Weaknesses", "criticizes"),
                          ("Questions", "questions")]:
        assert classify_heading(heading) == kind, heading


def test_lines_of_generic_review_vocabulary_only_are_dropped() -> None:
    """rules-v5: a line every review of every paper could contain carries no information about this paper; a line
    with one word outside the generic review vocabulary (measured on real reviews, not on any known text) stays."""
    from grebench.scoring._vocabulary import generic_vocabulary, is_content_free

    generic = "Strengths:\nThe paper is well written and easy to follow.\nWeaknesses:\nThe experiments are limited."
    assert rules_judgment_lines(generic, drop_content_free=False) and rules_judgment_lines(generic) == []
    specific = "Weaknesses:\nThe Omniglot experiments are limited.\nThe experiments are limited."
    assert rules_judgment_lines(specific) == ["The reviewer criticizes that the Omniglot experiments are limited."]
    assert {"experiment", "baseline", "novelty", "clarity"} <= generic_vocabulary()
    assert not is_content_free("The reviewer criticizes that the Wasserstein bound is loose.")
    assert is_content_free("The reviewer appreciates that this research area is important.")


def test_generic_vocabulary_is_what_the_bundled_reviews_give() -> None:
    """The shipped list is reproducible: recomputed from the bundled ICLR 2020 reviews
    (the rules lines before the generic-vocabulary drop)."""
    from grebench.scoring._vocabulary import build_generic_vocabulary, bundled_lines_by_paper, generic_vocabulary

    corpus = bundled_lines_by_paper(lambda text: rules_judgment_lines(text, drop_content_free=False))
    assert len(corpus) == 400
    assert set(build_generic_vocabulary(corpus)) == generic_vocabulary()


# The Summary field of a review form (ICLR 2024-2026) may run on for paragraphs: they describe the paper too.
FORM_SUMMARIES = [
    ("The work studies sparse attention for long documents.\n\nA routing network picks the blocks each head reads. "
     "Training uses a distillation loss from the dense teacher.\n\nExperiments cover three retrieval benchmarks.",
     "The ablation of the routing temperature is missing."),
    ("This submission targets protein docking with diffusion.\n\nThe score model is equivariant to rotations, and "
     "sampling runs for fifty steps.\n\nResults are reported on PDBBind splits by sequence identity.",
     "The docking success rates are not compared with AlphaFold-Multimer."),
]


@pytest.mark.parametrize(("summary", "weakness"), FORM_SUMMARIES)
def test_a_form_summary_of_several_paragraphs_gives_no_line(summary: str, weakness: str) -> None:
    """rules-v6: after the first paragraph of a headed summary, up to the next heading, an uncued sentence is still
    description (no default verb); a cued judgment there is kept."""
    review = f"Summary:\n{summary}\n\nStrengths:\nThe method is simple.\n\nWeaknesses:\n{weakness}"
    lines = rules_judgment_lines(review, drop_content_free=False)
    described = [s.strip().rstrip(".").lower() for p in summary.split("\n\n") for s in p.split(". ")]
    assert not [x for x in lines if any(d[:30] in x.lower() for d in described)], lines
    assert any(weakness.rstrip(".").lower()[:30] in x.lower() and "criticizes" in x for x in lines), lines
    judged = review.replace("\n\nStrengths:", "\n\nHowever, I doubt the benchmarks reflect real workloads."
                            "\n\nStrengths:")
    assert any("doubt the benchmarks reflect real workloads" in x and "criticizes" in x
               for x in rules_judgment_lines(judged, drop_content_free=False))


def test_section_tags_are_headings_not_text() -> None:
    """rules-v7 (issue 50): the review prompt asks LLM candidates for tagged sections, and imported reviews keep
    them.  A tagged review gives the lines of the same review with headings; before, ``<strengths>`` was no heading
    (its sentences took the verb of whatever came before) and ``</summary>`` ended lines as "/summary."."""
    body = {"summary": "The paper proposes a spectral pruning method for graph networks.",
            "strengths": "1. The spectral pruning method is simple and scales to large graphs.",
            "weaknesses": "1. The comparison with magnitude pruning baselines on citation graphs is missing.",
            "questions": "Why does spectral pruning beat random pruning on Cora?"}
    headed = "\n\n".join(f"{name.title()}:\n{text}" for name, text in body.items())
    tagged = "\n".join(f"<{name}>\n{text}\n</{name}>" for name, text in body.items())
    inline = "".join(f"<{name}>{text}</{name}>" for name, text in body.items())
    expected = rules_judgment_lines(headed)
    assert [line.split(" that ")[0].split(" why ")[0] for line in expected] == [
        "The reviewer appreciates", "The reviewer criticizes", "The reviewer questions"]
    assert rules_judgment_lines(tagged) == rules_judgment_lines(inline) == expected
    assert not any("/" in line or "<" in line for line in rules_judgment_lines(tagged))
    # markup that names no section is a space, and a comparison in the text is no tag
    other = rules_judgment_lines("Weaknesses:\nThe bound assumes sparse<br>graphs and <i>dense</i> Laplacians, "
                                 "which p < n and m > k excludes.")
    assert len(other) == 1 and other[0].startswith("The reviewer criticizes that the bound assumes sparse graphs")
    assert RULES_ID == "rules-v7"

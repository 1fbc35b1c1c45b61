"""The offline estimator is a normalised LM, leave-paper-out, deterministic, and rewards shared content only."""

from __future__ import annotations

import numpy as np
import pytest

from grebench.scoring._request import LogprobRequest
from grebench.scoring.estimators import resolve_estimator
from grebench.scoring.estimators._offline import (
    OfflineEstimator,
    corpus_digest,
    fit_weights,
    held_out_pairs,
    is_function_token,
)
from tests.scoring.tiny_llama import bundled_papers, judgment_corpus


@pytest.fixture(scope="module")
def corpus() -> dict[str, list[str]]:
    return judgment_corpus()


@pytest.fixture(scope="module")
def est(corpus) -> OfflineEstimator:
    return OfflineEstimator(corpus)


@pytest.mark.parametrize("context", [[], ["the"], ["reviewer"], ["<eol>"], ["zzqxword"], ["never-seen-token"]])
@pytest.mark.parametrize("with_review", [False, True])
def test_next_token_distribution_sums_to_one(est, corpus, context, with_review) -> None:
    papers = bundled_papers()
    syn = papers[0]["abstract"] + " zzqxword zzqxword flurbogenic"
    first = corpus[papers[1]["id"]][0] + "\nThe reviewer appreciates zzqxword zzqxword in novel-ish ways" \
        if with_review else None
    dist = est.next_token_distribution(context, LogprobRequest(papers[0]["id"], syn, first, ""))
    assert abs(sum(dist.values()) - 1.0) < 1e-9
    assert min(dist.values()) > 0
    assert {"zzqxword", "<unk>", "<eos>", "<eol>"} <= dist.keys()


@pytest.mark.parametrize("dedup", [False, True])
def test_function_tokens_are_never_copied(corpus, dedup) -> None:
    """Stopwords, phrase words, punctuation, EOL/EOS keep their background probability whatever the first review."""
    est = OfflineEstimator(corpus, dedup=dedup)
    p = bundled_papers()[2]
    first = corpus[p["id"]][1] + "\nThe reviewer criticizes that the the the, and of the."
    for context in ([], ["novel"], ["reviewer"]):
        base = est.next_token_distribution(context, LogprobRequest(p["id"], None, None, ""))
        cond = est.next_token_distribution(context, LogprobRequest(p["id"], None, first, ""))
        fn = [t for t in base if is_function_token(t)]
        assert len(fn) > 50 and all(cond[t] == pytest.approx(base[t], rel=1e-12) for t in fn)
        # the copy only moves probability within the content class, whose total the background sets
        content_mass = sum(x for t, x in cond.items() if not is_function_token(t))
        assert content_mass == pytest.approx(sum(x for t, x in base.items() if not is_function_token(t)), rel=1e-9)
        assert any(cond[t] > base[t] for t in cond.keys() & base.keys() if not is_function_token(t))


def test_generic_phrase_lines_add_nothing(est, corpus) -> None:
    """Lines made only of the judgment phrase and function words leave the conditional exactly unchanged."""
    p = bundled_papers()[4]
    revs = corpus[p["id"]]
    padding = "\nThe reviewer criticizes that it is not.\nThe reviewer suggests that this should be so."
    plain, padded, marg = est.logprobs([LogprobRequest(p["id"], p["abstract"], revs[1], revs[0]),
                                        LogprobRequest(p["id"], p["abstract"], revs[1] + padding * 5, revs[0]),
                                        LogprobRequest(p["id"], p["abstract"], None, revs[0])])
    assert padded.logprob == pytest.approx(plain.logprob, abs=1e-9)
    only_padding = est.logprobs([LogprobRequest(p["id"], p["abstract"], padding.strip(), revs[0])])[0]
    assert only_padding.logprob == marg.logprob  # no content token: the review told the LM nothing


def test_copied_rare_word_beats_unseen_rare_word(est, corpus) -> None:
    pid = bundled_papers()[0]["id"]
    target = "The reviewer appreciates zzqxword"
    with_copy = est.logprobs([LogprobRequest(pid, None, "The reviewer likes zzqxword", target)])[0]
    without = est.logprobs([LogprobRequest(pid, None, "The reviewer likes something", target)])[0]
    assert with_copy.logprob > without.logprob


def test_leave_paper_out(corpus) -> None:
    pid = bundled_papers()[5]["id"]
    reqs = [LogprobRequest(pid, bundled_papers()[5]["abstract"], corpus[pid][1], corpus[pid][0]),
            LogprobRequest(pid, None, None, corpus[pid][0])]
    full = OfflineEstimator(corpus).logprobs(reqs)
    without = OfflineEstimator({k: v for k, v in corpus.items() if k != pid}).logprobs(reqs)
    assert [r.logprob for r in full] == [r.logprob for r in without]
    # the subtraction matters: the same reviews filed under another id are in p's background and help its target
    leaked = OfflineEstimator({**{k: v for k, v in corpus.items() if k != pid}, "leak": corpus[pid]}).logprobs(reqs)
    assert leaked[1].logprob > full[1].logprob


def test_deterministic_and_id(corpus) -> None:
    pid = bundled_papers()[3]["id"]
    req = LogprobRequest(pid, "abs", corpus[pid][1], corpus[pid][0])
    a, b = OfflineEstimator(corpus), OfflineEstimator(dict(reversed(list(corpus.items()))))
    assert a.logprobs([req]) == b.logprobs([req]) == a.logprobs([req])
    assert a.id == b.id
    for part in ("lam=0.08", "beta=0.4", "eps=0.001", "minpapers=2", "copy=tokens", f"corpus={corpus_digest(corpus)}"):
        assert part in a.id
    assert OfflineEstimator(corpus, lam=0.2).id != a.id
    assert OfflineEstimator(corpus, dedup=True).id != a.id
    # a new review in the corpus changes the fit, so the id (and every cache key) changes too
    grown = {**corpus, pid: [*corpus[pid], "The reviewer appreciates that a new review arrived."]}
    assert OfflineEstimator(grown).id != a.id


def test_resolve_offline_needs_corpus(settings, corpus) -> None:
    with pytest.raises(ValueError, match="corpus"):
        resolve_estimator("offline", settings)
    assert resolve_estimator("offline", settings, corpus).id.startswith("offline:")


def test_same_paper_review_beats_other_paper_review(est, corpus) -> None:
    """Mean PMI gain of a same-paper human review over another paper's review, over >= 100 papers."""
    papers = [p for p in bundled_papers() if len(corpus[p["id"]]) >= 3][:120]
    diffs = []
    for i, p in enumerate(papers):
        revs = corpus[p["id"]]
        other = corpus[papers[(i + 1) % len(papers)]["id"]][0]
        reqs = [LogprobRequest(p["id"], p["abstract"], c, revs[0]) for c in (None, revs[1], other)]
        marg, same, diff = (r.logprob for r in est.logprobs(reqs))
        diffs.append((same - marg) - (diff - marg))
    mean = float(np.mean(diffs))
    print(f"mean PMI(same paper) - PMI(other paper) = {mean:.2f} nats over {len(diffs)} papers")
    assert mean > 5.0
    assert np.mean(np.array(diffs) > 0) > 0.8


def test_generic_review_does_not_help(est, corpus) -> None:
    generic = "\n".join(["The reviewer appreciates that the paper is well written and easy to follow.",
                         "The reviewer criticizes that the experiments are limited.",
                         "The reviewer suggests that the authors should compare with more baselines."])
    papers = [p for p in bundled_papers() if len(corpus[p["id"]]) >= 3][:60]
    gains_generic, gains_human = [], []
    for p in papers:
        revs = corpus[p["id"]]
        reqs = [LogprobRequest(p["id"], p["abstract"], c, revs[0]) for c in (None, generic, revs[1])]
        marg, gen, hum = (r.logprob for r in est.logprobs(reqs))
        gains_generic.append(gen - marg)
        gains_human.append(hum - marg)
    assert np.mean(gains_generic) < 0 < np.mean(gains_human)


def test_fit_weights_prefers_some_copying(est, corpus) -> None:
    lam, beta, ll = fit_weights(est, held_out_pairs(corpus, 40))
    assert 0.0 < lam < 0.5 and 0.0 <= beta <= 1.0 and ll < 0

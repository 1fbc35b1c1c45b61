"""hf / vLLM / SGLang estimators on a tiny local Llama: batching, prefix reuse and servers give the same numbers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

from grebench.scoring._request import LogprobRequest
from grebench.scoring.estimators import resolve_estimator
from tests.scoring.tiny_llama import sample_requests, tiny_llama_dir  # noqa: F401


@pytest.fixture(scope="module")
def hf(tiny_llama_dir: Path):  # noqa: F811
    from grebench.scoring.estimators._hf import HFEstimator

    return HFEstimator(str(tiny_llama_dir), dtype="float32", device="cpu", batch_tokens=3000)


def _papers_per_batch(est, reqs: list[LogprobRequest]) -> list[set[str]]:
    """Record the papers of every scored batch of ``est`` from now on (the list fills as it scores)."""
    seen: list[set[str]] = []
    score_batch = est._score_batch

    def spy(batch, kv):
        seen.append({reqs[r.req].paper_id for r in batch})
        return score_batch(batch, kv)

    est._score_batch = spy
    return seen


def _direct(est, req: LogprobRequest) -> float:
    """Plain teacher forcing: full forward pass, log-softmax over all positions, gather the scored tokens (the
    judgment phrase's fixed tokens left out, a verb renormalised over the four verbs)."""
    import torch

    t = est.encode(req)
    with torch.no_grad():
        logp = torch.log_softmax(est.model(torch.tensor([t.ids])).logits[0].float(), -1)
    start = len(t.ids) - t.n_target
    total = 0.0
    for j in t.scored():
        row = logp[start + j - 1]
        total += float(row[t.ids[start + j]])
        if j in t.choice:
            total -= float(torch.logsumexp(row[list(est.encode.verb_ids)], 0))
    return total


def test_batched_equals_one_by_one_equals_direct(hf) -> None:
    reqs = sample_requests(n_papers=2, n_candidates=2)
    batched = hf.logprobs(reqs)
    single = [hf.logprobs([r])[0] for r in reqs]
    assert len({round(r.logprob, 3) for r in batched}) > len(reqs) // 2  # the requests really differ
    for r, b, s in zip(reqs, batched, single, strict=True):
        assert b.n_tokens == s.n_tokens > 10
        assert abs(b.logprob - s.logprob) < 1e-5 * max(1, b.n_tokens / 100)
        assert abs(b.logprob - _direct(hf, r)) < 1e-4


def test_prefix_reuse_equals_no_reuse(hf) -> None:
    reqs = sample_requests(n_papers=2, n_candidates=2)
    with_reuse = hf.logprobs(reqs)
    hf.reuse_prefix = False
    try:
        without = hf.logprobs(reqs)
    finally:
        hf.reuse_prefix = True
    assert max(abs(a.logprob - b.logprob) for a, b in zip(with_reuse, without, strict=True)) < 1e-4


def test_two_level_reuse_with_mixed_context_batches_equals_no_reuse(tiny_llama_dir: Path) -> None:  # noqa: F811
    """Small budgets: contexts are chunked, a batch of first reviews spans papers whose prefixes differ in length
    (pad slots between a prefix and its first review, masked), target rows of different contexts share batches."""
    import torch

    from grebench.scoring.estimators._hf import HFEstimator

    reqs = sample_requests(n_papers=3, n_candidates=2)
    reqs.append(LogprobRequest(reqs[0].paper_id, reqs[0].synopsis, "Short.", reqs[0].target))  # 1-request group
    small = HFEstimator(str(tiny_llama_dir), dtype="float32", device="cpu", batch_tokens=1500)
    holes: list[bool] = []
    contexts = small._contexts

    def spy_contexts(past, items):
        out = contexts(past, items)
        if out is not None:  # a real slot after a pad slot: a short prefix under a longer one's first review
            holes.append(bool((out.valid[:, 1:] & ~out.valid[:, :-1]).any()))
        return out

    small._contexts = spy_contexts
    with torch.inference_mode():
        got = small.logprobs(reqs)
    assert any(holes)  # some context batch spans papers with prefixes of different lengths
    small.reuse_prefix = False
    without = small.logprobs(reqs)
    toks = [small.encode(r) for r in reqs]
    assert len({t.rest[:len(t.rest) - t.n_target] for t in toks}) < len(reqs)  # groups really share a first review
    for a, b in zip(got, without, strict=True):
        assert a.n_tokens == b.n_tokens
        assert abs(a.logprob - b.logprob) < 1e-5 * max(1, a.n_tokens / 100)


def test_reuse_batches_across_papers_like_the_plain_path(tiny_llama_dir: Path) -> None:  # noqa: F811
    """A call with many papers (the GPU's): reuse runs target batches that span papers, computes fewer token
    positions than the plain path, and gives its numbers (float32)."""
    from grebench.scoring.estimators._hf import HFEstimator

    reqs = sample_requests(n_papers=4, n_candidates=3)
    est = HFEstimator(str(tiny_llama_dir), dtype="float32", device="cpu", batch_tokens=50_000)
    spans = _papers_per_batch(est, reqs)
    reused = est.logprobs_with(reqs, reuse=True)
    fed_reuse, est.positions_fed = est.positions_fed, 0
    assert any(len(papers) > 1 for papers in spans)  # a reuse batch of targets spans papers
    plain = est.logprobs_with(reqs, reuse=False)
    assert fed_reuse < 0.6 * est.positions_fed  # the shared prefixes and first reviews ran once
    for a, b in zip(reused, plain, strict=True):
        assert abs(a.logprob - b.logprob) < 1e-5 * max(1, a.n_tokens / 100)


def test_two_level_reuse_runs_shared_tokens_once(hf) -> None:
    """Tokens fed to the model: each paper prefix once, each (paper, first review) once, then only the targets."""
    reqs = sample_requests(n_papers=2, n_candidates=2)
    fed: list[list[int]] = []
    hook = hf.model.get_input_embeddings().register_forward_hook(lambda m, i, o: fed.extend(i[0].tolist()))
    try:
        hf.logprobs(reqs)
    finally:
        hook.remove()
    toks = [hf.encode(r) for r in reqs]
    prefixes = {t.prefix for t in toks}
    shared = {(t.prefix, t.rest[:len(t.rest) - t.n_target]) for t in toks}
    starts = [sum(1 for row in fed if tuple(row[:len(p)]) == p) for p in prefixes]
    assert starts == [1] * len(prefixes)  # each paper prefix is run once, in a row of its own
    pad = hf.tokenizer.pad_token_id
    real = sum(sum(1 for x in row if x != pad) for row in fed)
    bound = sum(len(p) for p in prefixes) + sum(len(s) for _, s in shared) + sum(t.n_target for t in toks)
    assert real <= bound < 0.7 * sum(len(t.ids) for t in toks)


def test_cut_respects_budget_and_padding_waste() -> None:
    from grebench.scoring.estimators._hf import _cut

    lengths = [10, 10, 11, 30, 31, 31, 100]
    batches = _cut(lengths, lambda n: n, budget=100)
    assert [x for b in batches for x in b] == lengths
    for b in batches:
        assert len(b) * max(b) <= 100 or len(b) == 1
        assert sum(b) >= 0.9 * len(b) * max(b)
    assert batches[0] == [10, 10, 11] and [100] in batches


def test_the_gpu_cut_is_the_cheapest_cut_within_the_budget() -> None:
    """With a per-forward overhead (a GPU's), the cut is the exact minimum of padded positions + overhead per batch
    among every cut of the sorted items into runs of ≤ budget padded tokens (checked against all 2^(n-1) cuts)."""
    import itertools
    import random

    from grebench.scoring.estimators._hf import _cut

    rng = random.Random(7)
    for trial in range(40):
        lengths = sorted(rng.randint(1, 60) for _ in range(rng.randint(1, 10)))
        budget, overhead = rng.choice([60, 120, 400]), rng.choice([1, 20, 200])

        def cost(batches: list[list[int]], overhead: int = overhead) -> int:
            return sum(len(b) * max(b) + overhead for b in batches)

        def fits(batches: list[list[int]], budget: int = budget) -> bool:
            return all(len(b) == 1 or len(b) * max(b) <= budget for b in batches)

        got = _cut(lengths, lambda n: n, budget, overhead=overhead)
        assert [x for b in got for x in b] == lengths and fits(got)
        best = None
        for marks in itertools.product([False, True], repeat=len(lengths) - 1):
            cuts, start = [], 0
            for i, mark in enumerate(marks, start=1):
                if mark:
                    cuts.append(lengths[start:i])
                    start = i
            cuts.append(lengths[start:])
            if fits(cuts) and (best is None or cost(cuts) < best):
                best = cost(cuts)
        assert cost(got) == best, (trial, lengths, budget, overhead)
    # a large overhead merges what the padding rule would split; no overhead keeps the CPU's rule
    spread = [10, 12, 20, 35, 60]
    assert _cut(spread, lambda n: n, budget=1000, overhead=10_000) == [spread]
    assert _cut(spread, lambda n: n, budget=1000) == _cut(spread, lambda n: n, budget=1000, overhead=0)
    assert len(_cut(spread, lambda n: n, budget=1000)) > 1


def test_the_gpu_batching_gives_the_same_numbers_in_fewer_forwards(tiny_llama_dir: Path,  # noqa: F811
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU's cut (an overhead per forward), run here on a CPU in float32: both paths give the plain path's
    numbers, and reuse runs fewer forward passes than under the CPU's padding rule."""
    from grebench.scoring.estimators._hf import GPU_FORWARD_OVERHEAD, HFEstimator

    reqs = sample_requests(n_papers=4, n_candidates=3)
    est = HFEstimator(str(tiny_llama_dir), dtype="float32", device="cpu", batch_tokens=50_000)
    calls = 0
    forward = est.model.base_model.forward

    def counting(*args, **kwargs):
        nonlocal calls
        calls += 1
        return forward(*args, **kwargs)

    est.model.base_model.forward = counting
    reference = est.logprobs_with(reqs, reuse=False)
    calls = 0
    est.logprobs_with(reqs, reuse=True)
    cpu_forwards = calls
    monkeypatch.setattr(HFEstimator, "forward_overhead", property(lambda self: GPU_FORWARD_OVERHEAD))
    for reuse in (True, False):
        calls = 0
        got = est.logprobs_with(reqs, reuse=reuse)
        if reuse:
            assert calls < cpu_forwards
        for a, b in zip(got, reference, strict=True):
            assert abs(a.logprob - b.logprob) < 1e-5 * max(1, a.n_tokens / 100)


def test_scored_span_is_target_plus_end_of_turn(hf) -> None:
    req = LogprobRequest("p", "An abstract.", None, "The reviewer appreciates the clear writing.")
    t = hf.encode(req)
    assert hf.tokenizer.decode(t.ids[-t.n_target:]) == req.target + "<|eot_id|>"
    assert "Today Date: 26 Jul 2024" in hf.tokenizer.decode(t.prefix)  # date injection pinned
    assert "[Review judgments from the first reviewer]" in hf.tokenizer.decode(t.prefix)
    assert hf.id.startswith("hf:") and "dtype=float32" in hf.id and ":chat=" in hf.id


def test_the_judgment_phrase_is_not_scored_and_its_verb_is_a_choice_among_four(hf) -> None:
    """Issue 35: "The reviewer" and the verb's continuation are format, not information; the verb counts as which of
    the four judgments the line makes."""
    lines = ["The reviewer appreciates the clear writing.", "The reviewer criticizes the missing baselines.",
             "The reviewer questions whether the bound holds.", "The reviewer suggests a larger ablation."]
    req = LogprobRequest("p", "An abstract.", "The reviewer criticizes the proofs.", "\n".join(lines))
    t = hf.encode(req)
    target = t.ids[-t.n_target:]
    phrases = hf.tokenizer.decode([target[j] for j in sorted(t.skip + t.choice)])
    assert phrases == "".join(line.split(" that")[0][:len(" ".join(line.split()[:3]))] for line in lines)
    assert len(t.choice) == 4 and [hf.tokenizer.decode([target[j]]).strip() for j in t.choice] == [
        hf.tokenizer.decode([v]).strip() for v in hf.encode.verb_ids]
    scored = hf.tokenizer.decode([target[j] for j in t.scored() if j not in t.choice])
    assert "reviewer" not in scored and "the missing baselines" in scored and "whether the bound holds" in scored
    got = hf.logprobs([req])[0]
    assert got.n_tokens == t.n_target - len(t.skip)
    assert abs(got.logprob - _direct(hf, req)) < 1e-4
    plain = hf.logprobs_with([req], reuse=False)[0]  # the plain path applies the same rule
    assert abs(plain.logprob - got.logprob) < 1e-4


def test_a_verb_choice_renormalises_over_the_verbs_the_server_listed() -> None:
    import math

    from grebench.scoring.estimators._server import scored_sum
    from grebench.scoring.estimators._tokenize import TokenizedRequest

    t = TokenizedRequest((1,), (5, 6, 7, 8), 4, skip=(0,), choice=(1,))
    verbs = (10, 11, 12, 13)
    vals = [-9.0, -1.0, -2.0, -3.0]
    all_listed = {1: {10: -1.0, 11: -2.0, 12: -3.0, 13: -4.0}}  # the choice position's listed log-probs
    norm = math.log(sum(math.exp(x) for x in (-1.0, -2.0, -3.0, -4.0)))
    assert scored_sum(t, vals, all_listed, verbs) == pytest.approx(-1.0 - norm - 2.0 - 3.0)
    one_missing = {1: {10: -1.0, 11: -2.0, 12: -3.0}}
    norm3 = math.log(sum(math.exp(x) for x in (-1.0, -2.0, -3.0)))
    assert scored_sum(t, vals, one_missing, verbs) == pytest.approx(-1.0 - norm3 - 2.0 - 3.0)


def test_resolve_hf_rejects_missing_dir(settings) -> None:
    from grebench.models import ModelError

    with pytest.raises(ModelError, match=r"neither a built-in evaluation LM .* nor a local checkpoint directory"):
        resolve_estimator("hf:/nonexistent/ckpt", settings)


def test_vllm_matches_hf_with_retries_and_two_replicas(hf, tiny_llama_dir: Path, settings,  # noqa: F811
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.fakes.vllm_server import fake_vllm

    # two top log-probs: most verbs are missing from them and asked for on their own, and the choice stays exact
    monkeypatch.setattr("grebench.scoring.estimators._server.TOP_LOGPROBS", 2)

    reqs = sample_requests(n_papers=2, n_candidates=1)
    expected = hf.logprobs(reqs)
    with fake_vllm(tiny_llama_dir, fail_first=1) as url1, fake_vllm(tiny_llama_dir) as url2:
        s = settings.replace(estimator_concurrency=3)
        est = resolve_estimator(f"vllm:{url1},{url2}", s)
        est.backoff_s = 0.0
        got = est.logprobs(reqs)
    assert est.id.startswith(f"vllm:{tiny_llama_dir}@")
    for a, b in zip(expected, got, strict=True):
        assert a.n_tokens == b.n_tokens
        assert abs(a.logprob - b.logprob) <= 1e-4 * max(1, a.n_tokens / 100)


def test_sglang_matches_hf(hf, tiny_llama_dir: Path, settings, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    from grebench.scoring.estimators._server import ServerEstimator
    from tests.fakes.sglang_server import fake_sglang

    def never(*_args: object) -> float:
        raise AssertionError("SGLang answers the verbs' log-probs with the request (token_ids_logprob)")

    monkeypatch.setattr(ServerEstimator, "_last_logprob", never)  # no verb is asked for on its own
    reqs = sample_requests(n_papers=1, n_candidates=2)
    expected = hf.logprobs(reqs)
    with fake_sglang(tiny_llama_dir) as url:
        est = resolve_estimator(f"sglang:{url}", settings)
        assert any(est.encode(r).choice for r in reqs)  # the judgment lines' verbs are choices to renormalise
        got = est.logprobs(reqs)
    for a, b in zip(expected, got, strict=True):
        assert abs(a.logprob - b.logprob) <= 1e-4 * max(1, a.n_tokens / 100)


def test_vllm_needs_local_tokenizer(tiny_llama_dir: Path, settings) -> None:  # noqa: F811
    from tests.fakes.vllm_server import fake_vllm

    with fake_vllm(tiny_llama_dir, model_name="meta-llama/Llama-3.1-8B-Instruct") as url:
        with pytest.raises(ValueError, match="estimator_tokenizer"):
            resolve_estimator(f"vllm:{url}", settings)
        est = resolve_estimator(f"vllm:{url}", settings.replace(estimator_tokenizer=str(tiny_llama_dir)))
        assert est.id.startswith("vllm:meta-llama/Llama-3.1-8B-Instruct@")


def test_a_cpu_reads_the_lm_head_in_chunks_bounded_by_the_batch_budget(tiny_llama_dir: Path) -> None:  # noqa: F811
    """On a CPU one LM-head chunk's float32 logits and log-softmax take at most HEAD_SHARE of hf_batch_mib (at least
    64 positions, at most HEAD_CHUNK); the numbers do not depend on the chunk."""
    from grebench.scoring.estimators import _hf

    est = _hf.HFEstimator(str(tiny_llama_dir), dtype="float32", device="cpu", batch_bytes=2 ** 20)
    vocab = int(est.model.get_output_embeddings().weight.shape[0])
    assert est.head_chunk == max(64, int(2 ** 20 * _hf.HEAD_SHARE) // (8 * vocab))
    assert est.head_chunk * 8 * vocab <= max(2 ** 20 * _hf.HEAD_SHARE, 64 * 8 * vocab)
    reqs = sample_requests(n_papers=1, n_candidates=2)
    small = est.logprobs(reqs)
    est.batch_bytes = 2 ** 40  # a budget the head never reaches: HEAD_CHUNK positions a chunk
    assert est.head_chunk == _hf.HEAD_CHUNK
    wide = est.logprobs(reqs)
    assert [r.n_tokens for r in small] == [r.n_tokens for r in wide]
    assert all(abs(a.logprob - b.logprob) < 1e-3 for a, b in zip(small, wide, strict=True))


def test_plain_path_batches_across_papers_and_equals_per_paper(tiny_llama_dir: Path) -> None:  # noqa: F811
    """The GPU path: plain forwards of whole prompts, several papers in one batch, chunked LM head: same numbers."""
    from grebench.scoring.estimators import _hf

    est = _hf.HFEstimator(str(tiny_llama_dir), dtype="float32", device="cpu", batch_tokens=50_000)
    reqs = sample_requests(n_papers=3, n_candidates=2)
    batches = _papers_per_batch(est, reqs)
    old_chunk = _hf.HEAD_CHUNK
    _hf.HEAD_CHUNK = 7  # many LM-head chunks per batch
    try:
        together = est.logprobs_with(reqs, reuse=False)
    finally:
        _hf.HEAD_CHUNK = old_chunk
    assert any(len(papers) > 1 for papers in batches)  # a batch spans papers
    by_paper = {}
    for r in reqs:
        by_paper.setdefault(r.paper_id, []).append(r)
    alone = {id(r): v for rs in by_paper.values() for r, v in zip(rs, est.logprobs_with(rs, reuse=True), strict=True)}
    for r, v in zip(reqs, together, strict=True):
        assert abs(v.logprob - alone[id(r)].logprob) < 1e-4


def test_reuse_rule_needs_speed_and_fidelity() -> None:
    from grebench.scoring.estimators._hf import reuse_pays

    assert reuse_pays(2.0, 0.01, 0.0)
    assert reuse_pays(1.9, 0.35, 0.43)       # bf16: both drift from float32, reuse no more than plain
    assert not reuse_pays(2.0, 0.6, 0.0)     # faster but drifts where the plain forward does not
    assert not reuse_pays(2.0, 0.9, 0.4)     # drifts more than bf16 batching noise: plain forward
    assert not reuse_pays(1.05, 0.0, 0.0)    # exact but not worth its many small passes
    assert not reuse_pays(0.3, 0.0, 0.0)     # a GPU bound by Python dispatch


def test_reuse_choice_is_measured_once_and_cached(tiny_llama_dir: Path, tmp_path: Path,  # noqa: F811
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from grebench.scoring.estimators import _hf

    # float32 on a CPU: known in advance (fewer FLOPs, the same numbers), so nothing is timed or stored
    known = _hf.HFEstimator(str(tiny_llama_dir), dtype="float32", device="cpu", batch_tokens=8192)
    rule = _hf.choose_reuse(known, "auto", tmp_path)
    assert rule["source"] == "rule" and known.reuse_prefix is True and not list(tmp_path.glob("*.json"))

    # a low precision is measured once per machine, then read back
    est = _hf.HFEstimator(str(tiny_llama_dir), dtype="bfloat16", device="cpu", batch_tokens=8192)
    base = est.id
    first = _hf.choose_reuse(est, "auto", tmp_path)
    assert first["source"] == "probe" and first["requests"] == len(_hf.probe_requests())
    assert est.reuse_prefix is first["reuse"]
    assert est.id == (base if est.reuse_prefix else f"{base}:kv=plain")  # a plain low-precision run says so
    assert len(list(tmp_path.glob("*.json"))) == 1

    def no_probe(_est):
        raise AssertionError("measured twice on the same machine")

    monkeypatch.setattr(_hf, "measure_reuse", no_probe)
    again = _hf.HFEstimator(str(tiny_llama_dir), dtype="bfloat16", device="cpu", batch_tokens=8192)
    second = _hf.choose_reuse(again, "auto", tmp_path)
    assert second["source"] == "cache" and again.reuse_prefix is first["reuse"]
    off = _hf.HFEstimator(str(tiny_llama_dir), dtype="float32", device="cpu", batch_tokens=8192)
    off.dtype = "bfloat16"  # only the id rule is exercised: a low-precision plain run is named as such
    assert _hf.choose_reuse(off, "off", None)["source"] == "setting"
    assert off.reuse_prefix is False and off.id.endswith(":kv=plain")
    with pytest.raises(ValueError, match="hf_prefix_reuse"):
        _hf.choose_reuse(off, "sometimes", None)


def test_batches_are_cut_by_bytes_and_give_the_numbers_of_one_big_batch(tiny_llama_dir: Path) -> None:  # noqa: F811
    """Issue 47 §4: a token budget alone let short targets copy their context once per row (the first run's 7.7 GB);
    a byte budget cuts the same rows into more forwards, with the same log-probs in float32."""
    from grebench.scoring.estimators import _hf

    reqs = sample_requests(n_papers=2, n_candidates=3)
    roomy = _hf.HFEstimator(str(tiny_llama_dir), dtype="float32", device="cpu", batch_tokens=8192,
                            batch_bytes=2 ** 34)
    tight = _hf.HFEstimator(str(tiny_llama_dir), dtype="float32", device="cpu", batch_tokens=8192,
                            batch_bytes=tight_budget(roomy))
    widest = max(len(roomy.encode(r).ids) for r in reqs)
    assert tight.row_bytes(64, widest) * 2 > tight.batch_bytes  # the budget does bind: two long rows exceed it
    calls: list[int] = []
    real = _hf.HFEstimator._score_batch

    def counted(self: Any, batch: Any, kv: Any) -> Any:
        calls.append(len(batch))
        return real(self, batch, kv)

    for reuse in (True, False):
        calls.clear()
        big = [r.logprob for r in roomy.logprobs_with(reqs, reuse)]
        wide = len(calls)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(_hf.HFEstimator, "_score_batch", counted)
            calls.clear()
            small = [r.logprob for r in tight.logprobs_with(reqs, reuse)]
        assert len(calls) > max(wide, 1) and max(calls) < len(reqs)  # more, smaller forwards
        assert max(abs(a - b) for a, b in zip(big, small, strict=True)) < 1e-3


def tight_budget(est: Any) -> int:
    """A byte budget that holds about two rows of 64 tokens after a 200-token context (cuts every real batch)."""
    return 2 * est.row_bytes(64, 200)


def test_reuse_probe_covers_the_plain_paths_batch_on_a_gpu() -> None:
    """On a GPU the probe scores as many papers as one plain call gets (a one-paper probe chose reuse on an H100,
    which then ran 2.6x slower than the plain path); on a CPU it stays one paper, and so do its cached records."""
    from types import SimpleNamespace

    from grebench.scoring.estimators._hf import probe_papers, probe_requests

    cpu = SimpleNamespace(device=SimpleNamespace(type="cpu"), batch_tokens=16_384)
    gpu = SimpleNamespace(device=SimpleNamespace(type="cuda"), batch_tokens=32_768)
    assert probe_papers(cpu) == 1  # type: ignore[arg-type]
    assert probe_papers(gpu) == 16  # type: ignore[arg-type]
    reqs = probe_requests(probe_papers(gpu))  # type: ignore[arg-type]
    assert len({r.paper_id for r in reqs}) == 16 and len(reqs) == 16 * 12


def test_the_reuse_decision_survives_a_slow_round_and_falls_back_on_flops() -> None:
    """Five interleaved rounds: one round slowed by other work (on either path) changes no verdict; timings that
    disagree leave the decision to the FLOP count."""
    from grebench.scoring.estimators._hf import decide_reuse

    steady = [(4.0, 2.0)] * 5
    assert decide_reuse(steady, 2.4)[:2] == (True, "timings")
    for slowed in range(5):  # a CPU-bound neighbour doubles one path's time in one round
        for path in (0, 1):
            rounds = [list(r) for r in steady]
            rounds[slowed][path] *= 2.2
            assert decide_reuse([(p, r) for p, r in rounds], 2.4)[0] is True
    assert decide_reuse([(2.0, 4.0)] * 5, 2.4)[:2] == (False, "timings")  # a GPU where reuse loses
    noisy = [(2.0, 1.9), (2.0, 2.2), (2.0, 1.5), (2.0, 2.1), (2.0, 1.7)]  # within noise: no timing verdict
    assert decide_reuse(noisy, 2.4) == (True, "flop prior", decide_reuse(noisy, 2.4)[2])
    assert decide_reuse(noisy, 1.2)[:2] == (False, "flop prior")
    assert "inconclusive" in decide_reuse(noisy, 2.4)[2] and "2.40x the positions" in decide_reuse(noisy, 2.4)[2]


def test_the_probe_ends_once_the_rounds_left_could_not_change_its_verdict() -> None:
    """Rounds stop when PROBE_AGREE agree: whatever a round not run would have shown, the verdict is the same."""
    import itertools

    from grebench.scoring.estimators import _hf
    from grebench.scoring.estimators._hf import decide_reuse

    faster, slower, even = (2.0, 1.0), (1.0, 2.0), (1.0, 1.0)
    for first in itertools.product((faster, slower, even), repeat=_hf.PROBE_AGREE):
        if not _hf._settled(list(first)):
            continue
        verdict = decide_reuse(list(first), 2.4)[0]
        for rest in itertools.product((faster, slower, even), repeat=_hf.PROBE_ROUNDS - _hf.PROBE_AGREE):
            assert decide_reuse([*first, *rest], 2.4)[0] is verdict
    assert _hf._settled([faster] * _hf.PROBE_AGREE) and _hf._settled([slower] * _hf.PROBE_AGREE)
    assert not _hf._settled([faster] * (_hf.PROBE_AGREE - 1) + [even])


def test_a_probe_taken_on_a_busy_machine_is_taken_again_on_a_quieter_start(
        tiny_llama_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    from grebench.scoring.estimators import _hf

    loads = iter([9.0, 9.0, 0.1, 0.1, 0.1])  # busy during the first probe, quiet from then on
    monkeypatch.setattr(_hf, "_load", lambda: next(loads))
    others = iter([1.8, 0.0])  # what other processes took of the cores during each probe

    class Others:
        def __init__(self) -> None:
            self.value = next(others)

        def cores(self) -> float:
            return self.value

    monkeypatch.setattr(_hf, "_neighbours", Others)
    monkeypatch.setattr("grebench.runtime._concurrency.usable_cores", lambda: 2)
    monkeypatch.setattr("grebench.runtime.usable_cores", lambda: 2)
    # a low precision: only a probe decides there (float32 on a CPU is decided by the FLOP count, unmeasured)
    est = _hf.HFEstimator(str(tiny_llama_dir), dtype="bfloat16", device="cpu", batch_tokens=8192)
    first = _hf.choose_reuse(est, "auto", tmp_path)
    assert first["source"] == "probe" and first["busy"] is True
    assert _hf.PROBE_AGREE <= len(first["rounds"]) <= _hf.PROBE_ROUNDS
    assert first["others_cores"] == 1.8
    second = _hf.choose_reuse(est, "auto", tmp_path)  # quiet now: measured again, not read from the cache
    assert second["source"] == "probe" and second["busy"] is False
    third = _hf.choose_reuse(est, "auto", tmp_path)
    assert third["source"] == "cache" and third["reuse"] is second["reuse"]


def test_the_reuse_probe_leaves_a_low_precision_model_as_it_found_it(tiny_llama_dir: Path) -> None:  # noqa: F811
    """The probe upcasts the model for its float32 reference and casts it back: buffers the loader kept in float32
    (the rotary frequencies) stay float32, so a score after a probe equals one whose probe came from the cache."""
    import torch

    from grebench.scoring.estimators import _hf

    est = _hf.HFEstimator(str(tiny_llama_dir), dtype="bfloat16", device="cpu", batch_tokens=8192)
    before = {name: (buf.dtype, buf.clone()) for name, buf in est.model.named_buffers()}
    assert any(dtype == torch.float32 for dtype, _ in before.values())  # what a bf16 load keeps in float32
    reqs = sample_requests(n_papers=1, n_candidates=1)
    scores = [r.logprob for r in est.logprobs(reqs)]
    _hf.measure_reuse(est)
    after = dict(est.model.named_buffers())
    for name, (dtype, value) in before.items():
        assert after[name].dtype == dtype and torch.equal(after[name], value), name
    assert next(est.model.parameters()).dtype == torch.bfloat16
    assert [r.logprob for r in est.logprobs(reqs)] == scores

"""The local LLM judge: typed decisions of a model grebench serves, the server started only when needed, the exam.

The real path runs: a tiny random-weight Llama checkpoint served by ``transformers serve`` (``/v1/systemone``), the
shared LLM client's decision cache, the judge's verdicts, and the exam of the panel.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from grebench.llm import LLMClient
from grebench.panel import ExamSets
from grebench.panel._judges import JUDGE_KINDS, JudgeContext, PaperView, ReviewView
from grebench.panel._llm_judge import parse_judges
from grebench.panel._local_judge import LocalJudge, builtin_local_judges, decision_state, local_judge
from grebench.runtime import LocalServers
from grebench.settings import Settings
from grebench.store import Store, open_store
from tests.fakes.settings_reads import Reads, undeclared_reads
from tests.runtime.served import port_free, require_serve
from tests.scoring.tiny_llama import tiny_llama_dir  # noqa: F401

PAPER = PaperView("p1", "Spectral pruning of graph networks", "We prune graph networks with spectral criteria.")
GOOD = ReviewView("The spectral criterion is never compared with magnitude pruning on the citation graphs.")
BAD = ReviewView("Good paper. Accept.")


def _context(settings: Settings, store: Store | None, servers: LocalServers | None,
             local_judges: tuple[str, ...] = ()) -> JudgeContext:
    return JudgeContext(settings, LLMClient(settings, store), gem=None, local_judges=local_judges,  # type: ignore[arg-type]
                        servers=servers)


def test_tables_and_the_job_s_local_judges_make_local_judges_with_a_family(settings: Settings) -> None:
    assert "local" in JUDGE_KINDS.names()
    ctx = _context(settings, None, None, ("smollm2-135m", "/models/other-1.7B"))
    judges = builtin_local_judges(ctx)
    assert [(j.name, j.family, j.kind) for j in judges] == [("smollm2-135m", "smollm2", "llm"),
                                                           ("other-1.7B", "other", "llm")]
    # the job's, never the setting's: a job with none has none whatever the setting says
    assert builtin_local_judges(_context(settings.replace(local_judges="smollm2-135m"), None, None)) == []
    [table] = parse_judges([{"name": "mine", "kind": "local", "model": "smollm2-135m", "family": "x"}], ctx)
    assert isinstance(table, LocalJudge) and table.family == "x" and table.model == "smollm2-135m"
    with pytest.raises(ValueError, match="judge 'bad': unknown key\\(s\\) api_base"):
        parse_judges([{"name": "bad", "kind": "local", "model": "m", "api_base": "http://x"}], ctx)
    with pytest.raises(ValueError, match="judge 'bad': missing model"):
        parse_judges([{"name": "bad", "kind": "local"}], ctx)


def test_the_model_reads_the_paper_and_both_reviews_in_the_order_shown_cut_to_a_bound() -> None:
    long = ReviewView("x" * 50_000)
    state = decision_state(PAPER, GOOD, long)
    assert state.index(PAPER.title) < state.index("Review one") < state.index(GOOD.text) < state.index("Review two")
    assert len(state) < 3_000 * 2 + 1_500 + 500


def test_a_bounded_exam_keeps_the_mix_of_every_test() -> None:
    item = (PAPER, GOOD, BAD)
    sets = ExamSets(consistency=[item] * 100, pertinence=[(PAPER, GOOD, ReviewView(str(i))) for i in range(60)],
                    easy=[item] * 50, hard=[item] * 50)
    part = sets.limited(24)
    assert (len(part.consistency), len(part.pertinence), len(part.easy), len(part.hard)) == (24, 24, 12, 12)
    picked = [int(b.text) for _, _, b in part.pertinence]
    assert picked == sorted(picked) and picked[0] == 0 and picked[-1] >= 55  # spread over the whole list
    small = ExamSets(consistency=[item] * 3)
    assert len(small.limited(24).consistency) == 3


def test_a_local_judge_answers_through_a_served_model_and_a_rerun_starts_no_server(
        settings: Settings, tiny_llama_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    require_serve()
    s = settings.replace(hf_dtype="float32", hf_device="cpu", llm_max_retries=0)
    store = open_store(tmp_path / "judge.duckdb")
    seen: set[str] = set()
    read = Settings(values=Reads(s.values, seen), tables=s.tables)  # what the local judge and its server read
    try:
        with LocalServers(read) as servers:
            judge = local_judge("tiny", str(tiny_llama_dir), _context(read, store, servers))
            answers = judge.compare_many([(PAPER, GOOD, BAD), (PAPER, BAD, GOOD)])
            [server] = servers.running
            port = server.port
            # decisions are one forward pass outside continuous batching: the server holds no batching KV cache
            # (issue 47: 0.38 GB of a 135M judge's 1.42 GB on a CPU)
            assert not server.continuous_batching and "--no-continuous-batching" in server.command(port)
            assert server.cache_tokens is None and "--cb-num-blocks" not in server.command(port)
        assert port_free(port)  # the block stopped its server
        # every setting read is in the panel's fingerprint or declared operational (issue 49)
        assert "hf_dtype" in seen and not undeclared_reads(seen), undeclared_reads(seen)
        assert judge.calls_made == 2 and judge.cached == 0
        for verdict in answers:
            assert not isinstance(verdict, Exception)
            assert verdict.preference in ("one", "two") and 0.5 <= verdict.confidence <= 1.0
            assert verdict.reason.startswith("P(one) = ")
        rows = store.rows("SELECT purpose, api_base, status FROM llm_calls")
        assert len(rows) == 2 and {(r["purpose"], r["api_base"], r["status"]) for r in rows} == {
            ("judge-decision", f"local:{tiny_llama_dir}:float32", "ok")}

        with LocalServers(s) as servers:  # every answer is cached: no server is started
            again = local_judge("tiny", str(tiny_llama_dir), _context(s, store, servers))
            assert again.compare_many([(PAPER, GOOD, BAD), (PAPER, BAD, GOOD)]) == answers
            assert servers.running == [] and again.cached == 2 and again.calls_made == 0
    finally:
        store.close()

"""Synopses that GEM-S conditions on: the abstract, or abstract + the strengths/weaknesses a paper claims (ASSW).

The ASSW summary is written by an LLM from the paper's full text (prompt after the GEM paper's App. C.4, own
wording) and cached per paper in ``synopses``; without ``assw_model`` configured, GEM-S (ASSW) is skipped.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import resources
from typing import TYPE_CHECKING

from grebench.store import Store, utcnow

if TYPE_CHECKING:
    from grebench.settings import ScoringSettings, Settings

ASSW_PROMPT_VERSION = "assw-v2"  # v2: the paper text is fenced (grebench.llm.fenced_block)
MAX_PAPER_CHARS = 60_000  # keeps the request inside a 32k-token context with room for the answer


def assw_producer(scoring: ScoringSettings) -> str:
    """The producer id under which ASSW summaries are cached (names the model and the prompt version)."""
    return f"litellm:{scoring.assw_model}@{ASSW_PROMPT_VERSION}"


def assw_synopses(store: Store, settings: Settings, papers: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """ASSW synopses (abstract + claimed strengths/weaknesses) for papers with an abstract; and skipped → reason.

    ``papers`` maps paper id → abstract.  Needs ``settings.scoring.assw_model`` and the paper's extracted text.
    """
    if not settings.scoring.assw_model:
        return {}, {pid: "assw_model is not configured (no LLM to summarise the paper's claims)" for pid in papers}
    producer = assw_producer(settings.scoring)
    cached = {r["paper_id"]: r["text"] for r in store.rows(
        "SELECT paper_id, text FROM synopses WHERE kind = 'assw' AND producer = ? AND status = 'ok'", [producer])}
    texts = {r["paper_id"]: r["text"] for r in store.rows(
        "SELECT paper_id, text FROM paper_texts WHERE status = 'ok' AND text IS NOT NULL AND length(text) > 0")}
    skipped: dict[str, str] = {}
    todo = []
    for pid in papers:
        if pid in cached:
            continue
        if pid not in texts:
            skipped[pid] = "no extracted paper text (run `grebench extract`)"
        else:
            todo.append(pid)
    if todo:
        from grebench.llm import ChatRequest, LLMClient, fenced_block

        system = resources.files("grebench.scoring").joinpath("prompts/assw_v1.txt").read_text("utf-8")
        requests = [ChatRequest(model=settings.scoring.assw_model,
                                messages=(("system", system),
                                          ("user", fenced_block("PAPER", texts[pid][:MAX_PAPER_CHARS]))),
                                purpose="assw", prompt_version=ASSW_PROMPT_VERSION,
                                api_base=settings.scoring.scoring_llm_api_base or None,
                                api_key_env=settings.scoring.scoring_llm_api_key_env or None,
                                params=(("temperature", 0),)) for pid in todo]
        results = LLMClient(settings, store).complete_many(requests)
        for pid, result in zip(todo, results, strict=True):
            ok = result.status == "ok" and bool((result.text or "").strip())
            store.con.execute("INSERT OR REPLACE INTO synopses VALUES (?, 'assw', ?, ?, ?, ?, ?)",
                              [pid, producer, (result.text or "").strip() if ok else None, "ok" if ok else "failed",
                               None if ok else (result.error or "empty summary"), utcnow()])
            if ok:
                cached[pid] = (result.text or "").strip()
            else:
                skipped[pid] = f"ASSW summary failed: {result.error or 'empty summary'}"
    synopses = {pid: f"{papers[pid]}\n\n{cached[pid]}" for pid in papers if pid in cached}
    return synopses, skipped

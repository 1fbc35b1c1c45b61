"""The bench stage: every candidate writes a review of every eligible paper.

Resumable: each generation (or a small batch of deterministic ones) is
committed as soon as it exists, so a kill loses at most the calls in flight.
A rerun makes no calls for generations already ``ok``; a failed one is tried
again on later runs until it has been tried :data:`MAX_TRIES` times.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable

from grebench.bench import _controls as ctl
from grebench.bench._baseline import Split, make_splits
from grebench.bench._generations import (
    MAX_TRIES,
    existing,
    generation_id,
    load_papers,
    make_row,
    review_texts,
    write_rows,
)
from grebench.bench._parse import parse_review
from grebench.bench._prompt import REVIEW_PROMPT_VERSION, PaperInput, review_messages
from grebench.bench._registry import HUMAN, LLM_CONTROLS, Candidate, load_candidates, sync_candidates
from grebench.bench._sections import split_sections
from grebench.settings import Settings
from grebench.store import Store, utcnow

log = logging.getLogger(__name__)
HUMAN_VERSION = "human-v1"
BATCH = 50


@dataclass
class _Tally:
    calls_made: int = 0
    cached: int = 0
    failed: int = 0
    gave_up: int = 0
    written: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    skipped_generations: list[dict[str, str]] = field(default_factory=list)


def _deterministic(c: Candidate, split: Split, paper: PaperInput, texts: dict[str, str], other: dict[str, Split],
                   ) -> tuple[str | None, str | None, str | None]:
    """(text, source review id, reason if none) of a candidate that needs no LLM."""
    human = texts.get(split.candidate_review_id)
    if c.name == "generic":
        return ctl.GENERIC_REVIEW, None, None
    if c.name == "abstract-restatement":
        if not (paper.abstract or "").strip():
            return None, None, "paper has no abstract"
        return ctl.abstract_restatement(paper.title, paper.abstract or ""), None, None
    if c.name == "other-paper":
        target = other.get(split.paper_id)
        if target is None:
            return None, None, "needs at least two eligible papers"
        return texts.get(target.candidate_review_id), target.candidate_review_id, None
    if human is None:
        return None, None, "human candidate review has no text"
    transform = {HUMAN: lambda t: t, "sentence-deletion": ctl.sentence_deletion, "elongation": ctl.elongation}
    return transform[c.name](human), split.candidate_review_id, None


def _run_deterministic(store: Store, cands: list[Candidate], splits: list[Split], papers: dict[str, Any],
                       texts: dict[str, str], seed: int, tally: _Tally, progress: Callable[[Any], None]) -> None:
    by_paper = {s.paper_id: s for s in splits}
    other = {p: by_paper[q] for p, q in ctl.derangement(list(by_paper), seed).items()}
    have = existing(store, [c.name for c in cands])
    batch: list[dict[str, Any]] = []
    for split in splits:
        paper, public_at = papers[split.paper_id]
        for c in cands:
            text, source, reason = _deterministic(c, split, paper, texts, other)
            if text is None:
                tally.skipped_generations.append({"candidate": c.name, "paper_id": split.paper_id,
                                                  "reason": reason or "no text"})
                continue
            version = HUMAN_VERSION if c.name == HUMAN else ctl.CONTROL_VERSION
            old = have.get(generation_id(c.name, split.paper_id, version, {}, source))
            if old is not None and old["status"] == "ok" and old["text"] == text:
                progress(c.name)
                continue  # stored and unchanged: nothing to build or write
            row = make_row(candidate=c.name, paper_id=split.paper_id, prompt_version=version, params={},
                           source_review_id=source, status="ok", text=text, sections=split_sections(text),
                           parse_ok=None, flags={"producer": "deterministic"}, error=None, attempts=1,
                           generated_at=utcnow(), reviews_public_at=public_at)
            batch.append(row)
            progress(c.name)
        if len(batch) >= BATCH:
            write_rows(store, batch, replace_pair=True)
            tally.written += len(batch)
            batch = []
    write_rows(store, batch, replace_pair=True)
    tally.written += len(batch)


def _llm_messages(c: Candidate, paper: PaperInput, human: str | None) -> tuple[Any, dict[str, Any], str, str]:
    """(messages, flags, prompt version, purpose) of one LLM generation."""
    if c.name == "rephrase" or c.name == "deletion-completion":
        prompt = ctl.REPHRASE_PROMPT if c.name == "rephrase" else ctl.COMPLETION_PROMPT
        review = human if c.name == "rephrase" else ctl.deletion_with_gaps(human or "")
        return (("user", prompt.replace("{review}", review or "")),), {}, f"{c.name}-v1", "control"
    messages, flags = review_messages(paper, c.params, abstract_only=c.name == "abstract-only")
    version = REVIEW_PROMPT_VERSION if c.name != "abstract-only" else f"abstract-only-{REVIEW_PROMPT_VERSION}"
    return messages, flags, version, "review" if c.kind == "llm" else "control"


def _run_llm(store: Store, settings: Settings, run_id: str, cands: list[Candidate], splits: list[Split],
             papers: dict[str, Any], texts: dict[str, str], tally: _Tally, progress: Callable[[Any], None]) -> None:
    from grebench.llm import ChatRequest, ChatResult, LLMClient

    have = existing(store, [c.name for c in cands])
    jobs: dict[str, list[dict[str, Any]]] = {}
    requests: list[ChatRequest] = []
    for c in cands:
        for split in splits:
            paper, public_at = papers[split.paper_id]
            source = split.candidate_review_id if c.name in ("rephrase", "deletion-completion") else None
            messages, flags, version, purpose = _llm_messages(c, paper, texts.get(split.candidate_review_id))
            job = {"candidate": c.name, "paper_id": split.paper_id, "prompt_version": version, "params": c.params,
                   "source_review_id": source, "flags": flags, "public_at": public_at}
            gid = make_row(**_row_args(job), status="ok", text=None, sections=None, parse_ok=None, error=None,
                           attempts=0, generated_at=utcnow())["generation_id"]
            old = have.get(gid)
            if old is not None and old["status"] == "ok":
                tally.cached += 1
                progress(c.name)
                continue
            if old is not None and old["attempts"] >= MAX_TRIES:
                tally.gave_up += 1
                progress(c.name)
                continue
            job["tries"] = 0 if old is None else old["attempts"]
            request = ChatRequest(model=c.model or "", messages=messages, purpose=purpose, prompt_version=version,
                                  api_base=c.api_base, api_key_env=c.api_key_env, params=tuple(c.params.items()),
                                  stream=c.stream)
            if request.cache_key() not in jobs:
                requests.append(request)
            jobs.setdefault(request.cache_key(), []).append(job)

    def done(result: ChatResult) -> None:
        if result.cached:
            tally.cached += len(jobs[result.request_key])
        else:
            tally.calls_made += 1
            tally.tokens_in += result.tokens_in or 0
            tally.tokens_out += result.tokens_out or 0
            tally.cost_usd += result.cost_usd or 0.0
        rows = []
        for job in jobs[result.request_key]:
            flags = {**job["flags"], "producer": "llm", "call_attempts": result.attempts,
                     "output_truncated": result.truncated, "cached_call": result.cached}
            parsed = parse_review(result.text) if result.ok and result.text else None
            if parsed is not None:
                flags.update(parse_method=parsed.method, missing_sections=parsed.missing)
            rows.append(make_row(
                **{**_row_args(job), "flags": flags}, status=result.status, text=result.text,
                sections=None if parsed is None else list(parsed.sections.items()),
                parse_ok=None if parsed is None else parsed.parse_ok, error=result.error,
                attempts=job["tries"] + 1, generated_at=result.generated_at, tokens_in=result.tokens_in,
                tokens_out=result.tokens_out, cost_usd=result.cost_usd, latency_s=result.latency_s,
                request_key=result.request_key))
            if not result.ok:
                tally.failed += 1
                store.record_failure(run_id, "bench", f"{job['candidate']}:{job['paper_id']}", result.error or "failed")
            progress(job["candidate"])
        write_rows(store, rows)

    if requests:
        LLMClient(settings, store).complete_many(requests, on_done=done)


def _row_args(job: dict[str, Any]) -> dict[str, Any]:
    return {"candidate": job["candidate"], "paper_id": job["paper_id"], "prompt_version": job["prompt_version"],
            "params": job["params"], "source_review_id": job["source_review_id"], "flags": job["flags"],
            "reviews_public_at": job["public_at"]}


def run_bench(store: Store, settings: Settings, run_id: str, candidate_names: list[str] | None = None,
              progress: Callable[[Any], None] | None = None) -> dict[str, Any]:
    """Generate every missing review; return the summary (see ``grebench bench --json``)."""
    everyone = load_candidates(settings)
    sync_candidates(store, everyone)
    chosen = everyone
    if candidate_names:
        known = {c.name: c for c in everyone}
        unknown = [n for n in candidate_names if n not in known]
        if unknown:
            raise ValueError(f"unknown candidate(s): {', '.join(unknown)} (known: {', '.join(known)})")
        chosen = [known[n] for n in dict.fromkeys(candidate_names)]
    splits, skipped = make_splits(store, settings.seed)
    papers = load_papers(store)
    ids = [s.candidate_review_id for s in splits]
    texts = review_texts(store, ids)
    tally = _Tally()
    tick = progress or (lambda _item: None)
    _run_deterministic(store, [c for c in chosen if not c.needs_llm], splits, papers, texts, settings.seed, tally,
                       tick)
    llm = [c for c in chosen if c.needs_llm]
    if llm:
        _run_llm(store, settings, run_id, llm, splits, papers, texts, tally, tick)
    for skip in tally.skipped_generations:
        log.info("no %s generation for %s: %s", skip["candidate"], skip["paper_id"], skip["reason"])
    store.checkpoint()
    names = [c.name for c in chosen]
    counts = {r["candidate"]: r["n"] for r in store.rows(
        f"SELECT candidate, count(*) AS n FROM generations WHERE status = 'ok' AND candidate IN "
        f"({', '.join('?' * len(names))}) GROUP BY candidate", names)}
    return {
        "calls_made": tally.calls_made, "cached": tally.cached, "failed": tally.failed,
        "generations_total": sum(counts.values()), "tokens_in": tally.tokens_in, "tokens_out": tally.tokens_out,
        "cost_usd": round(tally.cost_usd, 6), "skipped_papers": skipped,
        "candidates": [{"name": c.name, "kind": c.kind, "generations": counts.get(c.name, 0)} for c in chosen],
        "gave_up": tally.gave_up, "generations_written": tally.written,
        "skipped_generations": tally.skipped_generations, "papers_eligible": len(splits),
        "llm_controls": list(LLM_CONTROLS) if settings.control_model else [],
    }

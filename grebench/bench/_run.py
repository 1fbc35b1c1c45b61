"""The bench stage: every candidate writes a review of every eligible paper.

Resumable: each generation (or a small batch of deterministic ones) is
committed as soon as it exists, so a kill loses at most the calls in flight.
A rerun makes no calls for generations already ``ok``; a failed one is tried
again on later runs until it has been tried :data:`MAX_TRIES` times.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NotRequired, TypedDict

from grebench import stop
from grebench.bench._baseline import Split, make_splits
from grebench.bench._contamination import is_clean
from grebench.bench._generations import (
    MAX_TRIES,
    GenerationRow,
    Papers,
    StoredGeneration,
    existing,
    generation_id,
    load_papers,
    make_row,
    review_texts,
    write_rows,
)
from grebench.bench._parse import parse_review
from grebench.bench._prompt import REVIEW_PROMPT_VERSION, PaperInput, review_messages
from grebench.bench._registry import (
    CONTROL_KIND,
    HUMAN,
    IMPORTED_KIND,
    Candidate,
    CandidateError,
    candidate_endpoints,
    check_names_free,
    kind_info,
    load_candidates,
    sync_candidates,
)
from grebench.bench._sections import split_sections
from grebench.bench.controls import CONTROLS, ControlInput, ControlSkip, derangement
from grebench.progress import NoProgress, Progress, Task
from grebench.settings import BenchSettings, Settings
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


class CandidateCount(TypedDict):
    """A candidate of a bench run and its stored reviews (an imported one: how many are in the papers worked on)."""

    name: str
    kind: str
    generations: int
    sample_papers: NotRequired[int]  # imported candidates only


class BenchRun(TypedDict):
    """What a bench run did (:func:`run_bench`; ``grebench bench --json``)."""

    calls_made: int
    cached: int
    failed: int
    generations_total: int
    tokens_in: int
    tokens_out: int
    cost_usd: float
    skipped_papers: list[dict[str, str]]       # {paper_id, reason}
    candidates: list[CandidateCount]
    gave_up: int
    generations_written: int
    skipped_generations: list[dict[str, str]]  # {candidate, paper_id, reason}
    papers_eligible: int
    llm_controls: list[str]
    sample: NotRequired[str | None]      # the bench stage adds the job's sample and validation
    validation: NotRequired[str]


class _Generation(TypedDict):
    """What one (candidate, paper) generation is: shared by :class:`_RowArgs` and :class:`_Job`."""

    candidate: str
    paper_id: str
    prompt_version: str
    params: dict[str, Any]
    source_review_id: str | None
    flags: dict[str, Any]


class _RowArgs(_Generation):
    """The arguments of :func:`make_row` that one (candidate, paper) job fixes."""

    reviews_public_at: datetime | None


class _Job(_Generation):
    """One LLM generation to make: what :func:`_llm_jobs` yields (``purpose`` is taken off before the call, ``tries``
    set once the stored row is known)."""

    public_at: datetime | None
    purpose: NotRequired[str]
    tries: NotRequired[int]


def _control_input(split: Split, paper: PaperInput, texts: dict[str, str], other: dict[str, Split],
                   seed: int) -> ControlInput:
    target = other.get(split.paper_id)
    return ControlInput(paper=paper, human=texts.get(split.candidate_review_id) if split.candidate_review_id else None,
                        human_review_id=split.candidate_review_id or None,
                        other=None if target is None else texts.get(target.candidate_review_id),
                        other_review_id=None if target is None else target.candidate_review_id, seed=seed,
                        references=tuple((r, texts[r]) for r in split.reference_review_ids if r in texts))


def _deterministic(c: Candidate, inp: ControlInput) -> tuple[str | None, str | None, str | None, str]:
    """(text, source review id, reason if none, version) of a candidate that needs no LLM."""
    if c.name == HUMAN:
        if inp.human is None:
            return None, None, "human candidate review has no text", HUMAN_VERSION
        return inp.human, inp.human_review_id, None, HUMAN_VERSION
    control = CONTROLS.get(c.name).obj
    assert control.build is not None  # deterministic candidates are the controls that build without an LLM
    try:
        return control.build(inp), control.source_review_id(inp), None, control.version
    except ControlSkip as exc:
        return None, None, str(exc), control.version


def _run_deterministic(store: Store, cands: list[Candidate], splits: list[Split], papers: Papers,
                       texts: dict[str, str], seed: int, tally: _Tally, progress: Task) -> None:
    by_paper = {s.paper_id: s for s in splits}
    other = {p: by_paper[q] for p, q in derangement(list(by_paper), seed).items()}
    have = existing(store, [c.name for c in cands])
    batch: list[GenerationRow] = []
    for split in splits:
        if stop.stopping():  # a paper is a request boundary: what was built is written, then the stop is raised
            write_rows(store, batch, replace_pair=True)
            tally.written += len(batch)
            stop.check()
        paper, public_at = papers[split.paper_id]
        inp = _control_input(split, paper, texts, other, seed)
        for c in cands:
            text, source, reason, version = _deterministic(c, inp)
            if text is None:
                tally.skipped_generations.append({"candidate": c.name, "paper_id": split.paper_id,
                                                  "reason": reason or "no text"})
                continue
            old = have.get(generation_id(c.name, split.paper_id, version, {}, source))
            if old is not None and old["status"] == "ok" and old["text"] == text:
                progress.advance()
                continue  # stored and unchanged: nothing to build or write
            row = make_row(candidate=c.name, paper_id=split.paper_id, prompt_version=version, params={},
                           source_review_id=source, status="ok", text=text, sections=split_sections(text),
                           parse_ok=None, flags={"producer": "deterministic"}, error=None, attempts=1,
                           generated_at=utcnow(), reviews_public_at=public_at, sealable=False)
            batch.append(row)
            progress.advance()
        if len(batch) >= BATCH:
            write_rows(store, batch, replace_pair=True)
            tally.written += len(batch)
            batch = []
    write_rows(store, batch, replace_pair=True)
    tally.written += len(batch)


def _llm_messages(c: Candidate, inp: ControlInput) -> tuple[Any, dict[str, Any], str, str, str | None]:
    """(messages, flags, prompt version, purpose, source review id) of one LLM generation."""
    if c.kind == CONTROL_KIND:
        control = CONTROLS.get(c.name).obj
        assert control.prompt is not None
        return control.prompt(inp), {}, control.version, "control", control.source_review_id(inp)
    messages, flags = review_messages(inp.paper, c.params)
    return messages, flags, REVIEW_PROMPT_VERSION, "review", None


def _llm_jobs(store: Store, settings: Settings, cands: list[Candidate], splits: list[Split], papers: Papers,
              texts: dict[str, str]) -> Iterator[tuple[Candidate, _Job, Any, StoredGeneration | None]]:
    """(candidate, job, messages, stored row or None) of every (LLM candidate, paper) pair; the generation id does
    not depend on where the candidate is served, so this runs before any model is pulled or started."""
    have = existing(store, [c.name for c in cands])
    for c in cands:
        for split in splits:
            paper, public_at = papers[split.paper_id]
            inp = _control_input(split, paper, texts, {}, settings.seed)
            messages, flags, version, purpose, source = _llm_messages(c, inp)
            job: _Job = {"candidate": c.name, "paper_id": split.paper_id, "prompt_version": version, "params": c.params,
                   "source_review_id": source, "flags": flags, "public_at": public_at, "purpose": purpose}
            gid = make_row(**_row_args(job), status="ok", text=None, sections=None, parse_ok=None, error=None,
                           attempts=0, generated_at=utcnow())["generation_id"]
            yield c, job, messages, have.get(gid)


def _llm_todo(store: Store, settings: Settings, cands: list[Candidate], splits: list[Split], papers: Papers,
              texts: dict[str, str]) -> bool:
    """Whether some LLM generation is still to be made (none: no model is pulled, locked or served)."""
    return any(old is None or (old["status"] != "ok" and old["attempts"] < MAX_TRIES)
               for _c, _job, _m, old in _llm_jobs(store, settings, cands, splits, papers, texts))


def _tally_done(store: Store, settings: Settings, cands: list[Candidate], splits: list[Split],
                papers: Papers, texts: dict[str, str], tally: _Tally) -> None:
    """Count what a run with nothing to make would have found: made (cached) or given up on."""
    for _c, _job, _m, old in _llm_jobs(store, settings, cands, splits, papers, texts):
        if old is not None and old["status"] == "ok":
            tally.cached += 1
        else:
            tally.gave_up += 1


def _run_llm(store: Store, settings: Settings, run_id: str | None, cands: list[Candidate], splits: list[Split],
             papers: Papers, texts: dict[str, str], tally: _Tally, progress: Task) -> None:
    from grebench.llm import ChatRequest, ChatResult, LLMClient

    jobs: dict[str, list[_Job]] = {}
    requests: list[ChatRequest] = []
    scopes = {c.name: _cache_scope(c, settings) for c in cands}
    for c, job, messages, old in _llm_jobs(store, settings, cands, splits, papers, texts):
        purpose, version = job.pop("purpose"), job["prompt_version"]
        if old is not None and old["status"] == "ok":
            tally.cached += 1
            progress.advance()
            continue
        if old is not None and old["attempts"] >= MAX_TRIES:
            tally.gave_up += 1
            progress.advance()
            continue
        job["tries"] = 0 if old is None else old["attempts"]
        request = ChatRequest(model=c.model or "", messages=messages, purpose=purpose, prompt_version=version,
                              api_base=c.api_base, api_key_env=c.api_key_env, params=tuple(c.params.items()),
                              stream=c.stream, endpoint_id=c.endpoint_id, isolated=c.isolated,
                              cache_scope=scopes[c.name])
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
            # only what the call produced: whether *this run* found it in the call cache is run bookkeeping (the
            # run summary's `cached`), and a resumed run must write the row an uninterrupted one writes
            flags = {**job["flags"], "producer": "llm", "call_attempts": result.attempts,
                     "output_truncated": result.truncated}
            parsed = parse_review(result.text) if result.ok and result.text else None
            if parsed is not None:
                flags.update(parse_method=parsed.method, missing_sections=parsed.missing)
            rows.append(make_row(
                **_row_args(job, flags), status=result.status, text=result.text,
                sections=None if parsed is None else list(parsed.sections.items()),
                parse_ok=None if parsed is None else parsed.parse_ok, error=result.error,
                attempts=job["tries"] + 1, generated_at=result.generated_at, tokens_in=result.tokens_in,
                tokens_out=result.tokens_out, cost_usd=result.cost_usd, latency_s=result.latency_s,
                request_key=result.request_key))
            if not result.ok:
                tally.failed += 1
                if run_id is not None:
                    store.record_failure(run_id, "bench", f"{job['candidate']}:{job['paper_id']}",
                                         result.error or "failed")
            progress.advance()
        write_rows(store, rows)

    if requests:
        LLMClient(settings, store).complete_many(requests, on_done=done)


def _batched(cands: list[Candidate], bench: BenchSettings) -> tuple[list[Candidate], list[Candidate]]:
    """(local candidates written in this process in batches, candidates called through an endpoint): a ``local``
    candidate decodes in batches across papers unless ``local_generation = server``."""
    from grebench.bench._local import LOCAL_KIND

    batch = [c for c in cands if c.kind == LOCAL_KIND and bench.local_generation == "batch"]
    return batch, [c for c in cands if c not in batch]


def _run_local_batches(store: Store, settings: Settings, run_id: str | None, cands: list[Candidate],
                       splits: list[Split], papers: Papers, texts: dict[str, str], tally: _Tally,
                       display: Progress) -> None:
    """The reviews of ``kind = "local"`` candidates, decoded in this process in a deterministic batch plan across
    papers (:class:`grebench.runtime.LocalGenerator`); each batch is written as soon as it is decoded."""
    from grebench.models import ModelError
    from grebench.runtime import LocalGenerator, generate_on_ray, resolve_local

    for c in cands:
        todo: dict[str, tuple[_Job, Any]] = {}
        for _c, job, messages, old in _llm_jobs(store, settings, [c], splits, papers, texts):
            job.pop("purpose")
            if old is not None and old["status"] == "ok":
                tally.cached += 1
            elif old is not None and old["attempts"] >= MAX_TRIES:
                tally.gave_up += 1
            else:
                job["tries"] = 0 if old is None else old["attempts"]
                todo[job["paper_id"]] = (job, messages)
        if not todo:
            continue
        try:
            model = resolve_local(settings, c.model or "")
        except ModelError as exc:  # a checkpoint that is not there is the configuration's mistake, as with a server
            raise CandidateError(f"candidate {c.name!r}: {exc}") from None
        on_ray = settings.run.executor == "ray"  # the batches decode on Ray actors, each with its own copy
        with LocalGenerator(model.path, model.device, model.dtype, model.label, weights=not on_ray) as gen:
            prompts = {pid: gen.prompt_ids(messages) for pid, (_job, messages) in todo.items()}
            plan = gen.plan(prompts, int(c.params["max_tokens"]), settings.bench.local_batch_mib * 2 ** 20)
            log.info("%s: %d reviews in %d batch(es) (plan %s)", c.name, len(todo), len(plan.batches), plan.id)

            def write(batch: list[Any], candidate: Candidate = c,
                      jobs: dict[str, tuple[_Job, Any]] = todo) -> None:
                rows = []
                for out in batch:
                    job = jobs[out.key][0]
                    flags = {**job["flags"], "producer": "local-batch", "generation": out.provenance,
                             "output_truncated": out.finish == "length"}
                    parsed = parse_review(out.text) if out.text else None
                    if parsed is not None:
                        flags.update(parse_method=parsed.method, missing_sections=parsed.missing)
                    ok = bool(out.text)
                    rows.append(make_row(
                        **_row_args(job, flags), status="ok" if ok else "failed",
                        text=out.text if ok else None,
                        sections=None if parsed is None else list(parsed.sections.items()),
                        parse_ok=None if parsed is None else parsed.parse_ok,
                        error=None if ok else "the model wrote nothing", attempts=job["tries"] + 1,
                        generated_at=utcnow(), tokens_in=out.tokens_in, tokens_out=out.tokens_out, cost_usd=0.0,
                        latency_s=round(out.seconds, 3)))
                    tally.calls_made += 1
                    tally.tokens_in += out.tokens_in
                    tally.tokens_out += out.tokens_out
                    if not ok:
                        tally.failed += 1
                        if run_id is not None:
                            store.record_failure(run_id, "bench", f"{candidate.name}:{out.key}",
                                                 "the model wrote nothing")
                write_rows(store, rows)

            with display.task(f"bench: {c.name} decoding {len(todo)} reviews in {len(plan.batches)} batch(es)",
                              plan.slots, "tokens") as decoding:
                if on_ray:
                    generate_on_ray(settings.run.ray_address, settings.run.ray_actors, str(model.path), model.device,
                                    model.dtype, model.label, plan, prompts, write, decoding.advance)
                else:
                    gen.run(plan, prompts, write, on_step=decoding.advance)


def _cache_scope(c: Candidate, settings: Settings) -> str | None:
    """Who may share the candidate's cached calls: a generation's ``generated_at`` is the time of a call made for
    that candidate, so a submitted model shares with nobody, and an operator candidate only with requests to the same
    endpoint with the same credentials (:mod:`grebench.llm._scope`)."""
    from grebench.llm import credential_scope, owner_scope

    if c.cache_owner is not None:
        return owner_scope(c.cache_owner)
    if c.isolated:
        return None  # ChatRequest gives an isolated request without an owner a namespace of its own
    return credential_scope(settings.data_path, c.api_key_env)


def _generate(store: Store, settings: Settings, run_id: str | None, llm: list[Candidate], splits: list[Split],
              papers: Papers, texts: dict[str, str], tally: _Tally, display: Progress, label: str) -> None:
    """The LLM candidates' missing reviews: local models in batches in this process, the others through their
    endpoints; with nothing to make (a poll that brought nothing new, a day of a replay) no model is pulled,
    loaded, locked or served, and the tallies count what is stored."""
    if not llm:
        return
    if not _llm_todo(store, settings, llm, splits, papers, texts):
        _tally_done(store, settings, llm, splits, papers, texts, tally)
        return
    batched, served = _batched(llm, settings.bench)
    if batched:  # each candidate shows its own progress, in decoded tokens
        _run_local_batches(store, settings, run_id, batched, splits, papers, texts, tally, display)
    if served:
        with candidate_endpoints(served, settings) as ready, \
                display.task(label, len(served) * len(splits), "reviews") as task:
            _run_llm(store, settings, run_id, ready, splits, papers, texts, tally, task)


def _row_args(job: _Job, flags: dict[str, Any] | None = None) -> _RowArgs:
    """:func:`make_row`'s arguments of ``job``, with ``flags`` (the call's) in place of the job's when given."""
    return {"candidate": job["candidate"], "paper_id": job["paper_id"], "prompt_version": job["prompt_version"],
            "params": job["params"], "source_review_id": job["source_review_id"],
            "flags": job["flags"] if flags is None else flags, "reviews_public_at": job["public_at"]}


def check_candidates(store: Store, settings: Settings, names: Collection[str] = ()) -> list[Candidate]:
    """Every candidate the bench would write for, checked without writing anything: the configured ones parse
    (:class:`CandidateError` otherwise), none takes the name of imported reviews, and each of ``names`` (the
    ``--candidate`` choice) is one of them (``ValueError`` naming the known ones otherwise)."""
    everyone = load_candidates(settings)
    check_names_free(store, everyone)
    known = [c.name for c in everyone]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown candidate(s): {', '.join(unknown)} (known: {', '.join(known)})")
    return everyone


def run_bench(store: Store, settings: Settings, run_id: str | None, candidate_names: list[str] | None = None,
              progress: Progress | None = None, paper_ids: Collection[str] | None = None,
              controls: Collection[str] | None = None) -> BenchRun:
    """Generate every missing review; return the summary (see ``grebench bench --json``).

    ``paper_ids`` limits the run to those papers (the main job's sample); None: every eligible paper.  ``controls``:
    the controls to write (the run's set: the core set or every default control); None: every default control.
    """
    everyone = check_candidates(store, settings, candidate_names or ())
    sync_candidates(store, everyone)
    wanted_controls = set(controls) if controls is not None else {e.name for e in CONTROLS if e.obj.default}
    chosen = [c for c in everyone if c.kind != CONTROL_KIND or c.name in wanted_controls]
    if candidate_names:
        known = {c.name: c for c in everyone}
        chosen = [known[n] for n in dict.fromkeys(candidate_names)]
    splits, skipped = make_splits(store, settings.seed)
    if paper_ids is not None:
        wanted = set(paper_ids)
        splits = [s for s in splits if s.paper_id in wanted]
    papers = load_papers(store)
    texts = review_texts(store, [r for s in splits for r in (s.candidate_review_id, *s.reference_review_ids)])
    tally = _Tally()
    display = progress or NoProgress()
    generated = [c for c in chosen if kind_info(c.kind).generated]  # not imported reviews (`grebench bench import`)
    deterministic = [c for c in generated if not c.needs_llm]
    llm = [c for c in generated if c.needs_llm]
    with display.task("bench: human baseline and controls", len(deterministic) * len(splits), "reviews") as task:
        _run_deterministic(store, deterministic, splits, papers, texts, settings.seed, tally, task)
    _generate(store, settings, run_id, llm, splits, papers, texts, tally, display, "bench: LLM reviews")
    for skip in tally.skipped_generations:
        log.info("no %s generation for %s: %s", skip["candidate"], skip["paper_id"], skip["reason"])
    store.checkpoint()
    names = [c.name for c in chosen]
    counts = {r["candidate"]: r["n"] for r in store.rows(
        f"SELECT candidate, count(*) AS n FROM generations WHERE status = 'ok' AND candidate IN "
        f"({', '.join('?' * len(names))}) GROUP BY candidate", names)}
    listed: list[CandidateCount] = [{"name": c.name, "kind": c.kind, "generations": counts.get(c.name, 0)}
                                    for c in chosen]
    return {
        "calls_made": tally.calls_made, "cached": tally.cached, "failed": tally.failed,
        "generations_total": sum(counts.values()), "tokens_in": tally.tokens_in, "tokens_out": tally.tokens_out,
        "cost_usd": round(tally.cost_usd, 6), "skipped_papers": skipped,
        "candidates": listed + ([] if candidate_names else _imported(store, {s.paper_id for s in splits})),
        "gave_up": tally.gave_up, "generations_written": tally.written,
        "skipped_generations": tally.skipped_generations, "papers_eligible": len(splits),
        "llm_controls": [c.name for c in chosen if c.kind == CONTROL_KIND and c.needs_llm],
    }


def _imported(store: Store, sample: set[str]) -> list[CandidateCount]:
    """The imported candidates (``grebench bench import``; the bench writes none of their reviews): how many
    papers they have a review of, and how many of those are among the papers this bench worked on
    (``sample_papers``)."""
    papers: dict[str, set[str]] = {}
    for r in store.rows("""SELECT c.name, g.paper_id FROM candidates c
                           LEFT JOIN generations g ON g.candidate = c.name AND g.status = 'ok'
                           WHERE c.kind = ? ORDER BY c.name""", [IMPORTED_KIND]):
        papers.setdefault(r["name"], set()).update([r["paper_id"]] if r["paper_id"] is not None else [])
    return [{"name": name, "kind": IMPORTED_KIND, "generations": len(ids), "sample_papers": len(ids & sample)}
            for name, ids in papers.items()]


def generate_for(store: Store, settings: Settings, run_id: str | None, candidates: list[Candidate],
                 paper_ids: list[str], clean_only: bool = False, progress: Progress | None = None) -> dict[str, float]:
    """Generate the missing LLM reviews of ``candidates`` for ``paper_ids`` (cached ones make no call).

    For papers the plain bench does not reach: papers whose human reviews are not public yet (no split: the
    contamination-proof, sealed generations), and submitted models.  The generation ids are those
    :func:`run_bench` computes, so it later finds them done.  ``clean_only`` leaves out pairs the candidate may
    have seen reviewed (cutoff on or after the release).
    """
    papers = load_papers(store)
    splits = {s.paper_id: s for s in make_splits(store, settings.seed)[0]}
    tally = _Tally()
    texts = review_texts(store, [s.candidate_review_id for s in splits.values()])
    display = progress or NoProgress()
    for c in candidates:
        wanted = [p for p in paper_ids if p in papers and (not clean_only or is_clean(c.cutoff, papers[p][1]))]
        # a paper without a split only needs its id: LLM candidates read the paper, not a human review
        rows = [splits.get(p) or Split(p, "", ()) for p in wanted]
        if rows:
            _generate(store, settings, run_id, [c], rows, papers, texts, tally, display, f"generate: {c.name}")
    store.checkpoint()
    return {"calls_made": tally.calls_made, "cached": tally.cached, "failed": tally.failed,
            "gave_up": tally.gave_up, "tokens_in": tally.tokens_in, "tokens_out": tally.tokens_out,
            "cost_usd": round(tally.cost_usd, 6)}

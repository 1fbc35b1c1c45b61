"""The main job's paper sample: all eligible papers, or a seeded sample stratified by venue and human rating.

A real evaluation-LM on a CPU scores a few dozen papers in minutes, not four hundred; the sample keeps the default
run short while keeping the spread of paper quality (strata: venue-year × tercile of the mean human rating, each
stratum sampled in proportion, largest remainders first).  The same seed, size and eligible papers give the same
sample on every machine.  The sample is recorded in ``paper_samples`` so boards say which papers they cover, and a
later job with the same seed keeps it (papers that are no longer eligible are replaced; a larger size adds papers): a
store that ``serve`` keeps updating does not reshuffle its sample when ratings are edited (:func:`draw_sample`).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from grebench.progress import Progress
from grebench.registry import Registry
from grebench.settings import ScoringSettings, Settings
from grebench.store import ReviewRecord, Store, utcnow

_NUMBER = re.compile(r"^\s*(-?\d+(?:\.\d+)?)")
_K = TypeVar("_K", str, tuple[str, int])


@dataclass(frozen=True)
class Sample:
    """The chosen papers (None: every eligible paper) and how they were chosen."""

    paper_ids: tuple[str, ...] | None
    description: str
    size: int | None
    eligible: int | None
    seed: int | None = None
    why: str = ""

    @property
    def sampled(self) -> bool:
        """Whether the job works on a sample rather than every eligible paper."""
        return self.paper_ids is not None


#: ``papers = auto`` with a language model on a CPU: at most this many papers, sized so that the whole default main
#: job (a local candidate writing reviews, GEM and GEM-S with the real evaluation LM, the local judge's exam and
#: votes) takes about :data:`AUTO_CPU_MINUTES` on the machine at hand (:func:`auto_cpu_size`).  With a GPU, or with
#: no local model, ``auto`` is every paper.
AUTO_CPU_PAPERS = 12
AUTO_CPU_MINUTES = 15.0
AUTO_MIN_PAPERS = 3

@dataclass(frozen=True)
class CostModel:
    """What the default main job costs on a CPU at the evaluation LM's rate ``r`` (tokens per second, the dtype
    probe's): ``fixed_s + fixed_tokens / r`` seconds whatever its size (model loads, the local judge's exam) plus
    ``paper_s + tokens_per_paper / r`` per paper (the candidate's review, the scoring of every candidate and control
    against every reference).  A model in tokens alone missed a CPU class by 2.3x: the part that does not follow the
    probe's rate (decoding reads weights more than it computes) is what differs between CPU classes."""

    fixed_s: float
    fixed_tokens: float
    paper_s: float
    tokens_per_paper: float

    def minutes(self, tokens_per_s: float, scoring: float = 1.0) -> tuple[float, float]:
        """(minutes whatever the size, minutes per paper) at ``tokens_per_s``; ``scoring``: what the scoring path
        costs over prefix reuse's, which the per-paper tokens were fitted with (:func:`scoring_factor`)."""
        rate = max(tokens_per_s, 1e-9)
        return ((self.fixed_s + self.fixed_tokens / rate) / 60,
                (self.paper_s + self.tokens_per_paper * scoring / rate) / 60)


#: The full validation (``validation = full``: every default control, GEM and GEM-S): fitted (issue 33 §3,
#: docs/results.md) to two default runs of 3 papers at the same code, stage by stage: the AMX Xeon at 1,572 bfloat16
#: tokens/s (job 567 s, 91 s a paper) and an AVX2-only EPYC at 462 float32 tokens/s (job 1,236 s, 149 s a paper),
#: less the local judge's exam tokens no longer read since its exam stops once it cannot pass (``1bd0f57``).
FULL_COST = CostModel(fixed_s=11.0, fixed_tokens=165_000, paper_s=67.0, tokens_per_paper=45_000)
#: The core set (``validation = core``, a CPU's default: GEM-S, the human baseline, the contestants and five core
#: controls), with the local candidate decoded in batches and no reuse probe (issue 47): fitted to the default run
#: of 12 papers from a fresh clone at 5173d81 on a quiet AVX-512 Xeon in float32 at 432 tokens/s (job 1,030 s: model
#: pull, probe and loads ~87 s, bench 167 s, score 517 s, panel 249 s of which the local judge's exam is most).
CORE_COST = CostModel(fixed_s=60.0, fixed_tokens=78_000, paper_s=14.0, tokens_per_paper=22_500)


def cost_model(core: bool) -> CostModel:
    """The cost model of the core set or of the full validation."""
    return CORE_COST if core else FULL_COST


#: The plan's range around that expectation: what one machine's repeated default runs spread over.
EXPECTED_SPREAD = (0.8, 1.25)


def expected_minutes(tokens_per_s: float, papers: int, core: bool = False,
                     scoring: float = 1.0) -> tuple[float, float]:
    """The main job's expected wall time (low, high) in minutes for ``papers`` papers on a machine whose evaluation
    LM reads ``tokens_per_s`` tokens per second (its dtype probe), with the core set or the full validation;
    ``scoring``: the scoring path's cost over prefix reuse's (:func:`scoring_factor`)."""
    fixed, per_paper = job_minutes(tokens_per_s, core, scoring)
    minutes = fixed + per_paper * papers
    return minutes * EXPECTED_SPREAD[0], minutes * EXPECTED_SPREAD[1]


def job_minutes(tokens_per_s: float, core: bool = False, scoring: float = 1.0) -> tuple[float, float]:
    """(minutes whatever the size, minutes per paper) of the default main job on a CPU whose evaluation LM reads
    ``tokens_per_s`` tokens per second (:class:`CostModel`)."""
    return cost_model(core).minutes(tokens_per_s, scoring)


#: What the plain forward path costs over prefix reuse on a CPU when no reuse probe has measured it here yet: the
#: reuse probe's median on the 2-core AVX-512 EPYC in bfloat16, 1.62x (4 interleaved rounds, 1.53-1.75; 2026-11-29).
#: The cost models' per-paper tokens were fitted to float32 runs, which score with prefix reuse (by FLOP count); in
#: bfloat16 reuse drifts from float32 more than the plain path does (0.43 against 0.31 nats per 100 scored tokens on
#: that machine) and is refused, so those runs score every prompt whole: three bfloat16 first runs there came in
#: 18-37 % over the plan's middle with the factor left out (docs/results.md).
PLAIN_OVER_REUSE = 1.62


def scoring_factor(scoring: ScoringSettings, spec: str, dtype: str | None,
                   records: Sequence[Mapping[str, Any]]) -> tuple[float, str]:
    """(the scoring path's cost over prefix reuse's, what the plan adds about it) for the plan and the automatic
    sample size: 1 where the job scores with prefix reuse; where it scores plain forwards, what this machine's reuse
    probe measured, or :data:`PLAIN_OVER_REUSE` before one has run.  On a CPU float32 reuses prefixes by FLOP count;
    another dtype is decided by the reuse probe at the score stage's start (its drift check), so before that probe has
    run here the plan expects the plain path, which every bfloat16 probe on record chose.  ``records``: this
    machine's reuse probes of the estimator (:func:`reuse_probe_records`).  The plan's words are only for that
    expectation: a setting or a probe is already stated by :func:`reuse_evidence`."""
    if not _local_model(spec) or scoring.hf_prefix_reuse == "on":
        return 1.0, ""
    measured = next((float(r["speedup"]) for r in records
                     if isinstance(r.get("speedup"), (int, float)) and r["speedup"] >= 1), None)
    plain = PLAIN_OVER_REUSE if measured is None else measured
    if scoring.hf_prefix_reuse == "off":
        return plain, ""
    from grebench.runtime import default_device

    if dtype == "float32" and default_device(scoring.hf_device) == "cpu":
        return 1.0, ""
    if records:
        return (1.0 if records[0].get("reuse") else plain), ""
    return plain, f"plain forward expected: scoring {plain:.2f}x reuse's time"


def measured_throughput(settings: Settings, spec: str, *, calibrate: bool = False, install: bool = False,
                        progress: Progress | None = None) -> tuple[float, str] | None:
    """(tokens per second, dtype) of a local-model estimator's forward pass on this machine, in the dtype it runs
    in: its dtype probe's measurement.  ``calibrate``: measure it now when nothing is cached (about 10-40 s) if the
    model is installed, or ``install`` it first; else None when nothing was measured here yet, or the estimator
    runs no model here."""
    if not _local_model(spec):
        return None
    from grebench.models import MODELS, ModelError, installed
    from grebench.runtime import cached_choice, choose_dtype

    _kind, arg = Registry.split(spec)
    try:
        if calibrate and arg in MODELS and not install and installed(settings, arg) is None:
            return None  # not installed, and this job may need no model at all: pull nothing for a size
        if calibrate:
            _dtype, record = choose_dtype(settings, arg, "cpu", "auto", progress, retake_busy=True)
        else:
            record = cached_choice(settings, arg) or {}
    except ModelError:
        return None
    dtype = settings.scoring.hf_dtype if settings.scoring.hf_dtype not in ("", "auto") else str(record.get("dtype", ""))
    rate = record.get(f"{dtype}_tok_s")
    return (float(rate), dtype) if isinstance(rate, (int, float)) and rate > 0 else None


def _dtype_record(settings: Settings, spec: str) -> dict[str, Any]:
    """This machine's stored dtype probe of a local-model estimator ({} for none, or no model run here)."""
    if not _local_model(spec):
        return {}
    from grebench.runtime import cached_choice

    _kind, arg = Registry.split(spec)
    try:
        return cached_choice(settings, arg) or {}
    except ImportError:
        return {}


def throughput_caveat(settings: Settings, spec: str) -> str:
    """What the plan adds after this machine's measured throughput when its dtype probe ran beside other work (it is
    measured again at the first start that finds the machine quiet: :func:`grebench.runtime.choose_dtype`); else
    nothing."""
    record = _dtype_record(settings, spec)
    if not record.get("busy"):
        return ""
    others = record.get("others_cores")
    loads = [x for x in (record.get("load_before"), record.get("load_after")) if isinstance(x, (int, float))]
    if isinstance(others, (int, float)):
        load = f"other processes took {others:.1f} of its {record.get('cores')} cores"
    else:
        load = f"load {max(loads):.1f} on {record.get('cores')} cores" if loads else "a busy machine"
    return f", beside other work ({load}; measured again at the next quiet start)"


def reuse_probe_records(settings: Settings, spec: str) -> list[dict[str, Any]]:
    """The reuse-probe records this machine cached for a local-model estimator (newest first)."""
    if not _local_model(spec):
        return []
    kind, arg = Registry.split(spec)
    from grebench.runtime import machine_key

    folder = settings.reuse_probes_path
    if not folder.is_dir():
        return []
    try:
        machine = machine_key()
    except ImportError:
        return []
    found = []
    for file in sorted(folder.glob("*.json")):
        try:
            record = json.loads(file.read_text(encoding="utf-8"))
            key = json.loads(record["key"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if str(key.get("estimator", "")).startswith(f"{kind}:{arg}@") and \
                all(key.get(k) == v for k, v in machine.items()):
            found.append(record)
    return sorted(found, key=lambda r: str(r.get("created_at", "")), reverse=True)


def reuse_evidence(settings: Settings, spec: str, dtype: str | None = None) -> str | None:
    """What the scoring path of a local-model estimator is on this machine and why (for the plan): decided by the
    FLOP count for float32 on a CPU (no probe runs), else its latest reuse probe; None for an estimator that runs no
    model here or when nothing was probed yet."""
    if not _local_model(spec):
        return None
    if settings.scoring.hf_prefix_reuse in ("on", "off"):
        path = 'prefix reuse' if settings.scoring.hf_prefix_reuse == 'on' else 'plain forward'
        return f"scoring path {path} (as set)"
    from grebench.runtime import default_device

    if dtype == "float32" and default_device(settings.scoring.hf_device) == "cpu":
        return "prefix reuse by FLOP count"
    records = reuse_probe_records(settings, spec)
    if not records:
        return None
    r = records[0]
    path = "prefix reuse" if r.get("reuse") else "plain forward"
    load = r.get("load_before")
    busy = ("; taken on a busy machine, re-taken on a quieter start" if r.get("busy") else "")
    where = f", load {load:.1f} on {r.get('cores')} cores" if isinstance(load, (int, float)) else ""
    evidence = str(r.get("why", "")).split("; drift", 1)[0]
    return f"scoring path {path} ({r.get('basis', 'timings')}: {evidence}; probed {r.get('created_at', '?')}" \
           f"{where}{busy})"


def dtype_basis(settings: Settings, spec: str) -> str:
    """How the evaluation LM's dtype was chosen on this machine, in a few words (for the plan); '' when unknown."""
    if not _local_model(spec):
        return ""
    if settings.scoring.hf_dtype not in ("", "auto"):
        return "dtype as set"
    record = _dtype_record(settings, spec)
    if record.get("decided_by") == "cpu flags":
        return "no bfloat16 instructions"
    speedup = record.get("speedup")
    return f"bfloat16 measured at {speedup:.2f}x float32" if isinstance(speedup, float) else ""


def _local_model(estimator_spec: str) -> bool:
    """Whether the estimator runs a language model in this process (an unknown one: no; the setup check says so)."""
    from grebench.scoring.estimators import estimator_info

    return estimator_info(estimator_spec).local_model


def parse_papers(value: str | int | None) -> int | None:
    """``all`` (or empty) and ``auto`` → None (no fixed size); a positive number → that many papers."""
    text = str(value if value is not None else "all").strip().lower()
    if text in ("", "all", "auto"):
        return None
    if not text.isdigit() or int(text) <= 0:
        raise ValueError(f"papers must be 'all', 'auto' or a positive number, got {value!r}")
    return int(text)


def uses_local_lm(settings: Settings, estimator_spec: str) -> bool:
    """Whether a run works with a language model on this machine (a local-model estimator, local candidates or
    judges)."""
    from grebench.pipeline._resolve import chosen_models

    _, local_candidates, local_judges = chosen_models(settings)
    return _local_model(estimator_spec) or bool(local_candidates) or bool(local_judges)


def papers_size(value: str | int | None, settings: Settings, estimator_spec: str,
                calibrate: bool = False, progress: Progress | None = None, core: bool = True) -> tuple[int | None, str]:
    """(sample size or None for every paper, why): ``auto`` is as many papers as fit :data:`AUTO_CPU_MINUTES` when
    a local language model runs on a CPU (:func:`auto_cpu_size`; ``calibrate``: install it to measure; ``core``:
    with the core set's costs, else the full validation's), else every paper."""
    if str(value if value is not None else "all").strip().lower() != "auto":
        return parse_papers(value), "as set"
    if not uses_local_lm(settings, estimator_spec):
        return None, "auto: no local language model, every paper"
    from grebench.runtime import default_device

    if default_device(settings.scoring.hf_device) != "cpu":
        return None, "auto: a GPU, every paper"
    if not _local_model(estimator_spec):  # local candidates or judges beside a fast estimator: the fixed size
        return AUTO_CPU_PAPERS, f"auto: a local language model on a CPU, {AUTO_CPU_PAPERS} papers"
    return auto_cpu_size(settings, estimator_spec, calibrate, progress, core)


def auto_cpu_size(settings: Settings, estimator_spec: str, calibrate: bool = False,
                  progress: Progress | None = None, core: bool = True) -> tuple[int, str]:
    """(papers, why) for ``papers = auto`` with a local evaluation LM on a CPU: the most papers (at most
    :data:`AUTO_CPU_PAPERS`, at least :data:`AUTO_MIN_PAPERS`) whose default run takes about
    :data:`AUTO_CPU_MINUTES` here, from the evaluation LM's throughput measured on this machine before anything is
    committed (its dtype probe, cached: the same machine always gets the same size, so a rerun repeats nothing);
    where even the smallest sample takes longer, the reason says how long, up front.  The probe runs when the model
    is installed, or with ``calibrate`` (``grebench run``: it installs it first); a job that may have nothing to do
    (serve's) pulls nothing, and without a measurement takes :data:`AUTO_MIN_PAPERS`."""
    measured = measured_throughput(settings, estimator_spec, calibrate=True, install=calibrate,
                                   progress=progress)
    if measured is None:
        return AUTO_MIN_PAPERS, (f"auto: a local language model on a CPU, {AUTO_MIN_PAPERS} papers (its throughput "
                                 "could not be measured here)")
    rate, dtype = measured
    factor = scoring_factor(settings.scoring, estimator_spec, dtype, reuse_probe_records(settings, estimator_spec))[0]
    fixed, per_paper = job_minutes(rate, core, factor)
    size = max(AUTO_MIN_PAPERS, min(AUTO_CPU_PAPERS, int((AUTO_CPU_MINUTES - fixed) // per_paper)))
    minutes = fixed + per_paper * size
    basis = (f"{rate:.0f} tokens/s measured here in {dtype}: {fixed:.1f} minutes, then {per_paper:.1f} per paper")
    if minutes > AUTO_CPU_MINUTES * 1.05:
        return size, (f"auto: a local language model on a CPU, {size} papers, the fewest that still rank: about "
                      f"{minutes:.0f} minutes here, longer than the {AUTO_CPU_MINUTES:.0f} aimed at: {basis}")
    return size, f"auto: a local language model on a CPU, {size} papers, about {minutes:.0f} minutes here: {basis}"

def _rating(texts: list[str | None]) -> float | None:
    values = [float(m.group(1)) for t in texts if t and (m := _NUMBER.match(t))]
    return sum(values) / len(values) if values else None


def draw_sample(store: Store, size: int | None, seed: int, why: str = "as set") -> Sample:
    """Draw the seeded sample of ``size`` papers (None: every eligible paper) from the papers that can have a human
    baseline (enough official reviews for a split: the bench stage makes the splits) and record it in
    ``paper_samples``.  Called once per job, by the resolver, before any stage of the job reads the sample.

    A sample is kept, not redrawn: the recorded sample's papers that are still eligible stay in it when it was drawn
    with the same seed (up to each venue-year's share of ``size``: a smaller size, or a venue-year that appeared
    since, keeps a stratified subset of them), and only the remaining places are drawn, from the papers not in it
    (:func:`_kept_and_drawn`).  A continuously updated store changes under the sampler (reviews
    edited, ratings changed, late reviews, new papers): redrawn each job, a rating edit that moved papers between
    terciles swapped sampled papers, and the boards, which keep every scored paper, then covered the union of
    several samples while naming one; a larger ``--papers`` likewise now adds papers to the ones already scored.
    A new seed draws afresh; a fresh store draws what it always drew."""
    from grebench.bench import MIN_REVIEWS

    rows = store.rows(f"""SELECT p.paper_id, p.venue_id, list(v.rating) AS ratings FROM papers p
                         JOIN reviews r ON r.paper_id = p.paper_id AND r.kind = '{ReviewRecord.OFFICIAL}'
                         LEFT JOIN review_versions v ON v.review_id = r.review_id AND v.version = r.latest_version
                         GROUP BY p.paper_id, p.venue_id HAVING count(DISTINCT r.review_id) >= ?
                         ORDER BY p.paper_id""", [MIN_REVIEWS])
    if size is None or size >= len(rows):
        store.con.execute("DELETE FROM paper_samples WHERE origin = 'run'")
        return Sample(None, "every eligible paper", len(rows), len(rows), seed, why)
    previous = set(_kept_papers(store, seed)) & {r["paper_id"] for r in rows}
    chosen = _stratified(rows, size, seed) if not previous else _kept_and_drawn(rows, previous, size, seed)
    description = (f"seeded sample of {size} of {len(rows)} papers, stratified by venue and rating tercile "
                   f"(seed {seed})")
    sample = Sample(tuple(sorted(chosen)), description, size, len(rows), seed, why)
    _record(store, sample, {r["paper_id"]: r["venue_id"] for r in rows})
    return sample


def _kept_papers(store: Store, seed: int) -> list[str]:
    """The papers of the recorded sample when it was drawn with this seed (else none)."""
    recorded = recorded_sample(store)
    return list(recorded.paper_ids or ()) if recorded.seed == seed else []


def _kept_and_drawn(rows: list[dict[str, Any]], previous: set[str], size: int, seed: int) -> list[str]:
    """A sample of ``size`` that keeps the ``previous`` papers: each venue-year gets its share of ``size`` (in
    proportion to its eligible papers, largest remainders first), holds its previous papers up to that share (a
    stratified subset where it has more: a venue that appeared since takes its share from the others) and draws the
    rest of it from its papers not in the sample."""
    by_venue: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_venue.setdefault(r["venue_id"], []).append(r)
    chosen: list[str] = []
    for venue, share in _shares({v: len(items) for v, items in by_venue.items()}, size).items():
        kept = [r for r in by_venue[venue] if r["paper_id"] in previous]
        if len(kept) > share:
            subset = set(_stratified(kept, share, seed))
            kept = [r for r in kept if r["paper_id"] in subset]
        taken = {r["paper_id"] for r in kept}
        chosen += sorted(taken) + _stratified([r for r in by_venue[venue] if r["paper_id"] not in taken],
                                              share - len(kept), seed)
    return chosen


def _shares(counts: Mapping[_K, int], size: int) -> dict[_K, int]:
    """``size`` split over the keys in proportion to their counts: floors first, then the largest remainders (ties
    by key)."""
    total = sum(counts.values())
    quota = {k: size * n / total for k, n in counts.items()}
    take = {k: int(q) for k, q in quota.items()}
    for k in sorted(quota, key=lambda k: (-(quota[k] - take[k]), k))[:size - sum(take.values())]:
        take[k] += 1
    return take


def _stratified(rows: list[dict[str, Any]], size: int, seed: int) -> list[str]:
    """``size`` papers of ``rows`` in proportion to their strata (venue-year × tercile of the mean human rating
    within the venue-year), largest remainders first, each stratum shuffled by its own seeded generator."""
    if size <= 0:
        return []
    strata: dict[tuple[str, int], list[str]] = {}
    by_venue: dict[str, list[tuple[float, str]]] = {}
    for r in rows:
        by_venue.setdefault(r["venue_id"], []).append((_rating(r["ratings"] or []) or 0.0, r["paper_id"]))
    for venue, items in by_venue.items():
        items.sort()
        for i, (_, pid) in enumerate(items):  # terciles of the mean rating within the venue-year
            strata.setdefault((venue, 3 * i // len(items)), []).append(pid)
    take = _shares({k: len(v) for k, v in strata.items()}, size)
    chosen: list[str] = []
    for key in sorted(strata):
        members = sorted(strata[key])
        random.Random(f"{seed}:sample:{key[0]}:{key[1]}").shuffle(members)
        chosen += members[:take[key]]
    return chosen


def recorded_sample(store: Store) -> Sample:
    """The sample the last job that scored worked on, as ``paper_samples`` holds it (a reader of the stored scores
    works on the same papers); every paper when none was recorded.  Only this store's own jobs' rows count: a
    sample that came with an imported snapshot is never this store's (see :func:`adopt_snapshot_sample`)."""
    rows = store.rows("SELECT paper_id, sample_json FROM paper_samples WHERE origin = 'run' ORDER BY paper_id")
    if not rows:
        return Sample(None, "every eligible paper", None, None, None, "as recorded")
    try:
        info = json.loads(rows[0]["sample_json"])
    except (TypeError, ValueError):
        info = None
    if not isinstance(info, dict):
        info = {}
    seed = info.get("seed")  # recorded since the sample is kept across jobs; older rows have none
    return Sample(tuple(r["paper_id"] for r in rows), str(info.get("description", "")), info.get("size"),
                  info.get("eligible"), seed if isinstance(seed, int) else None, "as recorded")


def _record(store: Store, sample: Sample, venue_of: dict[str, str]) -> None:
    info = json.dumps({"description": sample.description, "size": sample.size, "eligible": sample.eligible,
                       "seed": sample.seed})
    with store.transaction() as con:
        con.execute("DELETE FROM paper_samples WHERE origin = 'run'")
        store.insert_rows("paper_samples", ("venue_id", "paper_id", "sample_json", "created_at", "origin"),
                          [[venue_of[p], p, info, utcnow(), "run"] for p in sample.paper_ids or ()])


def outside_sample(store: Store, paper_ids: Collection[str]) -> tuple[list[str], int | None]:
    """Which of ``paper_ids`` the recorded sample (the papers the boards compare candidates on) leaves out, and the
    sample's size; none, and None, when the last job worked on every paper."""
    sample = recorded_sample(store).paper_ids
    if sample is None:
        return [], None
    return sorted(set(paper_ids) - set(sample)), len(sample)


def adopt_snapshot_sample(store: Store) -> Sample:
    """Make the sample an imported snapshot recorded this store's own and return it.  Only for a store that holds
    nothing but that snapshot (``grebench snapshot rebuild``'s temporary store): anywhere else an imported sample
    stays the snapshot's (``origin = 'snapshot'``) and no reader of this store's numbers sees it."""
    with store.transaction() as con:
        con.execute("DELETE FROM paper_samples WHERE origin = 'run'")
        con.execute("UPDATE paper_samples SET origin = 'run' WHERE origin = 'snapshot'")
    return recorded_sample(store)

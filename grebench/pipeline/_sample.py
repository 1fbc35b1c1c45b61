"""The main job's paper sample: all eligible papers, or a seeded sample stratified by venue and human rating.

A real evaluation-LM on a CPU scores a few dozen papers in minutes, not four hundred; the sample keeps the default
run short while keeping the spread of paper quality (strata: venue-year × tercile of the mean human rating, each
stratum sampled in proportion, largest remainders first).  The same seed, size and eligible papers give the same
sample on every machine.  The sample is recorded in ``paper_samples`` so boards say which papers they cover.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from typing import Any

from grebench.registry import Registry
from grebench.settings import Settings
from grebench.store import Store, utcnow

_NUMBER = re.compile(r"^\s*(-?\d+(?:\.\d+)?)")


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

#: Minutes the default run of :data:`AUTO_CPU_PAPERS` papers takes on 2 cores, per CPU class (what runs fast there):
#: measured on an Intel Xeon with AMX (12.6 and 13.1 minutes from a fresh clone, README) and an AMD EPYC with
#: AVX-512-BF16 and no AMX (23.5 minutes); a CPU with neither runs only float32, which the dtype probe measured
#: 1.76x slower than bfloat16 on that EPYC: 41 minutes (on a 2-core AVX2-only EPYC beside another job the bench
#: stage alone ran 33 minutes).  A CPU with more cores is taken to scale with them.
CLASS_MINUTES = {"amx": 13.0, "avx512-bf16": 23.5, "float32": 41.0}
_CLASS_WORDS = {"amx": "an AMX CPU", "avx512-bf16": "an AVX-512-BF16 CPU without AMX",
                "float32": "a CPU that runs only float32 fast (estimated)"}


#: Calibration of the plan's range, measured on the default run (ICLR 2026, a local candidate, the controls, GEM and
#: GEM-S) on 2-core machines: 918 evaluation-LM requests for 12 papers (266 for 3); a scored request costs 2.8 probe
#: requests (0.70 s against the reuse probe's 0.25 s per request on the same machine: real reviews are longer than
#: the probe's); the whole job took 1.6-2.1x its score stage (the local candidate's reviews, the judge's exam and
#: votes), a loaded machine more.
REQUESTS_PER_PAPER = 76
PROBE_TO_REQUEST = 2.8
JOB_OVER_SCORE = (1.6, 2.4)


def expected_minutes(seconds_per_request: float, papers: int) -> tuple[float, float]:
    """The main job's expected wall time (low, high) in minutes from the probe's seconds per request measured on
    this machine."""
    score = seconds_per_request * PROBE_TO_REQUEST * REQUESTS_PER_PAPER * papers
    return score * JOB_OVER_SCORE[0] / 60, score * JOB_OVER_SCORE[1] / 60


def _probe_records(settings: Settings, spec: str) -> list[dict[str, Any]]:
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


def measured_seconds_per_request(settings: Settings, spec: str) -> float | None:
    """Seconds per evaluation-LM request that this machine measured for a local-model estimator (its reuse probe,
    cached under the models directory by an earlier run), or None when nothing was measured here yet."""
    best: float | None = None
    for record in _probe_records(settings, spec):
        seconds = (record["reuse_s"] if record.get("reuse") else record["plain_s"]) / max(1, record["requests"])
        best = seconds if best is None else min(best, seconds)
    return best


def reuse_evidence(settings: Settings, spec: str) -> str | None:
    """What the scoring path of a local-model estimator is on this machine and why, from its latest reuse probe
    (for the plan line); None for an estimator that runs no model here or when nothing was probed yet."""
    records = _probe_records(settings, spec)
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
    return (_local_model(estimator_spec) or bool(settings.listed("local_candidates"))
            or bool(settings.listed("local_judges")))


def papers_size(value: str | int | None, settings: Settings, estimator_spec: str) -> tuple[int | None, str]:
    """(sample size or None for every paper, why): ``auto`` is :data:`AUTO_CPU_PAPERS` when a local language model
    runs on a CPU, else every paper."""
    if str(value if value is not None else "all").strip().lower() != "auto":
        return parse_papers(value), "as set"
    if not uses_local_lm(settings, estimator_spec):
        return None, "auto: no local language model, every paper"
    from grebench.runtime import default_device

    if default_device(settings.hf_device) != "cpu":
        return None, "auto: a GPU, every paper"
    if not _local_model(estimator_spec):  # local candidates or judges beside a fast estimator: the fixed size
        return AUTO_CPU_PAPERS, f"auto: a local language model on a CPU, {AUTO_CPU_PAPERS} papers"
    return auto_cpu_size(settings)


def cpu_class(settings: Settings) -> str:
    """What runs fast on this CPU: ``amx``, ``avx512-bf16`` (bfloat16 without AMX) or ``float32`` (neither, or
    ``hf_dtype = float32`` set)."""
    from grebench.runtime import cpu_flags

    flags = set(cpu_flags())
    if settings.hf_dtype == "float32":
        return "float32"
    if "amx_bf16" in flags:
        return "amx"
    return "avx512-bf16" if "avx512_bf16" in flags else "float32"


def auto_cpu_size(settings: Settings) -> tuple[int, str]:
    """(papers, why) for ``papers = auto`` with a local evaluation LM on a CPU: the most papers (at most
    :data:`AUTO_CPU_PAPERS`, at least :data:`AUTO_MIN_PAPERS`) whose default run takes about
    :data:`AUTO_CPU_MINUTES` here, from the CPU class's measured minutes and the usable cores.  The same machine
    always gets the same size (a rerun repeats nothing); where even the smallest sample takes longer, the reason
    says how long, up front."""
    from grebench.runtime import usable_cores

    klass = cpu_class(settings)
    cores = usable_cores()
    per_paper = CLASS_MINUTES[klass] / AUTO_CPU_PAPERS * 2 / max(2, cores)
    size = max(AUTO_MIN_PAPERS, min(AUTO_CPU_PAPERS, int(AUTO_CPU_MINUTES // per_paper)))
    minutes = per_paper * size
    basis = f"{_CLASS_WORDS[klass]}, {cores} usable cores, {per_paper:.1f} minutes per paper"
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
    ``paper_samples``.  Called once per job, by the resolver, before any stage of the job reads the sample."""
    from grebench.bench import MIN_REVIEWS

    rows = store.rows("""SELECT p.paper_id, p.venue_id, list(v.rating) AS ratings FROM papers p
                         JOIN reviews r ON r.paper_id = p.paper_id AND r.kind = 'official_review'
                         LEFT JOIN review_versions v ON v.review_id = r.review_id AND v.version = r.latest_version
                         GROUP BY p.paper_id, p.venue_id HAVING count(DISTINCT r.review_id) >= ?
                         ORDER BY p.paper_id""", [MIN_REVIEWS])
    if size is None or size >= len(rows):
        store.con.execute("DELETE FROM paper_samples")
        return Sample(None, "every eligible paper", len(rows), len(rows), seed, why)
    strata: dict[tuple[str, int], list[str]] = {}
    by_venue: dict[str, list[tuple[float, str]]] = {}
    for r in rows:
        by_venue.setdefault(r["venue_id"], []).append((_rating(r["ratings"] or []) or 0.0, r["paper_id"]))
    for venue, items in by_venue.items():
        items.sort()
        for i, (_, pid) in enumerate(items):  # terciles of the mean rating within the venue-year
            strata.setdefault((venue, 3 * i // len(items)), []).append(pid)
    quota = {k: size * len(v) / len(rows) for k, v in strata.items()}
    take = {k: int(q) for k, q in quota.items()}
    for k in sorted(quota, key=lambda k: (-(quota[k] - take[k]), k))[:size - sum(take.values())]:
        take[k] += 1
    chosen: list[str] = []
    for key in sorted(strata):
        members = sorted(strata[key])
        random.Random(f"{seed}:sample:{key[0]}:{key[1]}").shuffle(members)
        chosen += members[:take[key]]
    description = (f"seeded sample of {size} of {len(rows)} papers, stratified by venue and rating tercile "
                   f"(seed {seed})")
    sample = Sample(tuple(sorted(chosen)), description, size, len(rows), seed, why)
    _record(store, sample, {r["paper_id"]: r["venue_id"] for r in rows})
    return sample


def recorded_sample(store: Store) -> Sample:
    """The sample the last job that scored worked on, as ``paper_samples`` holds it (a reader of the stored scores
    works on the same papers); every paper when none was recorded."""
    rows = store.rows("SELECT paper_id, sample_json FROM paper_samples ORDER BY paper_id")
    if not rows:
        return Sample(None, "every eligible paper", None, None, None, "as recorded")
    info = json.loads(rows[0]["sample_json"])
    return Sample(tuple(r["paper_id"] for r in rows), str(info.get("description", "")), info.get("size"),
                  info.get("eligible"), None, "as recorded")


def _record(store: Store, sample: Sample, venue_of: dict[str, str]) -> None:
    info = json.dumps({"description": sample.description, "size": sample.size, "eligible": sample.eligible})
    with store.transaction() as con:
        con.execute("DELETE FROM paper_samples")
        store.insert_rows("paper_samples", ("venue_id", "paper_id", "sample_json", "created_at"),
                          [[venue_of[p], p, info, utcnow()] for p in sample.paper_ids or ()])

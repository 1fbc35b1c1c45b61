"""When the panel may skip a venue-year: a fingerprint of everything its results depend on.

The fingerprint covers the venue's papers (metadata and extracted text), human reviews (latest versions), current
generations (ids and texts), baseline splits, candidates (families), every stored score, the judges' configuration,
the setup and metric the gem judge reads, the job's sample, the panel's settings, :data:`PANEL_VERSION` and the
panel package's own source files.  It is stored in ``stage_state`` once a venue-year's results are written, with the
summary the run reported; a later run with the same fingerprint returns that summary, makes no call and writes
nothing.  A run whose votes were not all answered (an LLM judge failed) is not recorded, so the next run asks again.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from grebench.scoring import ScoredSetup
from grebench.settings import Settings, StageInputs
from grebench.store import Store, code_files
from grebench.store import fingerprint as fingerprint_of

if TYPE_CHECKING:
    from grebench.panel._run import VenuePart

STAGE = "panel"
#: Bump when the panel's computation changes, so stored results are recomputed.
PANEL_VERSION = "panel-v3"

_QUERIES = (
    ("papers", """SELECT count(*), bit_xor(hash(p.paper_id, p.title, p.abstract, p.content_sha256, t.pdf_sha256,
                                              t.status, t.text))
                  FROM papers p LEFT JOIN paper_texts t ON t.paper_id = p.paper_id WHERE p.venue_id = ?"""),
    ("reviews", """SELECT count(*), bit_xor(hash(r.review_id, r.paper_id, r.kind, v.version, v.content_sha256, v.text,
                                               v.rating))
                   FROM reviews r JOIN review_versions v ON v.review_id = r.review_id AND v.version = r.latest_version
                   JOIN papers p ON p.paper_id = r.paper_id WHERE p.venue_id = ?"""),
    ("generations", """SELECT count(*), bit_xor(hash(g.generation_id, g.candidate, g.paper_id, g.status, g.text,
                                                   g.source_review_id, g.generated_at))
                       FROM generations g JOIN papers p ON p.paper_id = g.paper_id WHERE p.venue_id = ?"""),
    ("splits", """SELECT count(*), bit_xor(hash(s.paper_id, s.candidate_review_id, s.reference_review_ids_json))
                  FROM baseline_splits s JOIN papers p ON p.paper_id = s.paper_id WHERE p.venue_id = ?"""),
)
_GLOBAL = (
    ("candidates", "SELECT count(*), bit_xor(hash(name, kind, family)) FROM candidates"),
    # all scores: the gem judge reads scores of every venue (its floors, the stored exam texts)
    ("scores", """SELECT count(*), bit_xor(hash(metric, estimator, preprocessor, generation_id, candidate, paper_id,
                                              reference_review_id, pmi)) FROM scores"""),
)


#: The settings a panel's results depend on, each one's value in the fingerprint (its declared inputs, not a list
#: kept by hand at the call: ``tests/panel/test_panel_inputs.py`` runs a panel, records every setting it reads and
#: fails on one that is neither here nor in :data:`OPERATIONAL`, then changes each input and sees the panel run again).
INPUTS = ("seed", "exam_pairs", "exam_llm_pairs", "panel_pairs_per_paper", "panel_llm_pairs_per_paper",
          "bootstrap_samples", "debate_rounds", "judges_see_machine_metrics", "local_judges")
#: The inputs of :data:`INPUTS` the job resolves and passes to the panel (``run_panel(..., local_judges=...)``):
#: their value in the fingerprint is the one the panel used, never the setting's (an option or a resolved run may
#: differ from it), and the panel never reads them from the settings.
JOB_INPUTS = ("local_judges",)
#: What a local judge's verdicts also depend on (the model's numerics: device, dtype, how its server is sent calls);
#: in the fingerprint only when the job's ``local_judges`` name one, so they do not rerun a panel that has none.  Not
#: ``local_batch_mib``: a judge's server has no batching KV cache to size (issue 47), and the test above fails if the
#: judge reads it again.
LOCAL_JUDGE_INPUTS = ("hf_device", "hf_dtype", "local_streams")
#: The ``[[tables]]`` of the configuration the panel reads: ``[[judges]]`` (its LLM judges).
TABLE_INPUTS = ("judges",)
#: Settings the panel reads that do not change its results: how LLM calls are made and cached, where files live,
#: logging, how local servers are started.  A setting moved here must not change a vote, a verdict or a ranking.
OPERATIONAL = ("data_dir", "llm_timeout_s", "llm_idle_timeout_s", "llm_max_retries", "llm_max_retry_after_s",
               "llm_max_response_chars", "bench_concurrency", "local_server_port", "local_server_startup_s",
               "vllm_python")


#: The panel's declaration (:class:`grebench.settings.StageInputs`, what every stage's fingerprint is composed from:
#: issue 61).  A job without a local judge fingerprints :data:`INPUTS` alone: there :data:`LOCAL_JUDGE_INPUTS`
#: change no result (no local model judges), so they are operational.
PANEL_INPUTS = StageInputs(INPUTS + LOCAL_JUDGE_INPUTS, operational=OPERATIONAL, job=JOB_INPUTS, tables=TABLE_INPUTS)
_NO_LOCAL_JUDGE = StageInputs(INPUTS, operational=OPERATIONAL + LOCAL_JUDGE_INPUTS, job=JOB_INPUTS,
                              tables=TABLE_INPUTS)


def inputs(settings: Settings, local_judges: Sequence[str]) -> dict[str, Any]:
    """The declared inputs' values (:data:`INPUTS`, :data:`LOCAL_JUDGE_INPUTS` when the job has a local judge,
    :data:`TABLE_INPUTS`); those of :data:`JOB_INPUTS` are the job's (``local_judges``: the panel's local judges)."""
    declared = PANEL_INPUTS if local_judges else _NO_LOCAL_JUDGE
    return settings.inputs(declared, {"local_judges": list(local_judges)})


def fingerprint(store: Store, settings: Settings, venue_id: str, judge_names: Sequence[str] | None,
                exam_only: bool, setup: ScoredSetup | None, metric: str | None,
                sample: Collection[str] | None, bounded_exam: bool = False, *, local_judges: Sequence[str]) -> str:
    """Hash of the venue-year's inputs, the judges, the setup and metric the gem judge reads, the job's sample (the
    papers passed in), the panel's declared inputs (:func:`inputs`, with the job's ``local_judges``) and the code
    version."""
    queries = {name: (sql, [venue_id]) for name, sql in _QUERIES}
    queries.update({name: (sql, []) for name, sql in _GLOBAL})
    values = {
        "version": PANEL_VERSION, "venue": venue_id, "exam_only": exam_only,
        "judge_names": sorted(judge_names or []),
        "setup": None if setup is None else setup.as_json(), "metric": metric,
        "sample": None if sample is None else sorted(sample),
        "settings": inputs(settings, local_judges),
    }
    if bounded_exam:  # only when set, so a full exam's fingerprint stays what it was
        values["bounded_exam"] = True
    return fingerprint_of(store, queries=queries, values=values, code=code_files(Path(__file__).parent))


def scope(venue_id: str, exam_only: bool) -> str:
    """The ``stage_state`` scope of a venue-year (the exam alone is kept apart from a full panel run)."""
    return f"{venue_id}#exam" if exam_only else venue_id


def stored(store: Store, venue_id: str, exam_only: bool, print_: str) -> VenuePart | None:
    """The summary stored for this venue-year when its fingerprint is ``print_`` and its results are still there."""
    state = store.stage_state(STAGE, scope(venue_id, exam_only))
    if state is None or state[0] != print_ or not state[1]:
        return None
    summary = state[1]
    exams = store.scalar("SELECT count(*) FROM judge_exams WHERE venue_id = ?", [venue_id])
    if exams != len(summary.get("exam", [])):
        return None
    if not exam_only and store.scalar("SELECT count(*) FROM panel_rankings WHERE venue_id = ?",
                                      [venue_id]) != len(summary.get("rankings", [])):
        return None
    return cast("VenuePart", summary)  # the part :func:`remember` stored


def remember(store: Store, venue_id: str, exam_only: bool, print_: str, summary: VenuePart) -> None:
    """Record a finished venue-year (call only when every vote was answered)."""
    store.set_stage_state(STAGE, scope(venue_id, exam_only), print_, summary)

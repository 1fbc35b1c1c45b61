"""`grebench run`: the main job — ingest → bench → scoring → panel → validation → site — then the leaderboard.

Every stage is idempotent and keeps its progress in the store, so a rerun (or a run after a crash) repeats no
LLM or estimator call. A stage that fails is recorded on the run and the later stages still run on what is stored.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Callable

import click

from grebench.cli._common import Progress, emit_json, show_progress, writer_store
from grebench.cli._options import settings_options
from grebench.settings import Settings
from grebench.store import Store

StageFn = Callable[[Store, Settings, str, bool], dict[str, Any]]


class RunOptions:
    """What the user chose for this run."""

    def __init__(self, source: str, estimator: str, preprocessor: str, metrics: list[str]) -> None:
        self.source = source
        self.estimator = estimator
        self.preprocessor = preprocessor
        self.metrics = metrics


def _ingest(opts: RunOptions) -> StageFn:
    def stage(store: Store, settings: Settings, run_id: str, progress: bool) -> dict[str, Any]:
        from grebench.ingest import resolve_source, run_ingest

        with Progress(f"ingest {opts.source}", None, progress) as bar:
            summary = run_ingest(resolve_source(opts.source, settings), store, settings, run_id, on_item=bar.advance)
        return summary.as_json(store)

    return stage


def _bench(opts: RunOptions) -> StageFn:
    def stage(store: Store, settings: Settings, run_id: str, progress: bool) -> dict[str, Any]:
        from grebench.bench import run_bench

        with Progress("bench", None, progress) as bar:
            return run_bench(store, settings, run_id, progress=bar.advance)

    return stage


def _score(opts: RunOptions) -> StageFn:
    def stage(store: Store, settings: Settings, run_id: str, progress: bool) -> dict[str, Any]:
        from grebench.scoring import run_scoring

        return run_scoring(store, settings, run_id, opts.metrics, opts.estimator, opts.preprocessor)

    return stage


def _panel(opts: RunOptions) -> StageFn:
    def stage(store: Store, settings: Settings, run_id: str, progress: bool) -> dict[str, Any]:
        from grebench.scoring.panel import run_panel

        return run_panel(store, settings, run_id)

    return stage


def _validate(opts: RunOptions) -> StageFn:
    def stage(store: Store, settings: Settings, run_id: str, progress: bool) -> dict[str, Any]:
        from grebench.scoring._validate import latest_setup, store_report, validation_rows

        estimator_id, preprocessor_id = latest_setup(store, opts.estimator, opts.preprocessor)
        scope = f"{estimator_id}|{preprocessor_id}|{','.join(opts.metrics)}"
        print_ = _validation_fingerprint(store, settings, estimator_id, preprocessor_id)
        state = store.stage_state("validate", scope)
        if state is not None and state[0] == print_ and state[1] is not None:  # same scores: same report
            return {"estimator": estimator_id, "preprocessor": preprocessor_id, "rows": state[1]["rows"],
                    "unchanged": True}
        rows = validation_rows(store, estimator_id, preprocessor_id, opts.metrics, settings.bootstrap_samples,
                               settings.seed)
        store_report(store, run_id, estimator_id, preprocessor_id, rows)
        store.set_stage_state("validate", scope, print_, {"rows": rows})
        return {"estimator": estimator_id, "preprocessor": preprocessor_id, "rows": rows, "unchanged": False}

    return stage


def _validation_fingerprint(store: Store, settings: Settings, estimator_id: str, preprocessor_id: str) -> str:
    """What the validation report depends on: that setup's scores, the candidates, the settings and the code."""
    import hashlib
    import json
    from pathlib import Path

    from grebench.scoring import _validate

    scores = store.con.execute(
        """SELECT count(*), bit_xor(hash(metric, candidate, paper_id, reference_review_id, generation_id, pmi))
           FROM scores WHERE estimator = ? AND preprocessor = ?""", [estimator_id, preprocessor_id]).fetchone()
    candidates = store.con.execute("SELECT count(*), bit_xor(hash(name, kind)) FROM candidates").fetchone()
    code = hashlib.sha256(Path(_validate.__file__).read_bytes()).hexdigest()
    blob = json.dumps([list(scores or ()), list(candidates or ()), settings.bootstrap_samples, settings.seed, code],
                      default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def _site(opts: RunOptions) -> StageFn:
    def stage(store: Store, settings: Settings, run_id: str, progress: bool) -> dict[str, Any]:
        from grebench.site import build_site

        result = build_site(store, settings, settings.site_path)
        result["out"] = str(settings.site_path.resolve())  # a skipped rebuild reports the stored summary
        return result

    return stage


STAGES: list[tuple[str, Callable[[RunOptions], StageFn]]] = [
    ("ingest", _ingest), ("bench", _bench), ("score", _score), ("panel", _panel), ("validate", _validate),
    ("site", _site),
]


def _leaderboards(store: Store, settings: Settings, summary: dict[str, Any]) -> list[dict[str, Any]]:
    from grebench.scoring import leaderboard

    validation = summary["stages"].get("validate", {})
    estimator, preprocessor = validation.get("estimator"), validation.get("preprocessor")
    if not estimator:
        return []
    return [{"metric": metric, "estimator": estimator, "preprocessor": preprocessor,
             "rows": leaderboard(store, metric, estimator, preprocessor, settings.bootstrap_samples, settings.seed)}
            for metric in summary["metrics"]]


def _print(summary: dict[str, Any]) -> None:
    from grebench.cli.validate import print_report

    ingest = summary["stages"].get("ingest", {})
    if "papers_total" in ingest:
        click.echo(f"papers: {ingest['papers_total']} ({ingest['papers_added']} new), reviews: "
                   f"{ingest['reviews_total']} ({ingest['reviews_added']} new)")
    bench = summary["stages"].get("bench", {})
    if "candidates" in bench:
        click.echo(f"candidates: {len(bench['candidates'])}; generations: {bench['generations_total']}; LLM calls "
                   f"made {bench['calls_made']}, cached {bench['cached']}, failed {bench['failed']}")
    score = summary["stages"].get("score", {})
    if "pairs_scored" in score:
        click.echo(f"pairs scored: {score['pairs_scored']}; estimator calls {score['estimator_calls']}, "
                   f"cache hits {score['cache_hits']} ({score['estimator']}, {score['preprocessor']})")
    for board in summary["leaderboards"]:
        click.echo(f"\n{board['metric']} — estimator {board['estimator']} — preprocessor {board['preprocessor']}")
        click.echo(f"{'rank':>9}  {'candidate':<34} {'score':>8}  {'95% CI':>19}  {'papers':>6}  vs human")
        for r in board["rows"]:
            mark = {"human": " [human baseline]", "control": " [control]"}.get(r["kind"], "")
            vs = "" if r["diff_vs_human"] is None else f"{r['diff_vs_human']:+.2f} (p={r['p_vs_human']:.3f})"
            rank = f"{r['rank']} [{r['rank_low']:.0f}-{r['rank_high']:.0f}]"
            click.echo(f"{rank:>9}  {r['candidate'] + mark:<34} {r['score']:>8.2f}  "
                       f"[{r['ci95_low']:>7.2f}, {r['ci95_high']:>7.2f}]  {r['papers']:>6}  {vs}")
    validation = summary["stages"].get("validate", {})
    if validation.get("rows"):
        click.echo("")
        print_report(validation["rows"], validation["estimator"], validation["preprocessor"])
    _print_panel(summary["stages"].get("panel", {}))
    site = summary["stages"].get("site", {})
    if site.get("out"):
        click.echo(f"\nsite: {site['out']}/index.html ({site.get('pages', 0)} pages"
                   f"{', unchanged' if site.get('unchanged') else ''})")
    click.echo("\nseconds per stage: " + ", ".join(f"{k} {v:.1f}" for k, v in summary["seconds"].items()))
    for failure in summary["failures"][:10]:
        click.echo(f"failed: [{failure['stage']}] {failure['item']}: {failure['reason']}", err=True)


def _print_panel(panel: dict[str, Any]) -> None:
    """The judge exam, the panel's Bradley–Terry ranking and its agreement with GEM-S."""
    if not panel.get("exam"):
        return
    click.echo("\njudge exam (reference judges need no LLM; eta = mean over judges)")
    click.echo(f"{'judge':<12}{'P_c':>6}{'P_p':>6}{'P_s':>5}  {'passed':<7}{'weight':>7}  failed")
    for r in panel["exam"]:
        passed = "yes" if r["passed"] else "no"
        click.echo(f"{r['judge']:<12}{r['p_c']:>6.2f}{r['p_p']:>6.2f}{r['p_s']:>5.0f}  {passed:<7}{r['weight']:>7.2f}"
                   f"  {', '.join(r['failed']) or '-'}")
    if panel.get("rankings"):
        click.echo("\npanel ranking (Bradley–Terry over qualified judges' weighted votes, 95% CI over papers)")
        for r in panel["rankings"]:
            gem = "" if r.get("gem_score") is None else f"   GEM-S {r['gem_score']:+.2f}"
            click.echo(f"{r['rank']:>4}  {r['candidate']:<24}{r['strength']:>7.2f}  "
                       f"[{r['ci95_low']:.2f}, {r['ci95_high']:.2f}]{gem}")
    for a in panel.get("agreement") or []:
        click.echo(f"agreement with {a['gem_metric']}: Kendall tau {a['kendall_tau']:+.2f}, same direction on "
                   f"{a['pair_agreement']:.1%} of {a['n_pairs']} paper-pairs "
                   f"({len(a.get('disagreements', []))} largest disagreements listed on the site)")


@click.command("run")
@click.option("--source", default="bundled", show_default=True, help="bundled | archive:PATH | openreview:VENUE_ID")
@click.option("--estimator", default=None, help="offline | hf:PATH | vllm:URL | sglang:URL (default: setting).")
@click.option("--preprocessor", default=None, help="rules | imported | litellm:MODEL (default: setting).")
@click.option("--metric", "metrics", multiple=True, default=("gem", "gem-s"), show_default=True,
              type=click.Choice(("gem", "gem-s", "gem-s-assw", "gem-raw")), help="Metrics to score (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print the final summary as JSON.")
@settings_options
@click.pass_obj
def command(settings: Settings, source: str, estimator: str | None, preprocessor: str | None,
            metrics: tuple[str, ...], as_json: bool) -> None:
    """Run the main job on a source (default: the bundled ICLR 2020 sample) and print the leaderboard."""
    opts = RunOptions(source, estimator or settings.estimator, preprocessor or settings.preprocessor, list(metrics))
    summary: dict[str, Any] = {"source": source, "metrics": list(metrics), "stages": {}, "seconds": {}}
    with writer_store(settings) as store:
        run_id = store.start_run("run", {"source": source, "estimator": opts.estimator,
                                         "preprocessor": opts.preprocessor, "metrics": list(metrics)})
        for name, make in STAGES:
            if not as_json:
                click.echo(f"[{name}]", err=True)
            started = time.perf_counter()
            try:
                summary["stages"][name] = make(opts)(store, settings, run_id, show_progress(as_json))
            except Exception as exc:  # a failed stage is recorded; later stages run on what is stored
                reason = f"{type(exc).__name__}: {exc}"
                store.record_failure(run_id, name, None, reason)
                summary["stages"][name] = {"error": reason}
                if name == "ingest" and not store.scalar("SELECT count(*) FROM papers"):
                    break
            finally:
                summary["seconds"][name] = round(time.perf_counter() - started, 3)
                store.checkpoint()
        summary["leaderboards"] = _leaderboards(store, settings, summary)
        summary["failures"] = store.run_failures(run_id)
        summary["run_id"] = run_id
        status = store.finish_run(run_id, {k: v for k, v in summary.items() if k != "leaderboards"})
    if as_json:
        emit_json(summary)
    else:
        _print(summary)
    if status != "ok":
        sys.exit(1)

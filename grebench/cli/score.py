"""`grebench score`: GEM / GEM-S scores of every stored generation against its references."""

from __future__ import annotations

from typing import Any

import click

from grebench.cli._common import emit_json, show_progress, writer_store
from grebench.cli._options import settings_options
from grebench.settings import Settings

METRIC_CHOICES = ("gem", "gem-s", "gem-s-assw", "gem-raw")


class _Bars:
    """One rich bar per stage (preprocess, score) on stderr; nothing when disabled."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._progress: Any = None
        self._tasks: dict[str, Any] = {}

    def __call__(self, stage: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        if self._progress is None:
            from rich.console import Console
            from rich.progress import Progress

            self._progress = Progress(transient=True, console=Console(stderr=True))
            self._progress.start()
        if stage not in self._tasks:
            self._tasks[stage] = self._progress.add_task(stage, total=total)
        self._progress.update(self._tasks[stage], completed=done, total=total)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()


@click.command("score")
@click.option("--metric", "metrics", multiple=True, type=click.Choice(METRIC_CHOICES),
              help="Metric to compute (repeatable; default gem and gem-s).")
@click.option("--estimator", help="offline | hf:PATH | vllm:URL[,URL...] | sglang:URL (default: setting `estimator`).")
@click.option("--preprocessor", help="rules | imported | litellm:MODEL (default: the preprocessor setting).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
@settings_options
@click.pass_obj
def command(settings: Settings, metrics: tuple[str, ...], estimator: str | None, preprocessor: str | None,
            as_json: bool) -> None:
    """Score candidates' reviews with GEM / GEM-S; cached, so a rerun with nothing new makes no estimator call.

    A ranking uses one preprocessor for candidates and references alike: `imported` refuses to run when a
    reference has no imported judgment lines, and scores only the candidates whose text came with them.
    """
    from grebench.scoring import DEFAULT_METRICS, ScoringError, run_scoring

    with writer_store(settings) as store:
        args: dict[str, Any] = {"metrics": list(metrics) or list(DEFAULT_METRICS),
                                "estimator": estimator or settings.estimator,
                                "preprocessor": preprocessor or settings.preprocessor}
        run_id = store.start_run("score", args)
        bars = _Bars(show_progress(as_json))
        try:
            summary = run_scoring(store, settings, run_id, args["metrics"], args["estimator"], args["preprocessor"],
                                  progress=bars)
        except (ScoringError, ValueError) as exc:
            store.record_failure(run_id, "score", None, str(exc))
            store.finish_run(run_id, {"error": str(exc)})
            raise click.ClickException(str(exc)) from None
        finally:
            bars.close()
        summary["run_id"] = run_id
        summary["status"] = store.finish_run(run_id, summary)
    if as_json:
        emit_json(summary)
        return
    click.echo(f"scored {summary['pairs_scored']} pairs ({', '.join(summary['metrics'])}) with {summary['estimator']} "
               f"on {summary['preprocessor']} lines: {summary['estimator_calls']} estimator calls, "
               f"{summary['cache_hits']} cache hits")
    for item in summary["skipped"]:
        click.echo(f"skipped {item['count']} {item['what']} for {item['metric']}: {item['reason']}", err=True)

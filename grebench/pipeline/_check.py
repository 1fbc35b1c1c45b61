"""The setup checked before any stage runs: every part a run names must exist (issue 22).

Settings check their own types, bounds and enumerations when they load (:mod:`grebench.settings`); what needs the
registries is checked here, one layer up: the estimator and its proxy, the preprocessor, the source and the venues,
the metrics, the paper sample, and the built-in models named by ``hf:NAME``, ``local_candidates`` and
``local_judges`` (catalogue names, or checkpoint directories that exist).  Every command calls
:func:`check_setup` with its options before it opens the store, so a mistake costs nothing and is reported once,
as ``what = value: why``.
"""

from __future__ import annotations

from pathlib import Path

from grebench.pipeline._runner import RunOptions
from grebench.settings import Settings


class SetupError(ValueError):
    """A setting or an option names something that does not exist; the message says which, and what is allowed."""


def _catalogue_or_path(what: str, value: str, shown: str | None = None) -> None:
    from grebench.models import MODELS

    if value in MODELS or Path(value).expanduser().is_dir():
        return
    named = shown or repr(value)
    raise SetupError(f"{what} = {named}: {value!r} is not a built-in model ({', '.join(MODELS.names())}) nor a "
                     "checkpoint directory")


def check_setup(settings: Settings, options: RunOptions | None = None, *, source: bool = False) -> None:
    """Raise :class:`SetupError` for the first part that a run with ``options`` (and ``settings``) could not use.

    ``source``: the options' source is used by this command (ingest, run) and is checked too.
    """
    from grebench.ingest import SOURCES, SourceError, source_spec
    from grebench.pipeline._sample import parse_papers
    from grebench.registry import UnknownPart
    from grebench.scoring import METRICS, preprocessor_entry
    from grebench.scoring.estimators import ESTIMATORS, EstimatorInfo

    opts = options or RunOptions()
    checks: list[tuple[str, str, str]] = [
        ("--estimator" if opts.estimator else "estimator", opts.estimator_spec(settings), "estimator"),
        ("--preprocessor" if opts.preprocessor else "preprocessor", opts.preprocessor_spec(settings), "preprocessor"),
    ]
    if settings.proxy_estimator.strip():
        checks.append(("proxy_estimator", settings.proxy_estimator, "estimator"))
    if source:
        checks.append(("--source", opts.source, "source"))
    checks += [("venues", item, "venue") for item in settings.listed("venues")]
    for what, value, kind in checks:
        try:
            if kind == "estimator":
                entry, arg = ESTIMATORS.resolve(value)
                facts = entry.facts(EstimatorInfo)
                if facts.catalogue_arg and arg:
                    _catalogue_or_path(what, arg, repr(value))
                if facts.check_arg is not None:
                    facts.check_arg(arg)
            elif kind == "preprocessor":
                preprocessor_entry(value)
            elif kind == "source":
                SOURCES.resolve(value)
            else:
                SOURCES.resolve(source_spec(value))
        except SetupError:
            raise
        except (UnknownPart, SourceError, ValueError) as exc:
            raise SetupError(f"{what} = {value!r}: {exc}") from None
    for metric in opts.metric_names():
        if metric not in METRICS:
            raise SetupError(f"--metric = {metric!r}: not a metric; one of: {', '.join(METRICS.names())}")
    for name in ("local_candidates", "local_judges"):
        for item in settings.listed(name):
            _catalogue_or_path(name, item)
    try:
        parse_papers(opts.papers if opts.papers is not None else settings.papers)
    except ValueError as exc:
        raise SetupError(f"{'--papers' if opts.papers is not None else 'papers'}: {exc}") from None

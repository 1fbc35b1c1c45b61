"""The setup checked before any stage runs: every part a run names must exist (issue 22).

Settings check their own types, bounds and enumerations when they load (:mod:`grebench.settings`); what needs the
registries is checked here, one layer up: the estimator and its proxy, the preprocessor, the source and the venues,
the metrics, the paper sample, and the built-in models named by ``hf:NAME``, ``local_candidates`` and
``local_judges`` (catalogue names, or checkpoint directories that exist).  Every command calls
:func:`check_setup` with its options before it opens the store, so a mistake costs nothing and is reported once,
as ``what = value: why``.
"""

from __future__ import annotations

import errno
import os
import socket
import tempfile
from collections.abc import Iterable
from pathlib import Path

from grebench.pipeline._runner import RunOptions
from grebench.settings import AppSettings, RunSettings, Settings


class SetupError(ValueError):
    """A setting or an option names something that does not exist; the message says which, and what is allowed."""


def _catalogue_or_path(what: str, value: str, shown: str | None = None) -> None:
    from grebench.models import MODELS

    if value in MODELS or Path(value).expanduser().is_dir():
        return
    named = shown or repr(value)
    raise SetupError(f"{what} = {named}: {value!r} is not a built-in model ({', '.join(MODELS.names())}) nor a "
                     "checkpoint directory")


def _nearest_existing(path: Path) -> Path:
    while not path.exists() and path.parent != path:
        path = path.parent
    return path


def _write_probe(directory: Path) -> str | None:
    """Why nothing can be made in ``directory`` (an existing one), found by making and removing a temporary
    directory there, as a writer would (None: it can).  Permission bits do not say it: root passes every
    ``os.access`` check, yet cannot create anything in ``/proc`` or on a read-only mount."""
    try:
        probe = tempfile.mkdtemp(prefix=".grebench-probe-", dir=directory)
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    os.rmdir(probe)
    return None


def unusable_dir(path: Path) -> str | None:
    """Why ``path`` cannot be (or become) a directory this user writes in: a file, read-only, or below a file or a
    read-only directory; None when it can.  Nothing is left behind (a temporary probe is made and removed)."""
    if path.exists():
        if not path.is_dir():
            return "it is a file, not a directory"
        if not os.access(path, os.W_OK | os.X_OK):
            return "the directory is read-only for this user"
        why = _write_probe(path)
        return None if why is None else f"nothing can be written in it ({why})"
    above = _nearest_existing(path.parent)
    if not above.is_dir():
        return f"it cannot be created: {above} is a file, not a directory"
    if not os.access(above, os.W_OK | os.X_OK):
        return f"it cannot be created: {above} is read-only for this user"
    why = _write_probe(above)
    return None if why is None else f"it cannot be created in {above} ({why})"


def check_data_dir(settings: Settings) -> None:
    """Raise :class:`SetupError` when the data directory cannot hold the writer's store: a file, a read-only
    directory or store file, or a directory that cannot be created (a file or a read-only directory above it).

    Writers call it before any work (readers may read a read-only data directory); nothing is created here.
    """
    path = settings.data_path
    shown = f"data_dir = {str(path)!r}"
    why = unusable_dir(path)
    if why is not None:
        read_only = why.startswith("the directory is read-only")
        raise SetupError(f"{shown}: {why}{' (grebench writes its store there)' if read_only else ''}")
    db = settings.db_path
    if db.exists() and not (db.is_file() and os.access(db, os.R_OK | os.W_OK)):
        raise SetupError(f"{shown}: the store {db} is {'read-only' if db.is_file() else 'not a file'}")


def check_site_dir(settings: Settings, stages: Iterable[str]) -> None:
    """Raise :class:`SetupError` when a job that builds the site (its last stage, after hours of scoring) could not
    write ``site_dir``: said before its first stage.  The default (DATA_DIR/site) is checked with the data
    directory."""
    if "site" in stages and settings.site_dir:
        why = unusable_dir(settings.site_path)
        if why is not None:
            raise SetupError(f"site_dir = {str(settings.site_path)!r}: {why} (the site is built there)")


#: Where Gradio tries the port first, whatever ``app_host`` says (``gradio.http_server``): taken there, it fails too;
#: also the host of the local model servers.
_LOOPBACK = "127.0.0.1"


def _bind_error(host: str, port: int) -> str | None:
    """Why a listening socket could not bind ``host:port`` now (None: it could).  ``SO_REUSEADDR`` like uvicorn, so
    a port left in TIME_WAIT by the previous process counts as free."""
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        return f"the host {host!r} does not resolve ({exc.strerror})"
    family, kind, proto, _name, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return f"port {port} on {host} is in use (another program listens there)"
            return f"cannot listen on {host}:{port}: {exc.strerror or exc}"
    return None


def check_app_port(app: AppSettings, change: str = "the setting app_port (GREBENCH_APP_PORT)") -> None:
    """Raise :class:`SetupError` when the app could not listen on ``app_host:app_port`` now.

    A command that serves the app calls it with its other checks, before any job starts: a busy port found only
    when the app launches comes after the work began.  ``change``: what the operator changes to pick another port
    (``serve``: the setting; ``app``: its ``--port`` option too).  Another program may still take the port between
    this check and the launch; the launch then fails on its own.
    """
    host, port = app.app_host, app.app_port
    for where in dict.fromkeys((host, _LOOPBACK)):
        why = _bind_error(where, port)
        if why is not None:
            raise SetupError(f"app_port = {port}: {why}; free it or choose another port with {change}")


#: The stages that may start local model servers (bench: local candidates; score, validate: a ``vllm-local``
#: estimator; panel: local judges and the estimator's machine metrics).
LOCAL_SERVER_STAGES = frozenset({"bench", "score", "validate", "panel"})


def check_local_port(settings: Settings, stages: Iterable[str], options: RunOptions | None = None) -> None:
    """Raise :class:`SetupError` when a fixed ``local_server_port`` (and the ports after it, one per ``vllm_servers``
    server) is taken now while these stages would start a local model server on it: said before the job's first
    stage instead of when the server starts, after ingest and generation.  ``local_server_port = 0`` (the default:
    the OS chooses a free port each time) is never checked.  The estimator is the job's (``--estimator`` over the
    setting: :func:`grebench.pipeline._resolve.chosen`), not the setting alone."""
    first = settings.bench.local_server_port
    if not first or LOCAL_SERVER_STAGES.isdisjoint(stages):
        return
    from grebench.pipeline._resolve import chosen, chosen_models
    from grebench.scoring.estimators import estimator_info

    proxy, local_candidates, local_judges = chosen_models(settings)
    estimators = [chosen(settings, options or RunOptions())[0], proxy]
    vllm_local = any(estimator_info(e.strip()).local_servers for e in estimators if e.strip())
    if not (vllm_local or local_candidates or local_judges):
        return
    for port in range(first, min(first + (settings.scoring.vllm_servers if vllm_local else 1), 65536)):
        why = _bind_error(_LOOPBACK, port)
        if why is not None:
            raise SetupError(f"local_server_port = {first}: {why}; free it, or set local_server_port = 0 to let the "
                             "OS choose a free port")


def check_executor(run: RunSettings) -> None:
    """Raise :class:`SetupError` when ``executor = ray`` (the setting or ``--executor``) and Ray is not installed
    (found without importing it: a job that does not use Ray never imports it)."""
    import importlib.util

    from grebench.scoring.estimators import RAY_INSTALL

    if run.executor == "ray" and importlib.util.find_spec("ray") is None:
        raise SetupError(f"executor = 'ray': Ray is not installed; install the extra with {RAY_INSTALL}")


def check_setup(settings: Settings, options: RunOptions | None = None, *, source: bool = False) -> None:
    """Raise :class:`SetupError` for the first part that a run with ``options`` (and ``settings``) could not use.

    ``source``: the options' source is used by this command (ingest, run) and is checked too.
    """
    from grebench.ingest import SOURCES, SourceError, source_spec
    from grebench.pipeline._resolve import chosen, chosen_models
    from grebench.pipeline._sample import parse_papers
    from grebench.registry import UnknownPart
    from grebench.scoring import METRICS, preprocessor_entry
    from grebench.scoring.estimators import ESTIMATORS, EstimatorInfo

    opts = options or RunOptions()
    check_executor(settings.run)
    estimator, preprocessor, papers, metrics = chosen(settings, opts)
    proxy, local_candidates, local_judges = chosen_models(settings)
    checks: list[tuple[str, str, str]] = [
        ("--estimator" if opts.estimator else "estimator", estimator, "estimator"),
        ("--preprocessor" if opts.preprocessor else "preprocessor", preprocessor, "preprocessor"),
    ]
    if proxy:
        checks.append(("proxy_estimator", proxy, "estimator"))
    if settings.ingest.link_estimator.strip():
        checks.append(("link_estimator", settings.ingest.link_estimator.strip(), "estimator"))
    if source:
        checks.append(("--source", opts.source, "source"))
    checks += [("venues", item, "venue") for item in settings.listed("venues")]
    for what, value, kind in checks:
        try:
            if kind == "estimator":
                entry, arg = ESTIMATORS.resolve(value)
                info = entry.facts(EstimatorInfo)
                if info.check_arg is not None:
                    info.check_arg(arg)
                if info.catalogue_arg and arg:
                    _catalogue_or_path(what, arg, repr(value))
            else:
                part, arg = (preprocessor_entry(value) if kind == "preprocessor" else
                             SOURCES.resolve(value if kind == "source" else source_spec(value)))
                check_arg = part.info.check_arg  # sources and preprocessors check their ARG the same way
                if check_arg is not None:
                    check_arg(arg)
        except SetupError:
            raise
        except (UnknownPart, SourceError, ValueError) as exc:
            raise SetupError(f"{what} = {value!r}: {exc}") from None
    for metric in metrics:
        if metric not in METRICS:
            raise SetupError(f"--metric = {metric!r}: not a metric; one of: {', '.join(METRICS.names())}")
    for name, items in (("local_candidates", local_candidates), ("local_judges", local_judges)):
        for item in items:
            _catalogue_or_path(name, item)
    try:
        parse_papers(papers)
    except ValueError as exc:
        raise SetupError(f"{'--papers' if opts.papers is not None else 'papers'}: {exc}") from None

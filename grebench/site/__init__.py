"""The site stage: the static leaderboard site and the Gradio app. Both only read what earlier stages stored.

Public API (importing it never imports gradio; the app lives in :mod:`grebench.site._app`, loaded lazily):

* :func:`build_site` — render the static site from the store (``grebench site build``, last stage of ``run``).
* :func:`create_app`, :func:`launch_app`, :func:`launch_kwargs`, :func:`close_app` — the Gradio app over the Parquet
  exports.
* :func:`board_text` — the one text formatter of a stored leaderboard (``grebench run`` and ``grebench leaderboard``).
* :class:`Labels` — the words for stored ids, kinds' roles and colours (the store's ``labels`` table).
* :func:`publish_version`, :func:`versions`, :func:`version`, :func:`version_boards` — the dated, immutable board
  versions every publish keeps; :func:`version_changes` / :func:`changes_text` — what changed between two, and why.
* :func:`published_state` — the last published state (the Parquet export) for readers while a writer holds the store.
"""

from __future__ import annotations

from typing import Any

from grebench.site._build import (
    SCHEMA_VERSION,
    SITE_INPUTS,
    build_site,
    leaderboard_json,
    site_fingerprint,
    site_intact,
)
from grebench.site._changes import VersionChanges, changes_text, version_changes
from grebench.site._labels import Labels
from grebench.site._reader import published_state
from grebench.site._text import board_text
from grebench.site._timeline import board_histories, version_history
from grebench.site._versions import BoardVersion, publish_version, version, version_boards, versions


def create_app(*args: Any, **kwargs: Any) -> Any:
    """Build the Gradio app (imports gradio only when called); see :func:`grebench.site._app.create_app`."""
    from grebench.site._app import create_app as _create

    return _create(*args, **kwargs)


def launch_app(*args: Any, **kwargs: Any) -> Any:
    """Serve the Gradio app (imports gradio only when called)."""
    from grebench.site._app import launch_app as _launch

    return _launch(*args, **kwargs)


def launch(*args: Any, **kwargs: Any) -> Any:
    """``demo.launch`` with the app's launch arguments and its connection guard (timeouts and caps on connections,
    :mod:`grebench.site._connections`); the only way the product starts the app."""
    from grebench.site._app import launch as _launch

    return _launch(*args, **kwargs)


def close_app(demo: Any) -> None:
    """Close an app that :func:`launch` started and remove its published downloads (importing gradio only here)."""
    from grebench.site._app import close_app as _close

    _close(demo)


def launch_kwargs(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """The keyword arguments the app is launched with (host, port, blocked paths, queue limits)."""
    from grebench.site._app import launch_kwargs as _kwargs

    return _kwargs(*args, **kwargs)


def app_reader(*args: Any, **kwargs: Any) -> Any:
    """The app's cached reader of the Parquet exports (benchmarks use it)."""
    from grebench.site._app import reader

    return reader(*args, **kwargs)


__all__ = [
    "SCHEMA_VERSION",
    "SITE_INPUTS",
    "BoardVersion",
    "Labels",
    "VersionChanges",
    "app_reader",
    "board_histories",
    "board_text",
    "build_site",
    "changes_text",
    "close_app",
    "create_app",
    "launch",
    "launch_app",
    "launch_kwargs",
    "leaderboard_json",
    "publish_version",
    "published_state",
    "site_fingerprint",
    "site_intact",
    "version",
    "version_boards",
    "version_changes",
    "version_history",
    "versions",
]

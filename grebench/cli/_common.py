"""Helpers shared by commands: opening the writer store, JSON output, progress."""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from typing import Any, Iterator

import click
import duckdb

from grebench.settings import Settings
from grebench.store import Store, open_store


@contextmanager
def writer_store(settings: Settings) -> Iterator[Store]:
    """Open the writer's store, with a clear message when another writer holds it."""
    try:
        store = open_store(settings.db_path)
    except RuntimeError as exc:
        raise click.ClickException(str(exc)) from None
    except duckdb.Error as exc:
        raise click.ClickException(_store_failure(settings, exc)) from None
    try:
        yield store
    except duckdb.Error as exc:  # e.g. disk full: the database is invalidated; say so plainly, no traceback
        _close_quietly(store)
        raise click.ClickException(_store_failure(settings, exc)) from None
    except BaseException:
        store.close()
        raise
    else:
        try:
            store.close()
        except duckdb.Error as exc:
            _close_quietly(store)
            raise click.ClickException(_store_failure(settings, exc)) from None


def _close_quietly(store: Store) -> None:
    """Close a connection that may be invalidated (its checkpoint would fail again)."""
    try:
        store.con.close()
    except duckdb.Error:
        pass


def _store_failure(settings: Settings, exc: BaseException) -> str:
    """One clear line for a store that could not be written (the WAL keeps every committed transaction)."""
    message = str(exc)
    cause = "no space left on device" if "No space left on device" in message else message.splitlines()[0][:300]
    return (f"the store {settings.db_path} could not be written: {cause}. Work committed before this point is "
            "kept; free space (or fix the cause) and run the command again to resume.")


def emit_json(obj: Any) -> None:
    """Print one JSON object on stdout (machine-readable output)."""
    click.echo(json.dumps(obj, indent=2, default=str, ensure_ascii=False))


def show_progress(as_json: bool) -> bool:
    """Progress bars go to stderr, only on a terminal and never in --json mode."""
    return not as_json and sys.stderr.isatty()


class Progress:
    """A small progress display: a rich bar on a terminal, nothing otherwise."""

    def __init__(self, label: str, total: int | None, enabled: bool) -> None:
        self._bar: Any = None
        if enabled:
            from rich.console import Console
            from rich.progress import Progress as RichProgress

            self._bar = RichProgress(transient=True, console=Console(stderr=True))
            self._task = self._bar.add_task(label, total=total)

    def __enter__(self) -> Progress:
        if self._bar is not None:
            self._bar.start()
        return self

    def advance(self, _item: Any = None) -> None:
        """Count one finished item."""
        if self._bar is not None:
            self._bar.advance(self._task)

    def __exit__(self, *exc: Any) -> None:
        if self._bar is not None:
            self._bar.stop()

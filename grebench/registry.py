"""Registries of named, pluggable parts: estimators, venue sources, candidate kinds, controls, judges, models.

A part registers itself with a decorator in the module that implements it::

    from grebench.scoring.estimators import ESTIMATORS

    @ESTIMATORS.register("toy", spec="toy[:ARG]", summary="A toy evaluation-LM")
    def make_toy(arg: str, context: EstimatorContext) -> Estimator: ...

A registry imports its built-in modules on first use (never at ``import grebench``: heavy libraries stay unloaded
until a part is used, and each module keeps its heavy imports inside functions).  Third-party packages add parts
through the ``grebench`` entry-point group, the way ``llm`` plugins do: every entry point names a module whose
import runs its registrations::

    [project.entry-points.grebench]
    toy = "grebench_toy.estimator"

A spec string such as ``hf:smollm2-135m`` is split in exactly one place (:meth:`Registry.split`): the part's
name before the first colon, its argument after it.  What the product knows about a part without building it is
its registration's metadata, read as a facts dataclass (:meth:`Entry.facts`: ``EstimatorInfo``, ``KindInfo``).
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from importlib.metadata import entry_points
from typing import Any, Generic, TypeVar

log = logging.getLogger(__name__)
ENTRY_POINT_GROUP = "grebench"
T = TypeVar("T")
F = TypeVar("F")

_PLUGINS_LOCK = threading.RLock()
_PLUGINS_LOADED = False
_PLUGIN_ERRORS: dict[str, str] = {}


class UnknownPart(ValueError):
    """A name that no registry entry has; the message lists the known names."""


@dataclass(frozen=True)
class Entry(Generic[T]):
    """One registered part: its name, the object (a factory, a class, an instance), and how users write it."""

    name: str
    obj: T
    summary: str = ""
    spec: str = ""
    origin: str = ""
    meta: Mapping[str, Any] = field(default_factory=dict)

    def facts(self, cls: Callable[..., F]) -> F:
        """The entry's metadata as a facts dataclass ``cls`` (first field: the name; fields missing from the meta
        keep their defaults; meta keys that are not fields are left out)."""
        names = {f.name for f in fields(cls)} - {"name"}  # type: ignore[arg-type]
        return cls(self.name, **{k: v for k, v in self.meta.items() if k in names})


def load_plugins() -> dict[str, str]:
    """Import every module named in the ``grebench`` entry-point group (once); return the ones that failed.

    A plugin that fails to import is logged and reported (``grebench plugins``), never fatal: one broken
    third-party package must not take the service down.
    """
    global _PLUGINS_LOADED
    with _PLUGINS_LOCK:
        if not _PLUGINS_LOADED:
            _PLUGINS_LOADED = True
            for ep in entry_points(group=ENTRY_POINT_GROUP):
                try:
                    ep.load()
                except Exception as exc:  # a broken plugin is reported, not fatal
                    _PLUGIN_ERRORS[f"{ep.name} = {ep.value}"] = f"{type(exc).__name__}: {exc}"
                    log.warning("grebench plugin %s (%s) failed to load: %s", ep.name, ep.value, exc)
        return dict(_PLUGIN_ERRORS)


def reload_plugins() -> dict[str, str]:
    """Look at the entry points again (after a plugin was installed into a running process; tests use this)."""
    global _PLUGINS_LOADED
    with _PLUGINS_LOCK:
        _PLUGINS_LOADED = False
        _PLUGIN_ERRORS.clear()
    return load_plugins()


class Registry(Generic[T]):
    """Named parts of one kind; built-in modules and plugins are imported on first use."""

    def __init__(self, kind: str, builtins: Sequence[str] = ()) -> None:
        self.kind = kind
        self._builtins = tuple(builtins)
        self._entries: dict[str, Entry[T]] = {}
        self._lock = threading.RLock()
        self._builtins_loaded = False

    # -- registering -------------------------------------------------------------------------------------------
    def register(self, name: str, *, summary: str = "", spec: str = "", **meta: Any) -> Callable[[T], T]:
        """Decorator: register the decorated object under ``name``."""

        def decorate(obj: T) -> T:
            self.add(name, obj, summary=summary, spec=spec, **meta)
            return obj

        return decorate

    def add(self, name: str, obj: T, *, summary: str = "", spec: str = "", **meta: Any) -> T:
        """Register ``obj`` under ``name``; a second, different registration of one name is an error."""
        if not name or ":" in name or name != name.strip():
            raise ValueError(f"{self.kind} name must be non-empty, without ':' or surrounding spaces: {name!r}")
        origin = getattr(obj, "__module__", None) or type(obj).__module__
        entry = Entry(name, obj, summary or _first_line(obj), spec or name, origin, dict(meta))
        with self._lock:
            old = self._entries.get(name)
            if old is not None and old.origin != origin:
                raise ValueError(f"{self.kind} {name!r} is registered twice: by {old.origin} and by {origin}")
            self._entries[name] = entry
        return obj

    # -- looking up --------------------------------------------------------------------------------------------
    def _load(self) -> None:
        with self._lock:
            if not self._builtins_loaded:
                self._builtins_loaded = True
                for module in self._builtins:
                    importlib.import_module(module)
        load_plugins()

    def get(self, name: str) -> Entry[T]:
        """The entry named ``name``, or :class:`UnknownPart` naming the known ones."""
        self._load()
        entry = self._entries.get(name)
        if entry is None:
            known = ", ".join(e.spec for e in self.entries()) or "none"
            raise UnknownPart(f"unknown {self.kind} {name!r} (known: {known})")
        return entry

    @staticmethod
    def split(spec: str) -> tuple[str, str]:
        """``NAME[:ARG]`` (a spec, or a stored id such as ``hf:NAME@sha:...``) as (name, argument): the one place
        specs are parsed."""
        name, _, arg = spec.strip().partition(":")
        return name.strip(), arg.strip()

    def resolve(self, spec: str) -> tuple[Entry[T], str]:
        """Split ``NAME[:ARG]`` into the registered entry and its argument."""
        name, arg = self.split(spec)
        return self.get(name), arg

    def __contains__(self, name: object) -> bool:
        self._load()
        return name in self._entries

    def __iter__(self) -> Iterator[Entry[T]]:
        return iter(self.entries())

    def names(self) -> list[str]:
        """Registered names, in registration order (built-ins first, then plugins)."""
        self._load()
        return list(self._entries)

    def entries(self) -> list[Entry[T]]:
        """Registered entries, in registration order."""
        self._load()
        return list(self._entries.values())

    def help(self) -> str:
        """One line listing how each part is written (CLI help and error messages use it)."""
        return " | ".join(e.spec for e in self.entries())


def _first_line(obj: Any) -> str:
    doc = getattr(obj, "__doc__", None) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""

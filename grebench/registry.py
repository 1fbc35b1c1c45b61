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
its registration's facts: each registry names a frozen dataclass (``EstimatorInfo``, ``KindInfo``, ``SourceInfo``,
...; :class:`NoFacts` where a kind declares none), the keywords of a registration are built into it when the part
registers, and a keyword that is not one of its fields is refused there, at import (a misspelt fact is never
stored and silently ignored).  Readers take :attr:`Entry.info`.
"""

from __future__ import annotations

import difflib
import importlib
import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
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
class NoFacts:
    """The facts of a kind of part that declares none beyond its name (a registration with any keyword fact is
    refused)."""

    name: str


@dataclass(frozen=True)
class Entry(Generic[T]):
    """One registered part: its name, the object (a factory, a class, an instance), and how users write it."""

    name: str
    obj: T
    summary: str = ""
    spec: str = ""
    origin: str = ""
    #: the registration's facts, an instance of the registry's facts dataclass (built and checked at registration)
    info: Any = None

    def facts(self, cls: type[F]) -> F:
        """The entry's facts as ``cls`` (the registry's facts dataclass): a :class:`TypeError` when the registry
        declares another (a reader asking the wrong registry)."""
        if not isinstance(self.info, cls):
            raise TypeError(f"{self.name!r} was registered with {type(self.info).__name__} facts, not {cls.__name__}")
        return self.info


def build_facts(kind: str, name: str, cls: Callable[..., F], meta: Mapping[str, Any]) -> F:
    """``cls(name, **meta)``, or a :class:`TypeError` naming each keyword that is not a field of ``cls`` (with the
    closest field) and what the registry's facts are: a registration's misspelt fact fails where it is written."""
    known = [f.name for f in fields(cls) if f.name != "name"]  # type: ignore[arg-type]
    unknown = [key for key in meta if key not in known]
    if unknown:
        hints = []
        for key in unknown:
            close = difflib.get_close_matches(key, known, n=1)
            hints.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        raise TypeError(f"{kind} {name!r}: unknown registration fact {', '.join(hints)}; "
                        f"{getattr(cls, '__name__', cls)} declares: {', '.join(known) or 'none'}")
    return cls(name, **meta)


@dataclass(frozen=True)
class PartId:
    """A part's spec or stored id as a value: ``KIND[:MODEL][@VERSION][:KEY=VALUE...]``, parsed here once and
    printed by ``str()`` in one place (issue 49: three modules parsed the grammar with their own regular
    expressions).

    ``hf:smollm2-135m@a672150f:dtype=bfloat16:chat=1a2b`` → kind ``hf``, model ``smollm2-135m``, version
    ``a672150f``, options dtype and chat.  ``offline:wb-bigram:corpus=ab12`` has no version.  A model may hold
    ``@`` and ``:`` (``hf:/ckpt/my@model@5e6f7a8b``, ``vllm:http://127.0.0.1:8000``): the version is what follows
    the last ``@`` when no ``/`` comes after it, and options are the trailing ``KEY=VALUE`` parts (no ``/``).
    """

    kind: str
    model: str = ""
    version: str = ""
    options: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, text: str) -> PartId:
        """The parts of ``text`` (``str(PartId.parse(t)) == t.strip()`` for every well-formed id or spec)."""
        kind, _, rest = text.strip().partition(":")
        version = ""
        at = rest.rfind("@")
        if at >= 0 and "/" not in rest[at + 1:]:
            rest, tail = rest[:at], rest[at + 1:]
            version, _, tail = tail.partition(":")
            parts = [p for p in tail.split(":")] if tail else []
            return cls(kind.strip(), rest, version, tuple(_option(p) for p in parts))
        segments = rest.split(":") if rest else []
        options: list[tuple[str, str]] = []
        while len(segments) > 1 and "=" in segments[-1] and "/" not in segments[-1]:
            options.insert(0, _option(segments.pop()))
        return cls(kind.strip(), ":".join(segments), version, tuple(options))

    def __str__(self) -> str:
        out = self.kind + (f":{self.model}" if self.model else "") + (f"@{self.version}" if self.version else "")
        return out + "".join(f":{key}={value}" if value or key else ":" for key, value in self.options)

    @property
    def spec(self) -> str:
        """``KIND[:MODEL]``: what a user writes (no version, no options)."""
        return self.kind + (f":{self.model}" if self.model else "")

    def option(self, key: str) -> str | None:
        """The value of option ``key`` (None when the id has none)."""
        return next((value for k, value in self.options if k == key), None)


def _option(part: str) -> tuple[str, str]:
    key, _, value = part.partition("=")
    return key, value


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

    def __init__(self, kind: str, builtins: Sequence[str] = (), facts: type[Any] = NoFacts) -> None:
        self.kind = kind
        self.facts = facts              # the dataclass a registration's keyword facts are built into
        self._builtins = tuple(builtins)
        self._entries: dict[str, Entry[T]] = {}
        self._lock = threading.RLock()
        self._builtins_loaded = False

    # -- registering -------------------------------------------------------------------------------------------
    def register(self, name: str, *, summary: str = "", spec: str = "", **meta: Any) -> Callable[[T], T]:
        """Decorator: register the decorated object under ``name`` (``meta``: fields of the registry's facts)."""

        def decorate(obj: T) -> T:
            self.add(name, obj, summary=summary, spec=spec, **meta)
            return obj

        return decorate

    def add(self, name: str, obj: T, *, summary: str = "", spec: str = "", **meta: Any) -> T:
        """Register ``obj`` under ``name`` with ``meta`` as its facts (:func:`build_facts`: an unknown key is a
        :class:`TypeError`); a second, different registration of one name is an error."""
        if not name or ":" in name or name != name.strip():
            raise ValueError(f"{self.kind} name must be non-empty, without ':' or surrounding spaces: {name!r}")
        info = build_facts(self.kind, name, self.facts, meta)
        origin = getattr(obj, "__module__", None) or type(obj).__module__
        entry = Entry(name, obj, summary or _first_line(obj), spec or name, origin, info)
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

"""Record which settings a part reads (the declared-inputs tests of issues 49 and 61)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any


class Reads(Mapping[str, Any]):
    """A settings mapping that records every name read from it."""

    def __init__(self, values: Mapping[str, Any], seen: set[str]) -> None:
        self._values, self.seen = dict(values), seen

    def __getitem__(self, key: str) -> Any:
        self.seen.add(key)
        return self._values[key]

    def get(self, key: str, default: Any = None) -> Any:
        self.seen.add(key)
        return self._values.get(key, default)

    def __iter__(self) -> Iterator[str]:
        raise AssertionError("the panel walked every setting: it must read the ones it declares")

    def __len__(self) -> int:
        return len(self._values)


def undeclared_reads(seen: set[str]) -> list[str]:
    """The settings in ``seen`` that the panel declares neither as inputs nor as operational."""
    from grebench.panel import PANEL_INPUTS

    return sorted(seen - PANEL_INPUTS.names)

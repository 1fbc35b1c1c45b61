"""The ``grebench`` command line: a thin layer, one module per command."""

from grebench.cli._main import main

__all__ = ["main"]

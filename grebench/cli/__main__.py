"""`python -m grebench.cli` runs the command line."""

from grebench.cli import main

main()
